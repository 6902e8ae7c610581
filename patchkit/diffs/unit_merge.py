"""The per-unit merge: how a diff (see `patchkit.diffs.unidiff`) is applied to a release's files
(`resolve`), per file the new bytes and per unit of code its outcome. Pure: bytes in, a
`Resolution` out; the diff as a kind of patch of the registry is `patchkit.diffs.diffpatch`.

How a diff is applied to a file (`resolve`):
1. as `git apply` does: every hunk's context and removed lines found as they are (at the line
   the hunk names, else the nearest place after the previous hunk), no fuzz: on the release the
   diff was made for, the bytes are those `git apply` writes;
2. its reverse applies that way -> the file already has the change (upstream);
3. else per unit of code (`patchkit.diffs.units`): the diff's pre-image (the release file whose git
   blob hash the index line names, `patchkit.diffs.release_blobs`) and its post-image are cut into
   units; each unit the diff changes is looked up by name in the target file: left as upstream
   had it -> takes the patched form (transplanted); already in the patched form -> upstream;
   changed on both sides -> a 3-way merge inside the unit (`merge3`), clean (merged) or not
   (conflict); gone from its class or module but found by its name under another class of the
   file -> patched there (moved, said in a note); a unit the diff adds goes after the unit it
   follows in the post-image; gone from the file (or the file gone) but found by name in exactly
   one other file of the package -> patched there (moved: that file becomes a target of the
   diff on this tree, `DiffPatch.targets_for`). A file the diff creates or deletes is written
   or removed whole (`_whole_file`).
A diff is one change: one conflicting unit and the patch is `failed`, naming each.

The jobs it asks of the modules beside it: `hunk_apply` (1, 2 and the hunks of a file that found no
units), `three_way` (the merges of 3), `unit_moves` (a unit or folder that moved); its answer is a
`resolution.Resolution`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

from patchkit.diffs import blocks, code_place, unit_change
from patchkit.diffs import units as units_mod
from patchkit.diffs.blocks import block, change_lines
from patchkit.base.errors import PlanError
from patchkit.authoring.kind import CREATED, DELETED
from patchkit.diffs.hunk_apply import absent_blocks, apply_hunks, gone, hunk_by_hunk
from patchkit.diffs.resolution import (ABSENT, CONFLICT, EXACT, MERGED, MOVED, PER_UNIT, REVERSED,
                                       TRANSPLANTED, UPSTREAM, FileResolution, Resolution, UnitOutcome)
from patchkit.diffs.three_way import MergeFile, merge_unit, merge_unit_plain, merge_whole_file
from patchkit.diffs.unidiff import DiffPatchFile, FileDiff
from patchkit.diffs.unit_moves import (Elsewhere, base_for, created_destination, finder, found_by_name, in_other_file,
                                       moved_folder_note, relocated, uncreatable)


def _units(data: bytes, rel: str, what: str) -> list[units_mod.Unit]:
    try:
        return units_mod.units(data)
    except (SyntaxError, ValueError) as exc:
        raise PlanError(f"{rel}: {what} cannot be parsed: {getattr(exc, 'msg', exc)}") from None


def _texts(data: bytes, rel: str, what: str) -> dict[str, bytes]:
    """{unit name: its bytes} (units.texts), a file ast cannot parse a plan error naming it."""
    lines = units_mod.split_lines(data)
    return {u.name: b"".join(lines[u.start:u.end]) for u in _units(data, rel, what)}


def resolve(diff: DiffPatchFile, read: Callable[[str], bytes | None], markers: bool = False,
            pre_image: Callable[[FileDiff], bytes | None] | None = None,
            python_files: Callable[[], list[str]] | None = None,
            package_files: Callable[[], list[str]] | None = None,
            defined: dict[bytes, set[str]] | None = None, merge_file: MergeFile | None = None) -> Resolution:
    """The diff on the files `read` gives (rel -> bytes, None when absent): per file the new
    bytes (with conflict markers for conflicting units when `markers`) and per unit its outcome.
    `pre_image` gives a file's pre-image (default: the cached release with its blob hash).
    `python_files` lists the package's Python files: a changed unit that moved to one of them
    (not a file of the diff) is patched there, a file of its own in the resolution.
    `package_files` lists all its files: a file of the diff the release does not have whose folder
    moved (`relocated`: the same name, near-identical bytes) is resolved where it is now.
    `defined`: the finder's index of the package's names, shared by the diffs of a stack.
    `merge_file`: git's whole-file merge where merge3's conflicts (`merge_whole_file`; rebase only)."""
    from patchkit.diffs import release_blobs

    find_base = pre_image or release_blobs.pre_image
    diff_files = {file.path for file in diff.files}
    elsewhere = None
    package = None
    if python_files is not None:
        elsewhere = finder(python_files, read, frozenset(diff_files), defined)
        package = code_place.Package(python_files, read) if markers else None
    moves: dict[str, str] = {}  # a file of the diff -> where this release has it (its folder moved)
    if package_files is not None:
        for file in diff.files:
            if file.old_path and file.new_path and read(file.path) is None:
                moved_to = relocated(file, package_files, read, find_base, diff_files)
                if moved_to is not None:
                    moves[file.path] = moved_to
    folders: set[str] = set()
    files = []
    for file in diff.files:
        own = file
        if file.path in moves:
            file = dataclasses.replace(file, old_path=moves[file.path], new_path=moves[file.path])
        elif file.old_path is None and package_files is not None and read(file.path) is None:
            folders = folders or {rel.rsplit("/", 1)[0] for rel in package_files()}
            if file.path.rsplit("/", 1)[0] not in folders:
                moved_to = created_destination(file.path, moves, lambda rel: rel.rsplit("/", 1)[0] in folders)
                if moved_to is None:
                    files.append(uncreatable(file, markers))
                    continue
                file = dataclasses.replace(file, new_path=moved_to)
        target = read(file.path)
        found = resolve_file(file, target, base_for(own, target, find_base), markers, elsewhere=elsewhere, follow=True,
                             package=package, merge_file=merge_file)
        if file.path != own.path:
            found = dataclasses.replace(found, notes=(*found.notes, moved_folder_note(file.path, own.path)))
        files.append(found)
    edits: dict[str, dict[str, bytes]] = {}
    for found in files:
        for other, name, form in found.elsewhere:
            edits.setdefault(other, {})[name] = form
    for other, replace in edits.items():
        data = read(other) or b""
        moved = tuple(u for f in files for u in f.units if u.file == other)
        files.append(FileResolution(other, PER_UNIT, data, with_units(data, replace), moved))
    return Resolution(tuple(files), diff.notes)


def resolve_file(file: FileDiff, target: bytes | None, base: Callable[[], bytes | None], markers: bool = False,
                 count: bool = True, elsewhere: Elsewhere | None = None, follow: bool = False,
                 package: code_place.Package | None = None, merge_file: MergeFile | None = None) -> FileResolution:
    """One file of a diff on `target` (see the module docstring); `base()` gives the diff's
    pre-image of the file when known (else only the git-apply way works), asked only when the
    hunks do not apply as they are. `count`: name the units an exact apply changes (for reports;
    the engine does not need them). `elsewhere`: where a unit absent from the file is in the
    package now (`finder`); `follow`: patch it there (rebase), else it is a conflict naming it.
    `package`: where a block's code is looked for when it is not in the file (`blocks`).
    `merge_file`: a second whole-file merge, tried where merge3's conflicts (`merge_whole_file`)."""
    rel = file.path
    if file.old_path is None or file.new_path is None:
        return _whole_file(file, target, markers)
    if target is None:
        return _followed(file, base, elsewhere, markers, package) if follow and elsewhere is not None and rel.endswith(".py") \
            else FileResolution(rel, ABSENT, None, None)
    exact = apply_hunks(target, file.hunks)
    if exact is not None:
        return FileResolution(rel, EXACT, target, exact, _changed_units(rel, target, exact, TRANSPLANTED) if count else ())
    if apply_hunks(target, file.hunks, reverse=True) is not None:
        return FileResolution(rel, REVERSED, target, target, ())
    if not rel.endswith(".py"):  # no units in a README or a config: git apply's way only
        if markers:
            after, unplaced = hunk_by_hunk(file, target, markers)
            return FileResolution(rel, PER_UNIT, target, after, (UnitOutcome(rel, "<file>", CONFLICT, "; ".join(
                ["its hunks do not fit as they are, and a file that is not Python has no units",
                 *(u.detail for u in unplaced if u.detail.startswith("hunk at line"))])),))
        return FileResolution(rel, PER_UNIT, target, target, (UnitOutcome(rel, "<file>", CONFLICT,
                              "its hunks do not fit as they are, and a file that is not Python has no units"),))
    pre_image = base()
    if pre_image is None:
        after, unplaced = hunk_by_hunk(file, target, markers, package)
        return FileResolution(rel, PER_UNIT, target, after if markers else target, unplaced,
                              (f"{rel}: the diff's pre-image (index {file.old_blob or 'none'}) is not a file of a "
                               "cached release, so its hunks can only be placed by their context lines",))
    patched = apply_hunks(pre_image, file.hunks)
    if patched is None:
        raise PlanError(f"{rel}: the diff does not apply to its own pre-image (index {file.old_blob}): a damaged diff")
    found = _per_unit(rel, pre_image, patched, target, markers, elsewhere, follow, package)
    return merge_whole_file(found, pre_image, patched, target, merge_file) if found.conflicts else found


