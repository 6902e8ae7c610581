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
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from patchkit.diffs import blocks, code_place, unit_change
from patchkit.diffs import units as units_mod
from patchkit.diffs.blocks import CLOSE, OPEN, SPLIT, block, change_lines
from patchkit.base.errors import PlanError
from patchkit.authoring.kind import CREATED, DELETED
from patchkit.diffs.unidiff import DiffPatchFile, FileDiff, Hunk, git_blob_sha1

TRANSPLANTED, MERGED, MOVED, UPSTREAM, CONFLICT = "transplanted", "merged", "moved", "upstream", "conflict"
OUTCOMES = (TRANSPLANTED, MERGED, MOVED, UPSTREAM, CONFLICT)
# How a file was resolved.
EXACT, REVERSED, PER_UNIT, ABSENT = "exact", "already-applied", "per-unit", "absent"


@dataclass(frozen=True)
class UnitOutcome:
    file: str
    unit: str  # "Class.method", "function", "<imports>", ...
    outcome: str  # one of OUTCOMES
    detail: str = ""
    moved_to: str = ""  # the other file of the package the unit is in now (see `finder`)

    def to_dict(self) -> dict:
        return {"file": self.file, "unit": self.unit, "outcome": self.outcome, "detail": self.detail}


@dataclass(frozen=True)
class FileResolution:
    rel: str
    how: str  # EXACT, REVERSED, PER_UNIT, ABSENT
    before: bytes | None
    after: bytes | None  # the new bytes (with conflict markers where asked); None when absent
    units: tuple[UnitOutcome, ...] = ()
    notes: tuple[str, ...] = ()
    # Units that moved to another file, followed there (resolve(follow=True)): (file, unit, new bytes).
    elsewhere: tuple[tuple[str, str, bytes], ...] = ()
    # The same units as the diff changes them: (file, unit, pre-image form, patched form), so that
    # the other file's bytes can be patched again where they differ from those seen here.
    moved: tuple[tuple[str, str, bytes, bytes], ...] = ()

    @property
    def conflicts(self) -> tuple[UnitOutcome, ...]:
        return tuple(u for u in self.units if u.outcome == CONFLICT)

    @property
    def upstream(self) -> bool:
        """Every unit the diff changes is already in its patched form here."""
        return self.how == REVERSED or (self.how == PER_UNIT and bool(self.units)
                                        and all(u.outcome == UPSTREAM for u in self.units))


@dataclass(frozen=True)
class Resolution:
    files: tuple[FileResolution, ...]
    notes: tuple[str, ...] = ()

    @property
    def conflicts(self) -> tuple[UnitOutcome, ...]:
        return tuple(u for f in self.files for u in f.conflicts)

    def counts(self) -> dict[str, int]:
        found = dict.fromkeys(OUTCOMES, 0)
        for f in self.files:
            for u in f.units:
                found[u.outcome] += 1
        return found


# --- applying hunks as git apply does ------------------------------------------------------------


def _find(lines: list[bytes], want: list[bytes], expected: int, earliest: int, beginning: bool, end: bool) -> int | None:
    """Where `want` starts in `lines`: at `expected`, else the nearest place (forward first, as
    git's find_pos), never before `earliest`; pinned to the start / end of the file where git
    pins it (a hunk at line 1, a hunk without trailing context)."""
    last = len(lines) - len(want)
    if beginning or end:  # both may hold (a one-line file's hunk): every pin must
        candidates = [at for at in ((0,) if beginning else (last,)) if not (beginning and end) or at == 0 == last]
    else:
        expected = min(max(expected, earliest), max(last, earliest))
        candidates = [expected]
        for step in range(1, max(last - earliest, 0) + 2):
            candidates += [expected + step, expected - step]
    for at in candidates:
        if earliest <= at <= last and lines[at:at + len(want)] == want:
            return at
    return None


