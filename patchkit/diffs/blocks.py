"""Conflict blocks a person can resolve (`rebase`, `bump`'s NAME.tree/): each is the size of the
diff's change, never a whole old unit set against the release's.

Two forms, both between `<<<<<<< release` and `>>>>>>> patch` lines:
- a unit both sides changed in the same few lines: git's block, the release's lines, `=======`,
  the diff's lines (take either side, or both) -- kept where the diff's side holds no more than
  its own changed lines and CONTEXT lines on each side of them; its `<<<<<<< release` line is
  bare (what tells it from the other form), its `>>>>>>> patch` line may say how much of the
  change the release has already (`already_said`), as the other form's marker line does;
- a change that found no place, or whose conflicting lines would carry far more than the change
  (the release rewrote, moved or emptied the unit: a 3-way merge sets the whole old unit against
  a few lines): the release's side is empty, its marker line saying where this release has the
  code (`FILE:LINE`, found by the hunk's own lines, `code_place`) and what it did (moved,
  renamed, changed, removed); the patch's side is the diff's own hunk (` `/`-`/`+` lines, CONTEXT
  lines of context, its `@@` line numbered as in the diff's pre-image), set right above that code
  where it is in the same file (`Pending`, placed by `assemble`). Make the change there, delete
  the block.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable
from dataclasses import dataclass

from patchkit.diffs import code_place
from patchkit.diffs import units as units_mod

OPEN, SPLIT, CLOSE = b"<<<<<<< release", b"=======", b">>>>>>> patch"
CONTEXT = 3
TODO = "the diff's change to {}; make it where that code is now, or delete the block"


def block(where: str, change: list[bytes], todo: str) -> bytes:
    """A block for a change patchkit found no place for: the release's side says where it was
    looked for (and where the code is) and is empty, the patch's side carries the change as hunk
    lines (` `, `-`, `+`); the user makes the change where the code is now and deletes the block
    (the rebased diff does not load until then)."""
    body = b"".join(line if line.endswith(b"\n") else line + b"\n" for line in change)
    return b"".join([OPEN + b": " + _one_line(where) + b"\n", SPLIT + b"\n", body,
                     CLOSE + b": " + _one_line(todo) + b"\n"])


def _one_line(text: str) -> bytes:
    return " ".join(text.split()).encode("utf-8", "surrogateescape")


def change_lines(before: bytes, after: bytes, old_start: int = 0, new_start: int = 0) -> list[bytes]:
    """A unit's change as hunk lines (CONTEXT lines of context), `@@` lines counted from the unit's
    first line in the pre-image (`old_start`) and the post-image (`new_start`), 0-based."""
    return _hunks(units_mod.split_lines(before), units_mod.split_lines(after), old_start, new_start)


def _hunks(old: list[bytes], new: list[bytes], old_start: int, new_start: int) -> list[bytes]:
    out: list[bytes] = []
    for group in difflib.SequenceMatcher(None, old, new, autojunk=False).get_grouped_opcodes(CONTEXT):
        i1, i2, j1, j2 = group[0][1], group[-1][2], group[0][3], group[-1][4]
        out.append(f"@@ -{_range(old_start + i1, i2 - i1)} +{_range(new_start + j1, j2 - j1)} @@\n".encode())
        for tag, a1, a2, b1, b2 in group:
            if tag == "equal":
                out += [b" " + line for line in old[a1:a2]]
                continue
            out += [b"-" + line for line in old[a1:a2]]
            out += [b"+" + line for line in new[b1:b2]]
    return out


def _range(start: int, count: int) -> str:
    return f"{start + 1 if count else start},{count}"


@dataclass
class Pending:
    """A block to place: the diff's unit, why it conflicts, its hunk lines, and the index of its
    outcome (whose detail gets the place too)."""

    unit: str
    detail: str
    lines: list[bytes]
    outcome: int
    home: str = ""  # the release's unit it was merged with ("": none has the diff's unit's name)
    already: str = ""  # how much of its change the release has already (`already_said`), "" where not most
    moved_to: str = ""  # the one other file of the release that has a unit of its name (the finder's), else ""

    @property
    def added(self) -> list[bytes]:
        return [line[1:] for line in self.lines if line[:1] == b"+"]

    @property
    def old(self) -> list[bytes]:
        """The hunk's context and removed lines, as the pre-image has them."""
        return [line[1:] for line in self.lines if line[:1] in (b" ", b"-")]

    @property
    def removed(self) -> list[bytes]:
        return [line[1:] for line in self.lines if line[:1] == b"-"]