def _whole_file(file: FileDiff, target: bytes | None, markers: bool = False) -> FileResolution:
    """A file the diff creates or deletes, as `git apply` does it: created where absent (the same
    bytes there already: upstream), deleted where it holds exactly the diff's pre-image (absent
    already: upstream); other bytes there are a conflict of the whole file."""
    rel = file.path
    if file.old_path is None:
        created = apply_hunks(b"", file.hunks)
        if target is None:
            return FileResolution(rel, CREATED, None, created)
        if target == created:
            return FileResolution(rel, REVERSED, target, target)
        why = "the diff creates it, and it is there with other bytes"
    else:
        if target is None:
            return FileResolution(rel, REVERSED, None, None)
        if apply_hunks(target, file.hunks) == b"":
            return FileResolution(rel, DELETED, target, None)
        why = "the diff deletes it, and its bytes are not the diff's pre-image"
    after = target
    if markers:  # the file as it is, and the diff's whole change to it as a block after it
        after = (target if target.endswith(b"\n") or not target else target + b"\n") + absent_blocks(file, why)
    return FileResolution(rel, PER_UNIT, target, after, (UnitOutcome(rel, "<file>", CONFLICT, why),))


def _followed(file: FileDiff, base: Callable[[], bytes | None], elsewhere: Elsewhere,
              markers: bool = False, package: code_place.Package | None = None) -> FileResolution:
    """A file of the diff the release does not have (a module turned into a package, renamed):
    each unit it changes looked for in the package's other files, as for a unit absent from its
    file. Units it adds have no file to go to (a conflict). ABSENT, with units when looked for;
    with `markers`, `after` holds a block (`block`) for each unit that found no place, saying where
    the package has its code now (`gone`), which the unit's detail says too."""
    rel = file.path
    pre_image = base()
    patched = None if pre_image is None else apply_hunks(pre_image, file.hunks)
    if pre_image is None or patched is None:
        return FileResolution(rel, ABSENT, None, None)
    found = _per_unit(rel, pre_image, patched, b"", False, elsewhere, True)
    units = tuple(UnitOutcome(rel, u.unit, CONFLICT, "added by the diff to a file that is not in this release")
                  if u.file == rel and u.detail == "added" else u for u in found.units)
    after = None
    if markers:
        old, new = _texts(pre_image, rel, "the pre-image"), _texts(patched, rel, "the patched pre-image")
        changes = {u.unit: change_lines(old.get(u.unit, b""), new.get(u.unit, b"")) for u in units
                   if u.outcome == CONFLICT and u.file == rel}
        units = tuple(dataclasses.replace(u, detail=f"{u.detail}; " + (
            found_by_name(rel, u.unit, elsewhere, package) or gone(rel, changes[u.unit], package)))
                      if u.outcome == CONFLICT and u.file == rel else u for u in units)
        after = b"".join(block(f"{rel}:{u.unit} {u.detail}", changes[u.unit], f"the diff's change to {u.unit}; make "
                               "it where that code is now, or delete the block")
                         for u in units if u.outcome == CONFLICT and u.file == rel) or None
    return FileResolution(rel, ABSENT, None, after, units, found.notes, found.elsewhere, found.moved)