def apply_hunks(data: bytes, hunks: tuple[Hunk, ...], reverse: bool = False) -> bytes | None:
    """`data` with the hunks applied as `git apply` applies them (no fuzz; whitespace exact),
    or None when one does not apply."""
    lines = units_mod.split_lines(data)
    out: list[bytes] = []
    at = 0
    for hunk in hunks:
        before, after = (hunk.after, hunk.before) if reverse else (hunk.before, hunk.after)
        start = (hunk.new_start if reverse else hunk.old_start)
        count = len(before)
        tagged = [line[:1] for line in hunk.lines]
        trailing = 0
        for tag in reversed(tagged):
            if tag != b" ":
                break
            trailing += 1
        expected = start - 1 if count else start
        # git pins a hunk at line 0 or 1 to the start, one without trailing context to the end.
        found = _find(lines, before, expected, at, beginning=start <= 1, end=trailing == 0 and count > 0)
        if found is None:
            return None
        out += lines[at:found] + after
        at = found + count
    out += lines[at:]
    return b"".join(out)


# --- per unit -------------------------------------------------------------------------------------


def _merge(base: bytes, ours: bytes, theirs: bytes, markers: bool) -> tuple[bytes, bool]:
    """A 3-way merge of one unit: (merged bytes, clean). `ours` is the target's unit, `theirs`
    the patched form; with `markers` a conflict is written as <<<<<<< / ======= / >>>>>>>."""
    import merge3

    base_lines, ours_lines, theirs_lines = (units_mod.split_lines(x) for x in (base, ours, theirs))
    merger = merge3.Merge3(base_lines, ours_lines, theirs_lines)
    clean = not any(group[0] == "conflict" for group in merger.merge_groups())
    if clean or markers:
        return b"".join(merger.merge_lines(name_a=b"release", name_b=b"patch")), clean
    return ours, clean


def _plain_merge(base: bytes, ours: bytes, theirs: bytes) -> tuple[bytes, bool]:
    return _merge(base, ours, theirs, False)


def without_blocks(data: bytes, side: str = "patch") -> bytes:
    """`data` with each conflict block resolved to one side: a merge's block to its `side`
    ("patch": the diff's lines, "release": the release's), a block for a change that found no
    place (`block`) to nothing. What a diff stacked on this one is rebased on before the blocks
    are resolved: the lower diff's change where it has one, taken as it would be by its own side."""
    out: list[bytes] = []
    inside = None  # None: outside a block; else (is it a `block`, which side is being read)
    for line in units_mod.split_lines(data):
        bare = line.rstrip(b"\r\n")
        if inside is None and (bare == OPEN or bare.startswith(OPEN + b": ")):
            inside = (bare != OPEN, "release")
        elif inside is not None and inside[1] == "release" and bare == SPLIT:
            inside = (inside[0], "patch")
        elif inside is not None and inside[1] == "patch" and (bare == CLOSE or bare.startswith(CLOSE + b": ")):
            inside = None
        elif inside is None or not inside[0] and inside[1] == side:
            out.append(line)
    return b"".join(out)


def parses(rel: str, data: bytes) -> bool:
    """Whether `data` splits into units (a file that is not Python always does)."""
    if not rel.endswith(".py"):
        return True
    try:
        units_mod.units(data)
    except (SyntaxError, ValueError):
        return False
    return True


def _units(data: bytes, rel: str, what: str) -> list[units_mod.Unit]:
    try:
        return units_mod.units(data)
    except (SyntaxError, ValueError) as exc:
        raise PlanError(f"{rel}: {what} cannot be parsed: {getattr(exc, 'msg', exc)}") from None


def _texts(data: bytes, rel: str, what: str) -> dict[str, bytes]:
    """{unit name: its bytes} (units.texts), a file ast cannot parse a plan error naming it."""
    lines = units_mod.split_lines(data)
    return {u.name: b"".join(lines[u.start:u.end]) for u in _units(data, rel, what)}


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


