"""Where a release's code for one hunk of a diff is, found by the hunk's own lines: a conflict
block (`unit_merge`) names it (`FILE:LINE`) and sits on it, instead of carrying a whole old unit.

The hunk's old lines (its context and the lines it removes) are compared with a file's lines
whitespace aside (a block re-indented under a new `if` is the same code); only lines that say
something count (`telling`: at least MIN_CHARS characters once the whitespace is out, so `else:`,
`)` and `float,` do not). A place is where the most telling lines are found within the hunk's
span (plus SLACK lines, for lines the release put between them); it needs two of them (one where
the hunk has only one) and at least half of the hunk's. `in_lines` looks in one file (the unit's
own, first), `Package.find` in the package's other Python files.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from patchkit.diffs.units import split_lines

MIN_CHARS = 8
SLACK = 12  # lines the release may have put between two of the hunk's lines


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


def needed(count: int) -> int:
    """How many of `count` telling lines a place must hold."""
    return 1 if count == 1 else max(2, (count + 1) // 2)


def in_lines(old: list[bytes], lines: list[bytes]) -> tuple[int, int] | None:
    """(the first line of `lines` holding the hunk's code, how many telling lines are there), the
    best place (ties: the earliest), None where no place holds enough of them."""
    wanted = telling(old)
    if not wanted:
        return None
    keys = {key for _, key in wanted}
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
            found = [min((n for n in seen.get(k, ()) if low <= n < high), default=None) for _, k in wanted]
            hits = [n for n in found if n is not None]
            candidate = (len(hits), -min(hits))
            if best is None or candidate > best:
                best = candidate
    if best is None or best[0] < needed(len(wanted)):
        return None
    return -best[1], best[0]


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

    def unit_at(self, place: Place) -> str:
        """The unit of the release's file holding the place ("" where the file does not parse)."""
        from patchkit.diffs import units

        try:
            found = units.containing(units.units(self._all().get(place.file, b"")), place.line)
        except (SyntaxError, ValueError):
            return ""
        return found.name if found else ""
