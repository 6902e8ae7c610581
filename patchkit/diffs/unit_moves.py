"""Where a diff's code is in a release that moved it: a unit found by its name in another file of
the package (`finder`, `in_other_file`, `place_moved_unit`), a file whose folder moved (`relocated`),
a file the diff creates in a folder that moved (`created_destination`) or that the release lacks
(`uncreatable`); and a file's pre-image (`base_for`).
"""

from __future__ import annotations

from collections.abc import Callable

from patchkit.diffs import blocks, code_place
from patchkit.diffs import units as units_mod
from patchkit.diffs.hunk_apply import absent_blocks, apply_hunks
from patchkit.diffs.resolution import ABSENT, CONFLICT, MOVED, UPSTREAM, FileResolution, UnitOutcome
from patchkit.diffs.three_way import merge_unit
from patchkit.diffs.unidiff import FileDiff, git_blob_sha1


# (unit name, the diff's file) -> [(another file of the package, the unit's bytes there)]
Elsewhere = Callable[[str, str], list[tuple[str, bytes]]]


def finder(files: Callable[[], list[str]], read: Callable[[str], bytes | None], leave_out: frozenset[str] = frozenset(),
           defined: dict[bytes, set[str]] | None = None) -> Elsewhere:
    """Where else in the package (`files()`: its Python files, but `leave_out`) a unit of that name
    is: the files that define those names (an index of every `def NAME` / `class NAME`, made on the
    first search by reading each file once; `defined`: one to share between the diffs of a stack, the
    release's files all rebased against), then `patchkit.diffs.units` on the files that hold them."""
    import re

    defined = {} if defined is None else defined  # a name -> the files with a `def NAME` or `class NAME`
    texts: dict[str, dict[str, bytes]] = {}

    def index() -> None:
        for other in files():
            data = read(other)
            for found_name in set(re.findall(rb"(?:def|class)\s+(\w+)", data or b"")):
                defined.setdefault(found_name, set()).add(other)

    def find(name: str, rel: str) -> list[tuple[str, bytes]]:
        parts = name.split(".")
        if len(parts) > 2 or not all(part.isidentifier() for part in parts):
            return []  # <imports>, a statement: not a unit that moves by name
        if not defined:
            index()
        if len(parts) == 2:  # a method: files defining both the method's and the class's name
            candidates = defined.get(parts[1].encode(), set()) & defined.get(parts[0].encode(), set())
        else:
            candidates = defined.get(name.encode(), set())
        found = []
        for other in sorted(candidates - leave_out):
            if other == rel:
                continue
            data = read(other)
            if data is None:
                continue
            if other not in texts:
                try:
                    texts[other] = units_mod.texts(data)
                except (SyntaxError, ValueError):
                    texts[other] = {}
            if name in texts[other]:
                found.append((other, texts[other][name]))
        return found

    return find


def found_by_name(rel: str, name: str, elsewhere: Elsewhere, package: code_place.Package | None) -> str:
    """What a block of a file the release does not have says of a unit found by its name in one other
    file of the package (changed there too: a conflict): `moved to that file`, at its `def` line."""
    found = elsewhere(name, rel) if package is not None else []
    line = package.header(found[0][0], name) if package is not None and len(found) == 1 else None
    if line is None:
        return ""
    return f"{rel} is not in this release; {blocks.describe(blocks.Located(f'{found[0][0]}:{line + 1}', 'moved to that file'))}"


def in_other_file(rel: str, name: str, before: bytes, after: bytes, elsewhere: Elsewhere | None,
                   markers: bool) -> tuple[str, bytes, str] | None:
    """(the other file, the unit's new bytes there, the outcome) when exactly one other file of
    the package has a unit of that name whose form is the pre-image's, the patched one, or merges
    cleanly with the diff's change; else None."""
    found = elsewhere(name, rel) if elsewhere is not None else []
    if len(found) != 1:
        return None
    other, current = found[0]
    placed = place_moved_unit(before, current, after, markers)
    return None if placed is None else (other, *placed)


