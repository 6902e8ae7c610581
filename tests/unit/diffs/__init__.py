"""Unit tests of patchkit/diffs/: parsing, units, per-unit change, format-patch, rebase, release blobs."""
