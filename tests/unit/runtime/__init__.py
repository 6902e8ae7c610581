"""Unit tests of patchkit/runtime/: verify and verify --url."""