def place_moved_unit(before: bytes, current: bytes | None, after: bytes, markers: bool = False) -> tuple[bytes, str] | None:
    """A moved unit's new bytes where it is now and the outcome (UPSTREAM: it has the patched
    form; MOVED: the patched form, or a clean 3-way merge with it); None when it conflicts."""
    if current is None:
        return None
    if current == after:
        return current, UPSTREAM
    if current == before:
        return after, MOVED
    merged, clean = merge_unit(before, current, after, markers)
    return (merged, MOVED) if clean else None


def uncreatable(file: FileDiff, markers: bool) -> FileResolution:
    """A file the diff creates in a folder the release does not have, which no other file of the
    diff says went anywhere: a conflict naming the folder (with `markers`, the section creates it
    holding the diff's hunk as a block: move it where that package is now)."""
    folder = file.path.rsplit("/", 1)[0]
    why = f"the diff creates it in {folder}/, which is not in this release"
    return FileResolution(file.path, ABSENT, None, absent_blocks(file, why) if markers else None,
                          (UnitOutcome(file.path, "<file>", CONFLICT, why),))


def created_destination(rel: str, moves: dict[str, str], can_create: Callable[[str], bool]) -> str | None:
    """Where a file the diff creates in a folder the release does not have goes: the same place
    in the folder its package went to with another file of the diff (`moves`: that file's path ->
    where the release has it, `relocated`). The two paths' common tail (`jit_kernel/csrc/dsa` ->
    `kernels/jit/csrc/dsa`: `csrc/dsa`) leaves the part that moved (`sglang/jit_kernel` ->
    `sglang/kernels/jit`). None when no move covers its folder or the new folder is not there."""
    folder = rel.rsplit("/", 1)[0] if "/" in rel else ""
    for old, new in moves.items():
        old_parts, new_parts = old.split("/")[:-1], new.split("/")[:-1]
        same = 0
        while same < min(len(old_parts), len(new_parts)) and old_parts[-1 - same] == new_parts[-1 - same]:
            same += 1
        old_root = "/".join(old_parts[:len(old_parts) - same])
        new_root = "/".join(new_parts[:len(new_parts) - same])
        if old_root and old_root != new_root and (folder == old_root or folder.startswith(old_root + "/")):
            candidate = new_root + rel[len(old_root):]
            if can_create(candidate):
                return candidate
    return None


def moved_folder_note(moved_to: str, own: str) -> str:
    return f"moved: {moved_to} is where this release has {own} (its folder moved)"


SIMILAR = 0.8  # how much of a file's pre-image must be in its namesake for the folder to have moved


def relocated(file: FileDiff, package_files: Callable[[], list[str]], read: Callable[[str], bytes | None],
              find: Callable[[FileDiff], bytes | None], taken: set[str]) -> str | None:
    """Where a file of the diff is in a release that moved its folder (0.5.17's `sglang/jit_kernel/`
    -> `sglang/kernels/jit/`): the one file of the same name elsewhere in the package (not a file of
    the diff) that holds its pre-image (blob hash), or whose lines are at least SIMILAR the
    pre-image's, or, without a pre-image, on which its hunks apply; any file kind."""
    import difflib

    name = file.path.rsplit("/", 1)[-1]
    namesakes = [rel for rel in package_files() if rel.rsplit("/", 1)[-1] == name and rel not in taken]
    if not namesakes:
        return None
    pre = find(file)
    found = []
    for rel in namesakes:
        data = read(rel)
        if data is None:
            continue
        if pre is not None and (data == pre or difflib.SequenceMatcher(
                None, units_mod.split_lines(pre), units_mod.split_lines(data), autojunk=False).ratio() >= SIMILAR):
            found.append(rel)
        elif pre is None and (apply_hunks(data, file.hunks) is not None or
                              apply_hunks(data, file.hunks, reverse=True) is not None):
            found.append(rel)
    return found[0] if len(found) == 1 else None


def base_for(file: FileDiff, target: bytes | None, find: Callable[[FileDiff], bytes | None]) -> Callable[[], bytes | None]:
    """The pre-image of a file: the target itself when it has the index line's hash, else `find`'s."""
    def base() -> bytes | None:
        if target is not None and file.old_blob and git_blob_sha1(target).startswith(file.old_blob):
            return target
        return find(file)

    return base
