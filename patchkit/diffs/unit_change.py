"""Whether one unit of code already holds a diff's change to it (`holds`), told apart from a
unit that still needs it, also where the release changed the unit too.

A 3-way merge alone cannot always tell: `merge3` aligns lines, and where the release changed
lines right beside the diff's (0.5.12's `validate_deepseek_v4_cp` dropped the lines after the
ones a 0.5.16 -> 0.5.17 diff inserts), merging the diff's change again into the merged unit
aligns the two `logger.warning(` calls differently and reads as a conflict: bytes patchkit
wrote would not read back as applied. So the change is also undone (line by line: each of the
diff's changed runs of lines found in the unit and put back as the pre-image had it; else by a
3-way merge of the reverse change), and the unit holds the change when merging it into that
undone form gives the unit back exactly. `unit_merge` counts a merge whose result does not hold
the change by this test as a conflict: what patchkit writes always reads back as applied.
"""

from __future__ import annotations

from collections.abc import Callable
from difflib import SequenceMatcher

from patchkit.diffs.units import split_lines

# (base, ours, theirs) -> (merged bytes, clean): the unit merge (three_way.merge_unit_plain).
Merge = Callable[[bytes, bytes, bytes], tuple[bytes, bool]]


def holds(before: bytes, current: bytes, after: bytes, merge: Merge) -> bool:
    """Whether `current` is a form of the unit with the diff's change (`before` -> `after`) in it."""
    if current == after:
        return True
    merged, clean = merge(before, current, after)
    if clean and merged == current:
        return True
    # The unit without the change: undone line by line, or by a 3-way merge of the reverse change.
    reverse, clean = merge(after, current, before)
    for undone in (undo(before, current, after), reverse if clean else None):
        if undone is not None and undone != current:
            again, clean = merge(before, undone, after)
            if clean and again == current:
                return True
    return False


def undo(before: bytes, current: bytes, after: bytes) -> bytes | None:
    """`current` with each run of lines the diff changed put back as `before` had it, each found
    nearest where the diff put it (after the run before it), with its neighbouring lines when they
    are there; None when one is not in `current`."""
    old, new, ours = split_lines(before), split_lines(after), split_lines(current)
    out: list[bytes] = []
    at = 0  # the first line of `ours` not yet copied
    shift = 0  # where `ours` has the diff's lines, against where `after` has them
    for tag, i1, i2, j1, j2 in SequenceMatcher(None, old, new, autojunk=False).get_opcodes():
        if tag == "equal":
            continue
        found = _find(ours, new, j1, j2, at, j1 + shift)
        if found is None:
            return None
        out += ours[at:found] + old[i1:i2]
        at = found + (j2 - j1)
        shift = found - j1
    return b"".join(out + ours[at:])


def _find(ours: list[bytes], new: list[bytes], j1: int, j2: int, earliest: int, expected: int) -> int | None:
    """Where `new[j1:j2]` (the diff's lines; empty where it only removed lines) starts in `ours`,
    at or after `earliest`, nearest `expected`: with the line before and after it first, then
    with either, then alone (an empty run needs one of its neighbours)."""
    want = new[j1:j2]
    before = new[j1 - 1] if j1 > 0 else None
    after = new[j2] if j2 < len(new) else None
    places = sorted(range(earliest, len(ours) - len(want) + 1), key=lambda k: (abs(k - expected), k))
    places = [k for k in places if ours[k:k + len(want)] == want]

    def beside(k: int, line: bytes | None, offset: int) -> bool:
        return line is not None and 0 <= k + offset < len(ours) and ours[k + offset] == line

    tests: list[Callable[[int], bool]] = [
        lambda k: beside(k, before, -1) and beside(k, after, len(want)),
        lambda k: beside(k, before, -1) or beside(k, after, len(want)),
    ]
    if want:
        tests.append(lambda k: True)
    for test in tests:
        chosen = next((k for k in places if test(k)), None)
        if chosen is not None:
            return chosen
    return None
