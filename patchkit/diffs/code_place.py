"""Where a release's code for one hunk of a diff is, found by the hunk's own lines: a conflict
block (`unit_merge`) names it (`FILE:LINE`) and sits on it, instead of carrying a whole old unit.

The hunk's old lines (its context and the lines it removes) are compared with a file's lines
whitespace aside (a block re-indented under a new `if` is the same code); only lines that say
something count (`telling`: at least MIN_CHARS characters once the whitespace is out, so `else:`,
`)` and `float,` do not). A place is where the most telling lines are found within the hunk's
span (plus SLACK lines, for lines the release put between them); it needs two of them (one where
the hunk has only one) and at least half of the hunk's, and it must be backed by a distinctive one
(`distinctive`: a name in it that is not a keyword, a builtin, `self` or `cls`; `return None` is
not), which, where the place holds a single line, is found only once in the file. A lone common
line never places a block: its first copy may be in any unrelated function. `in_lines` looks in one file (the unit's own, first),
`Package.find` in the package's other Python files.

Where no place is found, `likely` gives a best guess in the same file, said as one, never as the
place: the unit of the release that most of the hunk's names are in (LIKELY_NAMES of them; a third
where its name shares the stem of the diff's unit's: `create_offloader_from_server_args` ->
`create_offloader`), clearly ahead of any other, and in it the line closest to the lines the hunk
removes (difflib's ratio, whitespace aside).
"""

from __future__ import annotations

import builtins
import keyword
import re
from collections.abc import Callable
from dataclasses import dataclass

from patchkit.diffs.units import Unit, split_lines

MIN_CHARS = 8
SLACK = 12  # lines the release may have put between two of the hunk's lines
LIKELY_NAMES, LIKELY_STEM = 2 / 3, 1 / 3  # of the hunk's names in a unit, for a best guess (with a shared stem)
CLOSE = 0.6  # difflib's ratio for a line of the guessed unit to be the one the hunk's lines became
_NAME = re.compile(rb"[A-Za-z_][A-Za-z0-9_]*")
_PLAIN = frozenset(name.encode() for name in [*keyword.kwlist, *keyword.softkwlist, *dir(builtins), "self", "cls"])


@dataclass(frozen=True)
class Place:
    file: str
    line: int  # 0-based, in the release's file
    matched: int  # how many of the hunk's telling lines are there


def _key(line: bytes) -> bytes:
    return b"".join(line.split())


def telling(old: list[bytes]) -> list[tuple[int, bytes]]:
    """(index in the hunk, the line without whitespace) of each line that says something."""
    return [(i, key) for i, line in enumerate(old) if len(key := _key(line)) >= MIN_CHARS]


def names(line: bytes) -> set[bytes]:
    """The names a line uses that say which code it is (not keywords, builtins, `self`, `cls`)."""
    return {name for name in _NAME.findall(line) if name not in _PLAIN}


def distinctive(line: bytes) -> bool:
    """Whether a line may back a place: telling, and naming something of its own."""
    return len(_key(line)) >= MIN_CHARS and bool(names(line))