def resolve_file(file: FileDiff, target: bytes | None, base: Callable[[], bytes | None], markers: bool = False,
                 count: bool = True, elsewhere: Elsewhere | None = None, follow: bool = False,
                 package: code_place.Package | None = None, merge_file: MergeFile | None = None) -> FileResolution:
    """One file of a diff on `target` (see the module docstring); `base()` gives the diff's
    pre-image of the file when known (else only the git-apply way works), asked only when the
    hunks do not apply as they are. `count`: name the units an exact apply changes (for reports;
    the engine does not need them). `elsewhere`: where a unit absent from the file is in the
    package now (`finder`); `follow`: patch it there (rebase), else it is a conflict naming it.
    `package`: where a block's code is looked for when it is not in the file (`blocks`).
    `merge_file`: a second whole-file merge, tried where merge3's conflicts (`_file_merge`)."""
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
            after, unplaced = _hunk_by_hunk(file, target, markers)
            return FileResolution(rel, PER_UNIT, target, after, (UnitOutcome(rel, "<file>", CONFLICT, "; ".join(
                ["its hunks do not fit as they are, and a file that is not Python has no units",
                 *(u.detail for u in unplaced if u.detail.startswith("hunk at line"))])),))
        return FileResolution(rel, PER_UNIT, target, target, (UnitOutcome(rel, "<file>", CONFLICT,
                              "its hunks do not fit as they are, and a file that is not Python has no units"),))
    pre_image = base()
    if pre_image is None:
        after, unplaced = _hunk_by_hunk(file, target, markers, package)
        return FileResolution(rel, PER_UNIT, target, after if markers else target, unplaced,
                              (f"{rel}: the diff's pre-image (index {file.old_blob or 'none'}) is not a file of a "
                               "cached release, so its hunks can only be placed by their context lines",))
    patched = apply_hunks(pre_image, file.hunks)
    if patched is None:
        raise PlanError(f"{rel}: the diff does not apply to its own pre-image (index {file.old_blob}): a damaged diff")
    found = _per_unit(rel, pre_image, patched, target, markers, elsewhere, follow, package)
    return _file_merge(found, pre_image, patched, target, merge_file) if found.conflicts else found


# (base, ours, theirs) -> ours with base -> theirs merged in, None where it conflicts (git_merge.merge_file).
MergeFile = Callable[[bytes, bytes, bytes], "bytes | None"]


def _file_merge(found: FileResolution, base: bytes, patched: bytes, target: bytes,
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
        done, clean = _merge(old, ours, theirs, False)
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
            _by_name(rel, u.unit, elsewhere, package) or gone(rel, changes[u.unit], package)))
                      if u.outcome == CONFLICT and u.file == rel else u for u in units)
        after = b"".join(block(f"{rel}:{u.unit} {u.detail}", changes[u.unit], f"the diff's change to {u.unit}; make "
                               "it where that code is now, or delete the block")
                         for u in units if u.outcome == CONFLICT and u.file == rel) or None
    return FileResolution(rel, ABSENT, None, after, units, found.notes, found.elsewhere, found.moved)


def _by_name(rel: str, name: str, elsewhere: Elsewhere, package: code_place.Package | None) -> str:
    """What a block of a file the release does not have says of a unit found by its name in one other
    file of the package (changed there too: a conflict): `moved to that file`, at its `def` line."""
    found = elsewhere(name, rel) if package is not None else []
    line = package.header(found[0][0], name) if package is not None and len(found) == 1 else None
    if line is None:
        return ""
    return f"{rel} is not in this release; {blocks.describe(blocks.Located(f'{found[0][0]}:{line + 1}', 'moved to that file'))}"


def gone(rel: str, lines: Sequence[bytes], package: code_place.Package | None) -> str:
    """What a block of a file the release does not have says: where the package has the code its
    hunk lines change (`blocks.in_package`), else that the file was removed."""
    old = [line[1:] for line in lines if line[:1] in (b" ", b"-")]
    place = blocks.in_package(old, rel, package) if rel.endswith(".py") else blocks.Located("", "")
    if place.at:
        return f"{rel} is not in this release; {blocks.describe(place)}"
    return f"{rel} is not in this release, nor the code the diff changes as it was in another file of it: the " \
        "release removed the file (or rewrote that code)"


def _uncreatable(file: FileDiff, markers: bool) -> FileResolution:
    """A file the diff creates in a folder the release does not have, which no other file of the
    diff says went anywhere: a conflict naming the folder (with `markers`, the section creates it
    holding the diff's hunk as a block: move it where that package is now)."""
    folder = file.path.rsplit("/", 1)[0]
    why = f"the diff creates it in {folder}/, which is not in this release"
    return FileResolution(file.path, ABSENT, None, absent_blocks(file, why) if markers else None,
                          (UnitOutcome(file.path, "<file>", CONFLICT, why),))