def small(base: list[bytes], ours: list[bytes], theirs: list[bytes]) -> bool:
    """Whether a 3-way conflict is git's block a person reads at a glance: the diff's side holds its
    own changed lines and at most CONTEXT lines on each side of them."""
    changed = sum(j2 - j1 for tag, _, _, j1, j2 in difflib.SequenceMatcher(
        None, base, theirs, autojunk=False).get_opcodes() if tag != "equal")
    return len(theirs) <= changed + 2 * CONTEXT


def marked_merge(base: bytes, ours: bytes, theirs: bytes, pending: Callable[[list[bytes]], Pending],
                 old_start: int = 0, new_start: int = 0,
                 hint: Callable[[list[bytes]], str] | None = None) -> list[bytes | Pending]:
    """A conflicting unit's lines with its blocks: merge3's groups, a small conflict as git's block
    (`small`), a larger one as the release's lines with a `pending` block of the diff's hunks there.
    `hint`: what git's block says on its `>>>>>>> patch` line, given the lines the diff adds there
    ("": nothing; `already_said`)."""
    import merge3

    base_lines, ours_lines, theirs_lines = (units_mod.split_lines(x) for x in (base, ours, theirs))
    regions = list(merge3.Merge3(base_lines, ours_lines, theirs_lines).merge_regions())
    out: list[bytes | Pending] = []
    for at, region in enumerate(regions):
        kind = region[0]
        if kind == "unchanged":
            out += base_lines[region[1]:region[2]]
        elif kind in ("a", "same"):
            out += ours_lines[region[1]:region[2]]
        elif kind == "b":
            out += theirs_lines[region[1]:region[2]]
        else:
            _, z1, z2, a1, a2, b1, b2 = region  # type: ignore[misc]  # a conflict region has 7 fields
            mine, yours = ours_lines[a1:a2], theirs_lines[b1:b2]
            if small(base_lines[z1:z2], mine, yours):
                said = hint(_added(base_lines[z1:z2], yours)) if hint is not None else ""
                out += [OPEN + b"\n", *_ended(mine), SPLIT + b"\n", *_ended(yours),
                        CLOSE + (b": " + _one_line(said) if said else b"") + b"\n"]
                continue
            # The diff's own change in those lines, with the lines around them that no side changed
            # (the same in the pre-image and the patched form) as its context.
            above = _sync(regions, at - 1)
            below = _sync(regions, at + 1)
            out.append(pending(_hunks(base_lines[z1 - above:z2 + below], theirs_lines[b1 - above:b2 + below],
                                      old_start + z1 - above, new_start + b1 - above)))
            out += mine
    return out


def _added(base: list[bytes], theirs: list[bytes]) -> list[bytes]:
    """The lines of `theirs` that are not `base`'s (the diff's added lines in a conflict region)."""
    return [line for tag, _, _, j1, j2 in difflib.SequenceMatcher(None, base, theirs, autojunk=False).get_opcodes()
            if tag != "equal" for line in theirs[j1:j2]]


def already_said(rel: str, added: list[bytes], lines: list[bytes], within: tuple[int, int] | None = None) -> str:
    """What a block says where the release's file (`rel`, its `lines`; `within`: only those of a
    unit, FIRST to END) already holds most of the lines its hunk adds (`code_place.already`): `N of
    M added lines already in V at FILE:FIRST-LAST; the rest: `LINE`, ...`, so the maintainer checks
    only those; "" where it does not."""
    found = code_place.already(added, lines, within)
    if found is None:
        return ""
    rest = ", ".join("`" + " ".join(line.decode("utf-8", "replace").split()) + "`" for line in found.rest)
    return (f"{found.found} of {found.of} added lines already in V at {rel}:{found.first + 1}-{found.last + 1}; "
            f"the rest: {rest or 'none'}")