def _changed_units(rel: str, before: bytes, after: bytes, outcome: str) -> tuple[UnitOutcome, ...]:
    """The units of `after` that differ from `before` (for the counts), by name."""
    try:
        old, new = units_mod.texts(before), units_mod.texts(after)
    except (SyntaxError, ValueError):
        return ()
    return tuple(UnitOutcome(rel, name, outcome) for name in dict.fromkeys([*new, *old]) if old.get(name) != new.get(name))


def _per_unit(rel: str, base: bytes, patched: bytes, target: bytes, markers: bool,
              elsewhere: Elsewhere | None = None, follow: bool = False,
              package: code_place.Package | None = None) -> FileResolution:
    old, new = _texts(base, rel, "the pre-image"), _texts(patched, rel, "the patched pre-image")
    # With markers, each block carries the diff's own hunk, numbered as in the pre-image (`blocks`).
    old_at = {u.name: u.start for u in _units(base, rel, "the pre-image")} if markers else {}
    new_at = {u.name: u.start for u in _units(patched, rel, "the patched pre-image")} if markers else {}
    marked: dict[str, list[bytes | blocks.Pending]] = {}  # unit of the target -> its lines with blocks
    hints: dict[int, list[str]] = {}  # outcome index -> what its git blocks say the release has already
    ours_units = _units(target, rel, "the installed file")
    lines = units_mod.split_lines(target)
    ours = {u.name: b"".join(lines[u.start:u.end]) for u in ours_units}
    replace: dict[str, bytes] = {}  # unit of the target -> its new bytes (b"" removes it)
    insert: dict[str | None, list[bytes | blocks.Pending]] = {}  # after which unit (None: first) -> added units, blocks
    outcomes: list[UnitOutcome] = []
    notes: list[str] = []
    followed: list[tuple[str, str, bytes]] = []
    moved_units: list[tuple[str, str, bytes, bytes]] = []
    order = list(new)
    for name in dict.fromkeys([*new, *old]):
        before, after = old.get(name), new.get(name)
        if before == after:
            continue
        where = name
        if name not in ours and before is not None:
            where = _moved(name, ours) or name
        current = ours.get(where)
        if current is None:
            if before is None:  # a unit the diff adds: after the unit it follows in the post-image
                anchor = next((n for n in reversed(order[:order.index(name)]) if n in ours), None)
                insert.setdefault(anchor, []).append(after or b"")
                outcomes.append(UnitOutcome(rel, name, TRANSPLANTED, "added"))
            elif after is None:  # removed by the diff, gone upstream too
                outcomes.append(UnitOutcome(rel, name, UPSTREAM, "removed"))
            else:
                found = in_other_file(rel, name, before, after, elsewhere, markers)
                if found is None:
                    looked = "not in the file (removed or renamed)" + (
                        "; looked for by name in the package's other Python files too" if elsewhere is not None else "")
                    outcomes.append(UnitOutcome(rel, name, CONFLICT, looked))
                    if markers:  # its own block, where it was in the pre-image (or on the code, `blocks`)
                        anchor = next((n for n in reversed(order[:order.index(name)]) if n in ours), None) \
                            if name in order else None
                        named = elsewhere(name, rel) if elsewhere is not None else []
                        insert.setdefault(anchor, []).append(blocks.Pending(
                            name, looked, change_lines(before, after, old_at.get(name, 0), new_at.get(name, 0)),
                            len(outcomes) - 1, moved_to=named[0][0] if len(named) == 1 else ""))
                    continue
                other, form, outcome = found
                notes.append(f"moved: {rel}:{name} -> {other}:{name}")
                if outcome == UPSTREAM:
                    outcomes.append(UnitOutcome(rel, name, UPSTREAM, f"in its patched form in {other}", other))
                elif follow:
                    followed.append((other, name, form))
                    moved_units.append((other, name, before, after))
                    outcomes.append(UnitOutcome(other, name, outcome, f"moved from {rel}:{name}", other))
                else:
                    # A caller that does not follow (resolve_file(follow=False)) writes only this
                    # file; the engine and rebase follow (DiffPatch.targets_for, resolve).
                    outcomes.append(UnitOutcome(rel, name, CONFLICT, f"moved to {other}:{name}; rebase with "
                                                "patchkit rebase", other))
            continue
        moved = where != name
        if moved:
            notes.append(f"{rel}: {name} is {where} in this release; patched there")
        target_form = after or b""
        if current == target_form:
            outcomes.append(UnitOutcome(rel, where, UPSTREAM, f"moved from {name}" if moved else ""))
        elif current == (before or b""):
            replace[where] = target_form
            outcomes.append(UnitOutcome(rel, where, MOVED if moved else TRANSPLANTED, f"moved from {name}" if moved else ""))
        elif unit_change.holds(before or b"", current, target_form, merge_unit_plain):
            outcomes.append(UnitOutcome(rel, where, UPSTREAM, "the change is already in it, with others"))
        else:
            merged, clean = merge_unit(before or b"", current, target_form, False)
            why = "changed here and by the diff in the same lines"
            if clean and not markers and not unit_change.holds(before or b"", merged, target_form, merge_unit_plain):
                # Written, it would not read back as applied (status, a second apply): refused.
                clean, why = False, "changed here and by the diff in lines next to each other (a merge would not read back as applied)"
            if clean:
                replace[where] = merged
            elif markers:  # blocks the size of the change: git's where small, else the diff's hunk (`blocks`)
                marked[where] = blocks.marked_merge(before or b"", current, target_form,
                                                    _pending(name, why, len(outcomes), where),
                                                    old_at.get(name, 0), new_at.get(name, 0),
                                                    _hint(rel, lines, _span(ours_units, where), len(outcomes), hints))
            outcomes.append(UnitOutcome(rel, where, (MOVED if moved else MERGED) if clean else CONFLICT,
                                        "" if clean else why))
    if marked or any(isinstance(x, blocks.Pending) for added in insert.values() for x in added):
        after_bytes = _with_blocks(rel, target, ours_units, ours, replace, marked, insert, outcomes, package, hints)
    else:
        out: list[bytes] = [*(x for x in insert.get(None, []) if isinstance(x, bytes))]
        for unit in ours_units:
            out.append(replace.get(unit.name, ours[unit.name]))
            out.extend(_joined([x for x in insert.get(unit.name, []) if isinstance(x, bytes)], out))
        after_bytes = b"".join(out)
    return FileResolution(rel, PER_UNIT, target, after_bytes, tuple(outcomes), tuple(notes), tuple(followed),
                          tuple(moved_units))