def absent_blocks(file: FileDiff, why: str, package: code_place.Package | None = None) -> bytes:
    """Every hunk of a file the release does not have, each as a block (`block`); with `package`,
    each says where the package has its code now (`gone`)."""
    return b"".join(block(f"{file.path}: hunk at line {hunk.old_start}: " + (
        gone(file.path, hunk.lines, package) if package is not None else why), [_hunk_head(hunk), *hunk.lines],
        "the diff's hunk; make it where that code is now, or delete the block") for hunk in file.hunks)


def _changed_units(rel: str, before: bytes, after: bytes, outcome: str) -> tuple[UnitOutcome, ...]:
    """The units of `after` that differ from `before` (for the counts), by name."""
    try:
        old, new = units_mod.texts(before), units_mod.texts(after)
    except (SyntaxError, ValueError):
        return ()
    return tuple(UnitOutcome(rel, name, outcome) for name in dict.fromkeys([*new, *old]) if old.get(name) != new.get(name))


def _hunk_by_hunk(file: FileDiff, target: bytes, markers: bool,
                  package: code_place.Package | None = None) -> tuple[bytes, tuple[UnitOutcome, ...]]:
    """Each hunk where its context lines are (git apply's way, one hunk at a time), and a conflict
    for each hunk whose context is not in the target. Such a hunk's code is looked for by its own
    lines (`blocks.in_file`: in the file, then in the package's other Python files): the conflict is
    named by the unit there and says where and what the release did; with `markers` the hunk is
    written as a block (`block`) right above that code, else (not in this file) at the unit of the
    target at the line the hunk names (before it in a Python file). (The new bytes, the conflicts.)"""
    python = file.path.endswith(".py")
    try:
        found = units_mod.units(target) if python else []
    except (SyntaxError, ValueError):
        found = []
    target_lines = units_mod.split_lines(target)
    current = target
    out = []
    written: list[tuple[list[bytes] | None, int, bytes]] = []  # (its old lines where placed, else None; the line
    # of `current` it goes above where not placed; the block), in hunk order
    shift = 0  # lines the hunks applied so far added
    for hunk in file.hunks:
        applied = apply_hunks(current, (hunk,))
        if applied is not None:
            shift += len(hunk.after) - len(hunk.before)
            current = applied
            continue
        line = max(hunk.old_start - 1, 0)
        old = [entry[1:] for entry in hunk.lines if entry[:1] in (b" ", b"-")]
        here, place = blocks.in_file(file.path, old, target_lines, found, package if python else None)
        unit = units_mod.containing(found, line if here is None else here)
        name = unit.name if unit else f"line {hunk.old_start}" if python else "<file>"
        why = f"hunk at line {hunk.old_start}: its context lines are not in the file; {blocks.describe(place)}"
        out.append(UnitOutcome(file.path, name, CONFLICT, why))
        if markers:
            written.append((None if here is None else old, (unit.start if unit else line) + shift,
                            block(f"{file.path}: {why}", [_hunk_head(hunk), *hunk.lines],
                                  "the diff's hunk; make it where that code is now, or delete the block")))
    if written:
        lines = units_mod.split_lines(current)  # every hunk that fits applied: each block's place found there
        places = []
        for old_lines, fallback, text in written:
            again = None if old_lines is None else code_place.in_lines(old_lines, lines)
            places.append((min(again[0] if again else fallback, len(lines)), text))
        for _, (at, text) in sorted(enumerate(places), key=lambda row: (row[1][0], row[0]), reverse=True):
            if lines[:at] and not lines[at - 1].endswith(b"\n"):
                lines[at - 1] += b"\n"
            lines[at:at] = [text]
        current = b"".join(lines)
    return current, tuple(out) or (UnitOutcome(file.path, "<file>", CONFLICT, "its hunks do not apply together"),)


def _hunk_head(hunk: Hunk) -> bytes:
    return f"@@ -{hunk.old_start},{hunk.old_count} +{hunk.new_start},{hunk.new_count} @@\n".encode()