def _sync(regions: list, at: int) -> int:
    """How many lines (up to CONTEXT) of the unchanged region at `at` may be a hunk's context."""
    if 0 <= at < len(regions) and regions[at][0] == "unchanged":
        return min(CONTEXT, regions[at][2] - regions[at][1])
    return 0


def _ended(lines: list[bytes]) -> list[bytes]:
    return [*lines[:-1], lines[-1] if lines[-1].endswith(b"\n") else lines[-1] + b"\n"] if lines else []


@dataclass(frozen=True)
class Located:
    """Where this release has a block's code, and what it did to the unit."""

    at: str  # "FILE:LINE", 1-based
    what: str
    likely: bool = False  # a best guess (`code_place.likely`), never said as the place


def assemble(rel: str, target: bytes, ours_units: list[units_mod.Unit], pieces: list[tuple[str | None, list[bytes | Pending]]],
             package: code_place.Package | None) -> tuple[bytes, dict[int, Located]]:
    """The file's bytes from its pieces ((V's unit or None, its lines and blocks), in order; a piece
    whose lines are that unit's own bytes is V's as it was), each Pending block set right above
    this release's code for it where that is in this file, else where it stands, and written with
    the place and what this release did (`{outcome index: Located}`)."""
    target_lines = units_mod.split_lines(target)
    names = {u.name for u in ours_units}
    items: list[bytes | Pending] = []
    spans: dict[str, tuple[int, int, bool]] = {}  # V's unit -> (first item, end, its own lines)
    starts = {u.name: u.start for u in ours_units}
    joins: set[int] = set()  # where an added unit starts: the line before it gets its newline
    for unit, lines in pieces:
        first = len(items)
        items += lines
        if unit is None:
            joins.add(first)
        else:
            own = b"".join(x for x in lines if isinstance(x, bytes))
            whole = next((u for u in ours_units if u.name == unit), None)
            spans[unit] = (first, len(items), whole is not None and own == b"".join(target_lines[whole.start:whole.end])
                           and not any(isinstance(x, Pending) for x in lines))
    moves: dict[int, list[Pending]] = {}  # item index -> blocks set right above it
    moved: set[int] = set()  # id() of the blocks moved there
    found: dict[int, Located] = {}  # outcome index -> the first block's place
    placed: dict[int, Located] = {}  # id() of a block -> its place
    for index, item in enumerate(items):
        if not isinstance(item, Pending):
            continue
        old = item.old
        if not code_place.telling(old):
            continue
        here = code_place.in_lines(old, target_lines)
        if here is not None:
            line = here[0]
            holder = units_mod.containing(ours_units, line)
            name = holder.name if holder else ""
            placed[id(item)] = Located(f"{rel}:{line + 1}", _what(item.home or item.unit, name, names))
            if name in spans:
                first, end, as_it_was = spans[name]
                if as_it_was:
                    to = first + line - starts[name]
                else:  # the unit as merged: never inside one of git's blocks there
                    opened = _git_blocks(items[first:end])
                    written = [x if isinstance(x, bytes) and opened[n] is None else b""
                               for n, x in enumerate(items[first:end])]
                    inside = code_place.in_lines(old, written)
                    to = first + (inside[0] if inside else 0)
                    if inside and opened[inside[0]] is not None:
                        to = first + (opened[inside[0]] or 0)
                if to != index:
                    moves.setdefault(to, []).append(item)
                    moved.add(id(item))
            continue
        other = in_package(old, rel, package)
        if other.at:
            placed[id(item)] = other
        elif item.moved_to and package is not None and (at := package.line_in(item.moved_to, item.unit, item.removed or old)) \
                is not None:
            placed[id(item)] = Located(f"{item.moved_to}:{at + 1}", f"moved to that file, into {item.unit}, found by its "
                                       "name: changed there in the lines the diff changes")
        elif (guess := code_place.likely(old, item.removed, item.home or item.unit, target_lines, ours_units)):
            placed[id(item)] = Located(f"{rel}:{guess.line + 1}", _guessed(item.home or item.unit, guess), likely=True)
        elif item.home:
            placed[id(item)] = Located("", f"{item.home} is there, but not the code the diff changes as it "
                                       "was: rewritten")
        else:
            placed[id(item)] = other
    for item in items:
        if isinstance(item, Pending) and id(item) in placed:
            found.setdefault(item.outcome, placed[id(item)])
    out: list[bytes] = []
    ended: list[bytes | Pending | None] = [*items, None]
    for index, entry in enumerate(ended):
        for piece in [*moves.get(index, []), *([entry] if isinstance(entry, Pending) and id(entry) not in moved else [])]:
            if out and not out[-1].endswith(b"\n"):
                out[-1] += b"\n"
            out.append(_render(rel, piece, placed.get(id(piece))))
        if isinstance(entry, bytes):
            if index in joins and out and not out[-1].endswith(b"\n"):
                out[-1] += b"\n"
            out.append(entry)
    return b"".join(out), found