def _pending(unit: str, why: str, outcome: int, home: str) -> Callable[[list[bytes]], blocks.Pending]:
    def make(lines: list[bytes]) -> blocks.Pending:
        return blocks.Pending(unit, why, lines, outcome, home)

    return make


def _span(found: list[units_mod.Unit], name: str) -> tuple[int, int] | None:
    """A unit's lines (first, end; 0-based) in the release's file, None where it has none of that name."""
    unit = next((u for u in found if u.name == name), None)
    return None if unit is None else (unit.start, unit.end)


def _hint(rel: str, lines: list[bytes], within: tuple[int, int] | None, outcome: int,
          hints: dict[int, list[str]]) -> Callable[[list[bytes]], str]:
    """What a git block of the outcome says of the lines its diff side adds (`blocks.already_said`,
    in the release's unit `within`, whose lines are its release side), kept in `hints` for the
    conflict's detail."""
    def hint(added: list[bytes]) -> str:
        said = blocks.already_said(rel, added, lines, within)
        if said:
            hints.setdefault(outcome, []).append(said)
        return said

    return hint


def _with_blocks(rel: str, target: bytes, ours_units: list[units_mod.Unit], ours: dict[str, bytes],
                 replace: dict[str, bytes], marked: dict[str, list[bytes | blocks.Pending]],
                 insert: dict[str | None, list[bytes | blocks.Pending]], outcomes: list[UnitOutcome],
                 package: code_place.Package | None, hints: dict[int, list[str]]) -> bytes:
    """The file with its blocks set where this release has their code (`blocks.assemble`); each
    conflict's detail says where that is and what the release did, and how much of the change it
    has already where that is most of it (`blocks.already_said`; `hints`: its git blocks')."""
    def lines(added: list[bytes | blocks.Pending]) -> list[tuple[str | None, list[bytes | blocks.Pending]]]:
        return [(None, [x] if isinstance(x, blocks.Pending) else list(units_mod.split_lines(x))) for x in added]

    pieces: list[tuple[str | None, list[bytes | blocks.Pending]]] = lines(insert.get(None, []))
    for unit in ours_units:
        own = marked.get(unit.name)
        pieces.append((unit.name, own if own is not None else list(units_mod.split_lines(replace.get(unit.name, ours[unit.name])))))
        pieces += lines(insert.get(unit.name, []))
    target_lines = units_mod.split_lines(target)
    for _, items in pieces:
        for item in items:
            if isinstance(item, blocks.Pending) and (said := _already(rel, item, target_lines, ours_units)):
                item.already = said
                hints.setdefault(item.outcome, []).append(said)
    data, places = blocks.assemble(rel, target, ours_units, pieces, package)
    for at, place in places.items():
        outcomes[at] = dataclasses.replace(outcomes[at], detail=f"{outcomes[at].detail}; {blocks.describe(place)}")
    for at, hinted in hints.items():
        outcomes[at] = dataclasses.replace(outcomes[at], detail="; ".join([outcomes[at].detail, *hinted]))
    return data


