"""A diff patch found applied by hand: every file of the diff holds its patched form, patchkit
has no record of writing it, and undoing the diff gives exactly the release's bytes (the sha256
the dist-info RECORD lists). That is a tree where the diff was captured (`patchkit capture`) or
applied with `git apply` / `patch`: the change is there, but not because upstream made it, so
it reads as `applied` (not `upstream-fixed`) and `revert` takes it back to the release's bytes,
proven by the RECORD, never guessed.

A stack of diffs applied that way (`git apply` of each, lower first) is one too: a file several
loaded diffs change is undone from the top of their stack down (a diff whose change is not there
is passed over), and where that ends on the RECORD's bytes, each diff undone on the way was
applied by hand there."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
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
                  state: State | None, stack: Sequence[Patch] = ()) -> dict[str, bytes] | None:
    """{file: the release's bytes} when `patch` is applied by hand on `target` (see the module
    docstring; only a patch whose change can be undone exactly can tell: `before_change`), else None.
    `stack`: the loaded diffs in their stacking order (`patch` among them), undone from the top
    on each file they share with it."""
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
        before = _undone(rel, current, patch, [p for p in stack if rel in p.TARGETS] or [patch])
        if before is None or sha256(before) != expected[0]:
            return None
        found[rel] = before
    return found


def _undone(rel: str, current: bytes, patch: Patch, stack: Sequence[Patch]) -> bytes | None:
    """`current` with the diffs of `stack` (lowest first) undone from the top, each whose change
    is there; None when `patch`'s is not."""
    undone = False
    for other in reversed(stack):
        before = other.before_change(rel, current)
        if before is not None:
            current, undone = before, undone or other is patch
    return current if undone else None


def stacked_with(patch: Patch, patches: Mapping[str, Patch], order: Callable[[list[str]], list[str]]) -> list[Patch]:
    """The loaded patches sharing a file with `patch`, `patch` too, in their stacking order."""
    ids = [pid for pid, other in patches.items() if other is patch or set(other.TARGETS) & set(patch.TARGETS)]
    return [patches[pid] for pid in order(ids)]