def _per_unit(rel: str, base: bytes, patched: bytes, target: bytes, markers: bool,
              elsewhere: Elsewhere | None = None, follow: bool = False,
              package: code_place.Package | None = None) -> FileResolution:
    old, new = _texts(base, rel, "the pre-image"), _texts(patched, rel, "the patched pre-image")
    # With markers, each block carries the diff's own hunk, numbered as in the pre-image (`blocks`).
    old_at = {u.name: u.start for u in _units(base, rel, "the pre-image")} if markers else {}
    new_at = {u.name: u.start for u in _units(patched, rel, "the patched pre-image")} if markers else {}
    marked: dict[str, list[bytes | blocks.Pending]] = {}  # unit of the target -> its lines with blocks
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
                found = _in_other_file(rel, name, before, after, elsewhere, markers)
                if found is None:
                    looked = "not in the file (removed or renamed)" + (
                        "; looked for by name in the package's other Python files too" if elsewhere is not None else "")
                    outcomes.append(UnitOutcome(rel, name, CONFLICT, looked))
                    if markers:  # its own block, where it was in the pre-image (or on the code, `blocks`)
                        anchor = next((n for n in reversed(order[:order.index(name)]) if n in ours), None) \
                            if name in order else None
                        insert.setdefault(anchor, []).append(blocks.Pending(
                            name, looked, change_lines(before, after, old_at.get(name, 0), new_at.get(name, 0)),
                            len(outcomes) - 1))
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
        elif unit_change.holds(before or b"", current, target_form, _plain_merge):
            outcomes.append(UnitOutcome(rel, where, UPSTREAM, "the change is already in it, with others"))
        else:
            merged, clean = _merge(before or b"", current, target_form, False)
            why = "changed here and by the diff in the same lines"
            if clean and not markers and not unit_change.holds(before or b"", merged, target_form, _plain_merge):
                # Written, it would not read back as applied (status, a second apply): refused.
                clean, why = False, "changed here and by the diff in lines next to each other (a merge would not read back as applied)"
            if clean:
                replace[where] = merged
            elif markers:  # blocks the size of the change: git's where small, else the diff's hunk (`blocks`)
                marked[where] = blocks.marked_merge(before or b"", current, target_form,
                                                    _pending(name, why, len(outcomes), where),
                                                    old_at.get(name, 0), new_at.get(name, 0))
            outcomes.append(UnitOutcome(rel, where, (MOVED if moved else MERGED) if clean else CONFLICT,
                                        "" if clean else why))
    if marked or any(isinstance(x, blocks.Pending) for added in insert.values() for x in added):
        after_bytes = _with_blocks(rel, target, ours_units, ours, replace, marked, insert, outcomes, package)
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


def _with_blocks(rel: str, target: bytes, ours_units: list[units_mod.Unit], ours: dict[str, bytes],
                 replace: dict[str, bytes], marked: dict[str, list[bytes | blocks.Pending]],
                 insert: dict[str | None, list[bytes | blocks.Pending]], outcomes: list[UnitOutcome],
                 package: code_place.Package | None) -> bytes:
    """The file with its blocks set where this release has their code (`blocks.assemble`); each
    conflict's detail says where that is and what the release did."""
    def lines(added: list[bytes | blocks.Pending]) -> list[tuple[str | None, list[bytes | blocks.Pending]]]:
        return [(None, [x] if isinstance(x, blocks.Pending) else list(units_mod.split_lines(x))) for x in added]

    pieces: list[tuple[str | None, list[bytes | blocks.Pending]]] = lines(insert.get(None, []))
    for unit in ours_units:
        own = marked.get(unit.name)
        pieces.append((unit.name, own if own is not None else list(units_mod.split_lines(replace.get(unit.name, ours[unit.name])))))
        pieces += lines(insert.get(unit.name, []))
    data, places = blocks.assemble(rel, target, ours_units, pieces, package)
    for at, place in places.items():
        outcomes[at] = dataclasses.replace(outcomes[at], detail=f"{outcomes[at].detail}; {blocks.describe(place)}")
    return data


def _in_other_file(rel: str, name: str, before: bytes, after: bytes, elsewhere: Elsewhere | None,
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
    merged, clean = _merge(before, current, after, markers)
    return (merged, MOVED) if clean else None


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
    `merge_file`: git's whole-file merge where merge3's conflicts (`_file_merge`; rebase only)."""
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
                    files.append(_uncreatable(file, markers))
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