def _already(rel: str, item: blocks.Pending, lines: list[bytes], found: list[units_mod.Unit]) -> str:
    """What a hunk's block says of the lines it adds that the release's file has already: looked for
    in the release's unit it was merged with (or of its name) first, then in the whole file."""
    span = _span(found, item.home or item.unit)
    return (blocks.already_said(rel, item.added, lines, span) if span else "") or \
        blocks.already_said(rel, item.added, lines)


def with_units(data: bytes, replace: dict[str, bytes]) -> bytes:
    """`data` with the named units' bytes replaced."""
    lines = units_mod.split_lines(data)
    return b"".join(replace.get(u.name, b"".join(lines[u.start:u.end])) for u in units_mod.units(data))


def _joined(added: list[bytes], out: list[bytes]) -> list[bytes]:
    """Added units after the last one written, which gets a final newline if it lacked one."""
    if added and out and out[-1] and not out[-1].endswith(b"\n"):
        out[-1] += b"\n"
    return added


def _moved(name: str, ours: dict[str, bytes]) -> str | None:
    """The unit of the same name under another class (or at top level), when there is one only."""
    short = name.rsplit(".", 1)[-1]
    found = [n for n in ours if n.rsplit(".", 1)[-1] == short and n != name]
    return found[0] if len(found) == 1 else None
