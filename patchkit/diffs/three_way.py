"""The 3-way merges of the per-unit merge (`unit_merge`): of one unit (`merge_unit`, merge3, with
conflict markers where asked) and, where units conflict, of the whole file (`merge_whole_file`:
never worse than `git apply --3way`), its result named unit by unit.
"""

from __future__ import annotations

from collections.abc import Callable

from patchkit.diffs import unit_change
from patchkit.diffs import units as units_mod
from patchkit.diffs.resolution import CONFLICT, MERGED, PER_UNIT, UPSTREAM, FileResolution, UnitOutcome


def merge_unit(base: bytes, ours: bytes, theirs: bytes, markers: bool) -> tuple[bytes, bool]:
    """A 3-way merge of one unit: (merged bytes, clean). `ours` is the target's unit, `theirs`
    the patched form; with `markers` a conflict is written as <<<<<<< / ======= / >>>>>>>."""
    import merge3

    base_lines, ours_lines, theirs_lines = (units_mod.split_lines(x) for x in (base, ours, theirs))
    merger = merge3.Merge3(base_lines, ours_lines, theirs_lines)
    clean = not any(group[0] == "conflict" for group in merger.merge_groups())
    if clean or markers:
        return b"".join(merger.merge_lines(name_a=b"release", name_b=b"patch")), clean
    return ours, clean


def merge_unit_plain(base: bytes, ours: bytes, theirs: bytes) -> tuple[bytes, bool]:
    return merge_unit(base, ours, theirs, False)


# (base, ours, theirs) -> ours with base -> theirs merged in, None where it conflicts (git_merge.merge_file).
MergeFile = Callable[[bytes, bytes, bytes], "bytes | None"]


def merge_whole_file(found: FileResolution, base: bytes, patched: bytes, target: bytes,
                merge_file: MergeFile | None = None) -> FileResolution:
    """Never worse than `git apply --3way`: where units conflict, a 3-way merge of the whole file
    (the diff's pre-image, the target, the patched pre-image), as git merges a file whose pre-image
    blob it has. Taken when it is clean, every unit of the diff reads back as holding its change
    (`unit_change.holds`), or its change went with the code it changes to that code's new home in
    this release (`_new_home`: named in a note and the unit's outcome), no unit went to another
    file, and the merge made no unit that neither side has (a definition both sides add, at other
    places, written twice: git's protocol.py files, GIT_DUPLICATES in the tests); the conflicting
    units are then merged. A unit's code upstream moved to a helper beside it
    (0.5.16's `DSATokenToKVPool.__init__` -> `_create_index_buffers`) merges there, where the
    unit-level merge saw both sides change the unit.

    Where merge3's merge of the file (or of a unit, reading it back) conflicts, `merge_file` (given
    by `rebase`: git's own, `git_merge`) may align the lines otherwise and be clean; its result is
    held to the same rules, read back with it.
    Either merge is refused where a line the diff writes is not in it. A merge that leaves the
    target as it is (the diff's change is there already: 0.5.15's http_server.py, whose imports
    merge3 misaligns) reads as upstream."""
    if found.elsewhere or found.moved:
        return found
    by_git: list[bool] = []  # whether git's merge made (or read back) the result

    def merge(old: bytes, ours: bytes, theirs: bytes) -> tuple[bytes, bool]:
        done, clean = merge_unit(old, ours, theirs, False)
        if clean or merge_file is None:
            return done, clean
        again = merge_file(old, ours, theirs)
        if again is None:
            return ours, False
        by_git.append(True)
        return again, True

    merged, clean = merge(base, target, patched)
    if not clean or _drops_a_written_line(base, patched, merged):
        return found
    if merged == target and all(u.outcome in (CONFLICT, UPSTREAM) for u in found.units):
        how = "git merge-file" if by_git else "git's 3-way way"
        return FileResolution(found.rel, PER_UNIT, target, target, tuple(
            u if u.outcome == UPSTREAM else UnitOutcome(u.file, u.unit, UPSTREAM, "already in this release: the "
                                                        f"whole file's 3-way merge ({how}) leaves the file as it is")
            for u in found.units), found.notes)
    try:
        old, new, now, ours = (units_mod.texts(data) for data in (base, patched, merged, target))
    except (SyntaxError, ValueError):
        return found
    if set(now) - set(ours) - set(new):  # a unit neither side has: a definition written twice ("NAME#2")
        return found
    split = merge_file is not None and any(len(_sections(units)) > 1 for units in (old, new, now, ours))
    if split:  # rebase: the import sections as one, however statements split them
        old, new, now, ours = (_imports_as_one(units) for units in (old, new, now, ours))
    homes: dict[str, str] = {}  # a unit of the diff -> the unit of the target its change went to
    by_lines: set[str] = set()  # units read back by the diff's lines (`_written_in`), not by a merge
    for name in dict.fromkeys([*old, *new]):
        before, after = old.get(name, b""), new.get(name, b"")
        if before == after or unit_change.holds(before, now.get(name, b""), after, merge):
            continue
        if merge_file is not None and _written_in(before, now.get(name, b""), after, ours.get(name, b"")):
            by_lines.add(name)
        else:
            home = _new_home(name, before, after, ours, now)
            if home is None:
                return found
            homes[name] = home
    if homes:  # the merge changed no unit but the diff's own and their new homes
        changed = {name for name in dict.fromkeys([*old, *new]) if old.get(name) != new.get(name)}
        if any(now.get(name) != ours.get(name) for name in {*now, *ours} - changed - set(homes.values())):
            return found
    how = "git merge-file" if by_git else "git's 3-way way"
    units: list[UnitOutcome] = []
    for u in found.units:
        if u.outcome != CONFLICT:
            units.append(u)
        elif u.unit in homes:
            units.append(UnitOutcome(u.file, homes[u.unit], MERGED, f"merged with the whole file ({how}): "
                                     f"moved from {u.unit}, which no longer holds the code the diff changes"))
        else:
            units.append(UnitOutcome(u.file, u.unit, MERGED, f"merged with the whole file ({how})" + (
                ": the release's unit with the diff's lines written in" if u.unit in by_lines else
                ": the import sections read as one" if split and u.unit in _sections({u.unit: b""}) else "")))
    notes = [f"moved: {found.rel}:{name} -> {found.rel}:{home} (the code the diff changes is there in this release; "
             "merged with the whole file)" for name, home in homes.items()]
    return FileResolution(found.rel, PER_UNIT, target, merged, tuple(units), (*found.notes, *notes))