def needed(count: int) -> int:
    """How many of `count` telling lines a place must hold."""
    return 1 if count == 1 else max(2, (count + 1) // 2)


def in_lines(old: list[bytes], lines: list[bytes]) -> tuple[int, int] | None:
    """(the first line of `lines` holding the hunk's code, how many telling lines are there), the
    best place (ties: the earliest) backed by a distinctive line (a single one: found once in
    `lines`), None where no place holds enough of them."""
    wanted = telling(old)
    if not wanted:
        return None
    keys = {key for _, key in wanted}
    strong = {key for i, key in wanted if distinctive(old[i])}
    if not strong:
        return None
    least = needed(len(wanted))
    seen: dict[bytes, list[int]] = {}
    for n, line in enumerate(lines):
        key = _key(line)
        if key in keys:
            seen.setdefault(key, []).append(n)
    best: tuple[int, int] | None = None  # (matched, -first line)
    for i, key in wanted:
        for at in seen.get(key, ()):
            start = at - i
            low, high = start - SLACK, start + len(old) + SLACK
            hits = {k: near for _, k in wanted
                    if (near := min((n for n in seen.get(k, ()) if low <= n < high), default=-1)) >= 0}
            matched = sum(1 for _, k in wanted if k in hits)
            if matched < least or not strong & set(hits):
                continue
            if len(hits) == 1 and len(seen[next(iter(hits))]) > 1:  # one line, found more than once
                continue
            candidate = (matched, -min(hits.values()))
            if best is None or candidate > best:
                best = candidate
    return None if best is None else (-best[1], best[0])


@dataclass(frozen=True)
class Guess:
    line: int  # 0-based, in the release's file
    unit: str  # the release's unit
    names: int  # how many of the hunk's names are in it
    of: int  # of how many
    stem: bool  # whether its name shares the stem of the diff's unit's


def likely(old: list[bytes], removed: list[bytes], unit: str, lines: list[bytes], found: list[Unit]) -> Guess | None:
    """The best guess at the release's code for a hunk of `unit` (its old lines, and the ones it
    removes) that `in_lines` places nowhere in the file (`found`: its units); None where no unit is
    clearly the one."""
    wanted = set().union(*(names(line) for line in old)) - {unit.rsplit(".", 1)[-1].encode()}
    if not wanted:
        return None
    scored: list[tuple[float, Unit, int, bool]] = []
    for candidate in found:
        if candidate.name.startswith("<"):
            continue
        have = set().union(*(names(line) for line in lines[candidate.start:candidate.end]))
        share = len(wanted & have)
        stem = _stem(unit) == _stem(candidate.name) or _short(candidate.name).startswith(_short(unit) + "_") or \
            _short(unit).startswith(_short(candidate.name) + "_")
        if share / len(wanted) >= (LIKELY_STEM if stem else LIKELY_NAMES):
            scored.append((share + (len(wanted) if stem else 0), candidate, share, stem))
    scored.sort(key=lambda row: -row[0])
    if not scored or len(scored) > 1 and scored[1][0] >= scored[0][0]:
        return None
    _, best, share, stem = scored[0]
    return Guess(_closest(removed if telling(removed) else old, lines, best), best.name, share, len(wanted), stem)


def _short(unit: str) -> str:
    return unit.rsplit(".", 1)[-1]


def _stem(unit: str) -> str:
    """A name's first two words (`create_offloader_from_server_args`: `create_offloader`)."""
    return "_".join(_short(unit).strip("_").split("_")[:2])


def _closest(old: list[bytes], lines: list[bytes], unit: Unit) -> int:
    """The line of `unit` closest to one of the hunk's telling lines (ties: the earliest), else its first line."""
    import difflib

    best, at = CLOSE, unit.start
    for _, key in telling(old):
        for n in range(unit.start, unit.end):
            matcher = difflib.SequenceMatcher(None, key, _key(lines[n]), autojunk=False)
            if matcher.quick_ratio() > best and (ratio := matcher.ratio()) > best:
                best, at = ratio, n
    return at


class Package:
    """The release's Python files (`files()`), read with `read`, searched for a hunk's code."""

    def __init__(self, files: Callable[[], list[str]], read: Callable[[str], bytes | None]) -> None:
        self._files, self._read = files, read
        self._data: dict[str, bytes] | None = None  # each file read once, on the first search

    def _all(self) -> dict[str, bytes]:
        if self._data is None:
            self._data = {rel: data for rel in self._files() if (data := self._read(rel))}
        return self._data

    def find(self, old: list[bytes], leave_out: str) -> Place | None:
        """The best place of the hunk's code in a file other than `leave_out` (ties: the first in
        path order), None where no file holds enough of its telling lines."""
        wanted = telling(old)
        if not wanted:
            return None
        plain = {line.strip() for i, line in enumerate(old) if any(i == j for j, _ in wanted)}
        least = needed(len(wanted))
        best: Place | None = None
        for rel, data in self._all().items():
            if rel == leave_out:
                continue
            if sum(1 for text in plain if text in data) < min(least, len(plain)):
                continue
            found = in_lines(old, split_lines(data))
            if found is not None and (best is None or found[1] > best.matched):
                best = Place(rel, found[0], found[1])
        return best

    def _unit(self, rel: str, name: str) -> tuple[bytes, Unit] | None:
        """`rel`'s bytes and its unit `name`; None where the file has no such unit or does not parse."""
        from patchkit.diffs import units

        data = self._read(rel) or b""
        try:
            found = next((u for u in units.units(data) if u.name == name), None)
        except (SyntaxError, ValueError):
            return None
        return None if found is None else (data, found)

    def header(self, rel: str, name: str) -> int | None:
        """The line (0-based) of the `def`/`class` line of `rel`'s unit `name` (past its comments and
        decorators), None where the file has no such unit or does not parse."""
        import re

        unit = self._unit(rel, name)
        if unit is None:
            return None
        data, found = unit
        short = re.compile(rb"\s*(?:async\s+)?(?:def|class)\s+" + re.escape(name.rsplit(".", 1)[-1].encode()) + rb"\b")
        lines = split_lines(data)
        return next((n for n in range(found.start, found.end) if short.match(lines[n])), found.start)

    def line_in(self, rel: str, name: str, old: list[bytes]) -> int | None:
        """The line (0-based) of `rel`'s unit `name` closest to one of a hunk's lines (`old`: the ones
        it removes, else its old lines; difflib's ratio over CLOSE, whitespace aside), else its
        `def`/`class` line; None where the file has no such unit or does not parse."""
        unit = self._unit(rel, name)
        if unit is None:
            return None
        data, found = unit
        at = _closest(old, split_lines(data), found)
        return self.header(rel, name) if at == found.start else at

    def unit_at(self, place: Place) -> str:
        """The unit of the release's file holding the place ("" where the file does not parse)."""
        from patchkit.diffs import units

        try:
            found = units.containing(units.units(self._all().get(place.file, b"")), place.line)
        except (SyntaxError, ValueError):
            return ""
        return found.name if found else ""


ALREADY = 2 / 3  # of a hunk's added lines V's file must hold, in order, for the block to say so


@dataclass(frozen=True)
class Already:
    """How much of a hunk's change the release's file has already (`already`)."""

    found: int  # the hunk's added lines (blank ones aside) the file holds, in order, whitespace aside
    of: int  # the hunk's added lines, blank ones aside
    first: int  # 0-based, in the release's file: the first and the last of them
    last: int
    rest: tuple[bytes, ...]  # the added lines not there, as the diff writes them


def already(added: list[bytes], lines: list[bytes], within: tuple[int, int] | None = None) -> Already | None:
    """Whether the release's file (`lines`; `within`: only its lines FIRST to END, 0-based, a unit's)
    already holds most of a hunk's added lines (ALREADY of them, at least two, in order, whitespace
    aside, blank lines aside): a change upstream took in part (a diff half-upstreamed), so the
    maintainer checks only the rest. Looked for where those lines hold the hunk's telling added
    lines (`in_lines`: backed by a distinctive one), in a span of twice the hunk's lines plus SLACK
    each side; None where that is not so."""
    import difflib

    wanted = [line for line in added if _key(line)]
    if len(wanted) < 2:
        return None
    start, end = within or (0, len(lines))
    here = in_lines(wanted, lines[start:end])
    if here is None:
        return None
    low, high = max(start + here[0] - SLACK, start), min(start + here[0] + 2 * len(wanted) + SLACK, end)
    keys = [_key(line) for line in wanted]
    matcher = difflib.SequenceMatcher(None, keys, [_key(line) for line in lines[low:high]], autojunk=False)
    pairs = [(a + k, low + b + k) for a, b, size in matcher.get_matching_blocks() for k in range(size)]
    found = {a for a, _ in pairs}
    if len(found) < 2 or len(found) < ALREADY * len(wanted):
        return None
    return Already(len(found), len(wanted), pairs[0][1], pairs[-1][1],
                   tuple(line for n, line in enumerate(wanted) if n not in found))
