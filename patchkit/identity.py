"""A patch's identity: the sha256 of its module's source file, the digest the image labels
carry and the state file records per file. Read from disk without importing the patch (no
libcst), so that `status` can tell an outdated tree from hashes alone."""

from __future__ import annotations

import functools
import os

from patchkit import registry
from patchkit.errors import PatchkitError
from patchkit.util import sha256


def digest(patch_id: str) -> str:
    """sha256 of the patch module's file, wherever its patch set lives (built-in, an entry
    point's package, a --patches folder)."""
    if patch_id not in registry.patch_ids():
        raise PatchkitError(f"patch {patch_id}: not a known patch (see `patchkit list`)")
    path = str(registry.source_file(patch_id))
    try:
        info = os.stat(path)
    except OSError as exc:
        raise PatchkitError(f"cannot read {path}: {exc.strerror}") from None
    # Keyed by the file's stat too: a patch file edited while this process runs is read again.
    return _file_digest(path, info.st_mtime_ns, info.st_size)


@functools.lru_cache(maxsize=None)
def _file_digest(path: str, mtime_ns: int, size: int) -> str:
    try:
        with open(path, "rb") as handle:
            return sha256(handle.read())
    except OSError as exc:
        raise PatchkitError(f"cannot read {path}: {exc.strerror}") from None


def digests(patch_ids: list[str] | tuple[str, ...]) -> dict[str, str]:
    return {pid: digest(pid) for pid in patch_ids}
