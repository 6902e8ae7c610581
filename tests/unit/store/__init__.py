"""Unit tests of patchkit/store/: the state file, the lock, the transaction, the target's metadata."""
