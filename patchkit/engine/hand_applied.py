"""A diff patch found applied by hand: every file of the diff holds its patched form, patchkit
has no record of writing it, and undoing the diff gives exactly the release's bytes (the sha256
the dist-info RECORD lists). That is a tree where the diff was captured (`patchkit capture`) or
applied with `git apply` / `patch`: the change is there, but not because upstream made it, so
it reads as `applied` (not `upstream-fixed`) and `revert` takes it back to the release's bytes,
proven by the RECORD, never guessed."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable

from patchkit.releases import dist_record
from patchkit.store.state import State
from patchkit.store.target import Target
from patchkit.base.util import sha256

if TYPE_CHECKING:
    from patchkit.authoring.patch import Patch


def detail(target: Target) -> str:
    return (f"applied by hand (captured, or git apply): patchkit did not write it; "
            f"`{target.naming.command('revert')}` restores the release's bytes")


def release_bytes(target: Any, patch: Patch, read: Callable[[str], bytes | None],
                  state: State | None) -> dict[str, bytes] | None:
    """{file: the release's bytes} when `patch` is applied by hand on `target` (see the module
    docstring; only a patch whose change can be undone exactly can tell: `before_change`), else None."""
    if not isinstance(target, Target) or not patch.TARGETS:
        return None
    hashes = dist_record.release_hashes(target.site, target.version)
    if hashes is None:
        return None
    found: dict[str, bytes] = {}
    for rel in patch.TARGETS:
        current, expected = read(rel), hashes.get(rel)
        if (state is not None and rel in state.files) or current is None or expected is None or sha256(current) == expected[0]:
            return None
        before = patch.before_change(rel, current)
        if before is None or sha256(before) != expected[0]:
            return None
        found[rel] = before
    return found
