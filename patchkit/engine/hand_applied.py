"""A diff patch found applied by hand: every file of the diff holds its patched form, patchkit
has no record of writing it, and undoing the diff gives exactly the release's bytes (the sha256
the dist-info RECORD lists). That is a tree where the diff was captured (`patchkit capture`) or
applied with `git apply` / `patch`: the change is there, but not because upstream made it, so
it reads as `applied` (not `upstream-fixed`) and `revert` takes it back to the release's bytes,
proven by the RECORD, never guessed."""

from __future__ import annotations

from typing import Any, Callable

from patchkit.releases import dist_record
from patchkit.engine import registry
from patchkit.store.state import State
from patchkit.store.target import Target
from patchkit.base.constants import DIFF_SUFFIXES
from patchkit.base.util import sha256

DETAIL = "applied by hand (captured, or git apply): patchkit did not write it; `patchkit revert` restores the release's bytes"


def is_diff(pid: str) -> bool:
    """Whether a patch comes from a diff file (cheap: no patch is imported)."""
    return registry.source_file(pid).name.endswith(DIFF_SUFFIXES)


def release_bytes(target: Any, patch: Any, read: Callable[[str], bytes | None], state: State | None) -> dict[str, bytes] | None:
    """{file: the release's bytes} when `patch` is a diff applied by hand on `target` (see the
    module docstring), else None."""
    from patchkit.diffs.diffpatch import apply_hunks

    diff = getattr(patch, "DIFF", None)
    if diff is None or not isinstance(target, Target) or not diff.files:
        return None
    hashes = dist_record.release_hashes(target.site, target.version)
    if hashes is None:
        return None
    found: dict[str, bytes] = {}
    for file in diff.files:
        rel = file.path
        current, expected = read(rel), hashes.get(rel)
        if (state is not None and rel in state.files) or current is None or expected is None or sha256(current) == expected[0]:
            return None
        before = apply_hunks(current, file.hunks, reverse=True)
        if before is None or sha256(before) != expected[0]:
            return None
        found[rel] = before
    return found
