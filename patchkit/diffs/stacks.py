"""Diffs stacked on other diffs, told from their index hashes: a diff whose file's pre-image blob
is another loaded diff's post-image blob of that file was made on a tree with that diff applied
(the field keeps patches on top of its per-release patch). Such a diff is ordered after the one
under it (as `Patchkit-After:` would order it), `list` says so, and `rebase` of the set rebases
the upper diff onto the rebased lower one.

Said once, here, for every caller (the loaded set's order, `rebase` of several diffs, `bump`):
what is stacked on what (`stack`, with the cached releases' predicates) and when an upper diff
depends on a lower one that is not finished on the release it is moved to (`Unfinished`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

from patchkit.diffs import release_blobs
from patchkit.diffs.release_blobs import shared_files as shared_files  # the files of one diff on another's post-image
from patchkit.diffs.unidiff import DiffPatchFile


def stacked_on(diffs: dict[str, DiffPatchFile],
               made_for_a_release: Callable[[DiffPatchFile], bool] = lambda diff: False,
               on_lower_tree: Callable[[DiffPatchFile, DiffPatchFile, list[str]], bool] = lambda upper, lower, shared: False,
               ) -> dict[str, dict[str, list[str]]]:
    """{id: {id of a diff under it: the files it is stacked on there}} for the diffs that are. A
    diff whose every pre-image is a release's file (`made_for_a_release`) was made on that release,
    whatever other diff leaves the same bytes on some of its files (a folder of per-release diffs,
    an older one back-porting what a later release has), unless its pre-image is the whole tree
    a lower diff leaves (`on_lower_tree`: its other files are the lower one's base release's): a
    stack rebased to V, whose lower post-image on V may well be the next release's files. A file
    whose pre-image two diffs leave is under the one sharing the most files with it."""
    found: dict[str, dict[str, list[str]]] = {}
    for pid, upper in diffs.items():
        shared = {other: shared_files(upper, lower) for other, lower in diffs.items() if other != pid}
        shared = {other: files for other, files in shared.items() if files}
        if not shared:
            continue
        if made_for_a_release(upper) and not any(on_lower_tree(upper, diffs[other], files)
                                                 for other, files in shared.items()):
            continue
        for other in sorted(shared, key=lambda o: (-len(shared[o]), o)):
            taken = {rel for files in found.get(pid, {}).values() for rel in files}
            files = [rel for rel in shared[other] if rel not in taken]
            if files:
                found.setdefault(pid, {})[other] = files
    return found


def ordered(diffs: dict[str, DiffPatchFile], under: dict[str, dict[str, list[str]]]) -> list[str]:
    """The ids, each after the diffs it is stacked on (`under`: `stacked_on`'s answer; then by id);
    a cycle keeps the id order."""
    below = {pid: set(found) for pid, found in under.items()}
    pending, out = sorted(diffs), []
    while pending:
        ready = [pid for pid in pending if not below.get(pid, set()) & set(pending)] or pending[:1]
        out.append(ready[0])
        pending.remove(ready[0])
    return out


@dataclass(frozen=True)
class Stack:
    """The diffs of a set as a stack: which is on which (`under`: {id: {id under it: the files it is
    stacked on there}}) and the order they apply in (`order`). Every caller asks `stack` for it:
    bump, rebase of several diffs and the loaded set's order share one definition."""

    under: dict[str, dict[str, list[str]]]
    order: tuple[str, ...]


def stack(diffs: dict[str, DiffPatchFile]) -> Stack:
    """The stack of `diffs`, told from their index hashes against the cached releases (a diff made
    for a release is not stacked on another that leaves the same bytes: `stacked_on`)."""
    under = stacked_on(diffs, release_blobs.made_for_a_release, release_blobs.on_lower_tree)
    return Stack(under, tuple(ordered(diffs, under)))


class Unfinished:
    """The rule "an upper diff waits on a lower one", said once: re-made on V in stack order, a
    diff's file is unfinished there where the diff conflicts in it, or where it is stacked on a
    lower diff whose file there is unfinished (it was made on bytes the lower's resolution will
    change); a diff depends on each lower one whose unfinished files it is stacked on. Three
    deep: a diff on a middle one that depends on the lowest depends on the middle one in those
    files, though it shares none with the lowest."""

    def __init__(self, under: dict[str, dict[str, list[str]]]) -> None:
        self.under = under
        self.files: dict[str, set[str]] = {}  # id -> its unfinished files, in stack order so far

    def depends_on(self, pid: str) -> dict[str, list[str]]:
        """{id of a lower diff: the files `pid` is stacked on where that one is unfinished}."""
        found = {lower: [rel for rel in shared if rel in self.files.get(lower, set())]
                 for lower, shared in self.under.get(pid, {}).items()}
        return {lower: files for lower, files in found.items() if files}

    def add(self, pid: str, conflicts: Iterable[str]) -> dict[str, list[str]]:
        """`pid`, next in stack order, conflicting in the files `conflicts`: its unfinished files
        recorded; what it depends on returned (`depends_on`)."""
        waits = self.depends_on(pid)
        self.files[pid] = set(conflicts) | {rel for files in waits.values() for rel in files}
        return waits