def _sections(units: dict[str, bytes]) -> list[str]:
    return [name for name in units if name == "<imports>" or name.startswith("<imports>#")]


def _imports_as_one(units: dict[str, bytes]) -> dict[str, bytes]:
    """`units` with every import section (`<imports>`, `<imports>#2`, ...) joined, in order, as
    `<imports>`: a statement between imports (0.5.13's `setattr(threading, ...)` in http_server.py)
    splits them into two units where the diff's pre-image has one, and by name the first reads as
    losing most of its lines."""
    sections = _sections(units)
    if len(sections) < 2:
        return units
    joined = {name: data for name, data in units.items() if name not in sections}
    joined["<imports>"] = b"".join(units[name] for name in sections)
    return joined


def _written_in(before: bytes, now: bytes, after: bytes, ours: bytes) -> bool:
    """Whether a unit of the whole-file merge (`now`; the target's: `ours`) is the target's unit
    with exactly the diff's runs of lines written in: put back as the pre-image has them
    (`unit_change.undo`), they give the target's unit. For rebase (it writes a new diff rather
    than reading the file back), where a merge of the unit alone conflicts though the file's is
    clean (the file's lines align where the unit's do not: the sibling diff's
    deepseek_v4_hook.py on 0.5.12-0.5.14)."""
    return now != ours and unit_change.undo(before, now, after) == ours


def _drops_a_written_line(base: bytes, patched: bytes, merged: bytes) -> bool:
    """Whether a line the diff writes (in the patched pre-image, not from its pre-image; blank
    lines aside) is not in the merged file."""
    from difflib import SequenceMatcher

    old, new = units_mod.split_lines(base), units_mod.split_lines(patched)
    have = set(units_mod.split_lines(merged))
    return any(line.strip() and line not in have
               for tag, _, _, j1, j2 in SequenceMatcher(None, old, new, autojunk=False).get_opcodes()
               if tag != "equal" for line in new[j1:j2])


def _new_home(name: str, before: bytes, after: bytes, ours: dict[str, bytes], now: dict[str, bytes]) -> str | None:
    """The unit of the target where the whole-file merge put the diff's change to `name` because
    upstream moved the code it changes there: the one unit other than `name` that the merge
    changed and whose lines now hold every run of lines the diff wrote, while `name` is left as the
    target had it and holds none of the runs the diff replaced (for a run it only adds, the two
    lines around it); None where that is not so."""
    from difflib import SequenceMatcher

    old, new = units_mod.split_lines(before), units_mod.split_lines(after)
    replaced: list[list[bytes]] = []
    written: list[list[bytes]] = []
    for tag, i1, i2, j1, j2 in SequenceMatcher(None, old, new, autojunk=False).get_opcodes():
        if tag == "equal":
            continue
        replaced.append(old[i1:i2] if i2 > i1 else old[max(i1 - 1, 0):i1 + 1])
        if j2 > j1:
            written.append(new[j1:j2])
    if not written or now.get(name) != ours.get(name):
        return None
    left = units_mod.split_lines(ours.get(name, b""))
    if any(run and _holds_run(left, run) for run in replaced):
        return None
    homes = [unit for unit, data in now.items() if unit != name and data != ours.get(unit)
             and all(_holds_run(units_mod.split_lines(data), run) for run in written)]
    return homes[0] if len(homes) == 1 else None


def _holds_run(lines: list[bytes], run: list[bytes]) -> bool:
    return any(lines[at:at + len(run)] == run for at in range(len(lines) - len(run) + 1))
