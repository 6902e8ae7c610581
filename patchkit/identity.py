"""A patch's identity: the sha256 of its module's source file, the digest the image labels
carry and the state file records per file. Read from disk without importing the patch (no
libcst), so that `status` can tell an outdated tree from hashes alone."""

from __future__ import annotations

import functools
import importlib.util

from patchkit import registry
from patchkit.errors import PatchkitError
from patchkit.util import sha256


@functools.lru_cache(maxsize=None)
def digest(patch_id: str) -> str:
    name = f"{registry.PATCHES_PACKAGE}.{patch_id.replace('-', '_')}"
    spec = importlib.util.find_spec(name)
    if spec is None or spec.origin is None:
        raise PatchkitError(f"patch {patch_id}: no module {name}")
    try:
        with open(spec.origin, "rb") as handle:
            return sha256(handle.read())
    except OSError as exc:
        raise PatchkitError(f"patch {patch_id}: cannot read {spec.origin}: {exc.strerror}") from None


def digests(patch_ids: list[str] | tuple[str, ...]) -> dict[str, str]:
    return {pid: digest(pid) for pid in patch_ids}