def _git_blocks(items: list[bytes | Pending]) -> list[int | None]:
    """For each item, the index of the `<<<<<<< release` line of git's block it is in (None: in none)."""
    found: list[int | None] = []
    start: int | None = None
    for n, item in enumerate(items):
        if item == OPEN + b"\n":
            start = n
        found.append(start)
        if isinstance(item, bytes) and (item == CLOSE + b"\n" or item.startswith(CLOSE + b": ")):
            start = None
    return found


def _render(rel: str, item: Pending, place: Located | None) -> bytes:
    where = f"{rel}:{item.unit} {item.detail}"
    if place is not None:
        where += f"; {describe(place)}"
    if item.already:
        where += f"; {item.already}"
    return block(where, item.lines, TODO.format(item.unit))


def describe(place: Located) -> str:
    if place.likely:
        return f"this release likely has that code at {place.at} ({place.what}; a best guess, check it)"
    return f"this release has that code at {place.at} ({place.what})" if place.at else place.what


def _guessed(unit: str, guess: code_place.Guess) -> str:
    if guess.unit == unit:
        return f"{unit} is there, rewritten; the line closest to the change"
    return (f"{unit} is not in the file; {guess.unit} holds {guess.names} of the hunk's {guess.of} names"
            + (", its name sharing the stem" if guess.stem else "") + ": renamed or rewritten")


def _what(unit: str, there: str, names: set[str]) -> str:
    if there == unit:
        return f"{unit} is there, changed in those lines"
    if unit in names:
        return f"moved out of {unit} into {there or 'the module level'}"
    return f"{unit} is not in the file: moved or renamed to {there or 'the module level'}"


def in_package(old: list[bytes], rel: str, package: code_place.Package | None) -> Located:
    """Where this release has a hunk's code in a file other than `rel` (a file it does not have,
    or whose lines do not hold it): `moved to that file`, else not found."""
    other = package.find(old, rel) if package is not None and code_place.telling(old) else None
    if other is not None and package is not None:
        return Located(f"{other.file}:{other.line + 1}", _elsewhere(other, package))
    if package is None:
        return Located("", f"not found: {rel} does not have the code the diff changes as it was (removed, or rewritten)")
    return Located("", "not found: no file of this release has the code the diff changes as it was (removed, "
                   "or rewritten)")


def in_file(rel: str, old: list[bytes], lines: list[bytes], units: list[units_mod.Unit],
            package: code_place.Package | None) -> tuple[int | None, Located]:
    """Where this release has a hunk's code placed by its context lines alone (its base not known,
    or a file that is not Python): (its line in `lines`, or None where not in this file; the place
    and what the release did)."""
    here = code_place.in_lines(old, lines) if code_place.telling(old) else None
    if here is None:
        return None, in_package(old, rel, package)
    holder = units_mod.containing(units, here[0])
    return here[0], Located(f"{rel}:{here[0] + 1}", (f"{holder.name}" if holder else "the file") + " is there, "
                            "changed in those lines")


def _elsewhere(place: code_place.Place, package: code_place.Package) -> str:
    unit = package.unit_at(place)
    return "moved to that file" + (f", into {unit}" if unit else "")


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
