"""Diffs stacked on other diffs, told from their index hashes: a diff whose file's pre-image blob
is another loaded diff's post-image blob of that file was made on a tree with that diff applied
(the field keeps patches on top of its per-release patch). Such a diff is ordered after the one
under it (as `Patchkit-After:` would order it), `list` says so, and `rebase` of the set rebases
the upper diff onto the rebased lower one.
"""

from __future__ import annotations

from collections.abc import Callable

from patchkit.diffs.unidiff import DiffPatchFile


def _same_blob(a: str | None, b: str | None) -> bool:
    """Two index hashes of one blob (either may be abbreviated)."""
    if not a or not b:
        return False
    return a.startswith(b) or b.startswith(a)


def shared_files(upper: DiffPatchFile, lower: DiffPatchFile) -> list[str]:
    """The files of `upper` whose pre-image is `lower`'s post-image."""
    after = {f.path: f.new_blob for f in lower.files if f.new_path is not None}
    return [f.path for f in upper.files if f.old_path is not None and _same_blob(f.old_blob, after.get(f.path))]


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


def ordered(diffs: dict[str, DiffPatchFile]) -> list[str]:
    """The ids, each after the diffs it is stacked on (then by id); a cycle keeps the id order."""
    under = {pid: set(found) for pid, found in stacked_on(diffs).items()}
    pending, out = sorted(diffs), []
    while pending:
        ready = [pid for pid in pending if not under.get(pid, set()) & set(pending)] or pending[:1]
        out.append(ready[0])
        pending.remove(ready[0])
    return out
