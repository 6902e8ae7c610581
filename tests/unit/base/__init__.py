"""Unit tests of patchkit/base/: errors, util, the crash log."""
