"""Kept for the existing tests: the helper lives in `patchkit.testing` (installed with patchkit,
so external patch sets can test their patches the same way)."""

from patchkit.testing import PatchTest

__all__ = ["PatchTest"]
