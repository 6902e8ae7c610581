"""Unit tests of patchkit/authoring/: Patch, anchors, edits, snippets, the patch kind, libcst's names."""
