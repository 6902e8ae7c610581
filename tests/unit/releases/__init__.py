"""Unit tests of patchkit/releases/: the manifests, the RECORD, wheel downloads, declared ranges."""
