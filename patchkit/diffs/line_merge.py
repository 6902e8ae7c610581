"""A 3-way merge of one file that takes two changes lying next to each other: merge3 aligns the
three files, and each region it calls a conflict is looked at line by line, where the two sides'
edits of the base that touch different lines (a line each side changed, one right above the
other) or are the same edit (a line both changed alike) are both taken. Two edits of one line,
or of overlapping lines, that differ stay a conflict (None).

For `bump --continue` only: a stacked diff's resolution, made on the lower diff's file, put on
top of the lower diff's resolution of that file. Both are the user's, and a line the upper
changed next to the lower's is no clash (docs/bump.md: a block comes back only where the lower's
resolution took away what the upper changes). git's merge, and `rebase`'s, call that a conflict.
"""

from __future__ import annotations

import difflib
from typing import cast

from patchkit.diffs.units import split_lines

# An edit of the base: the lines [start, end) replaced by `lines` (start == end: inserted there).
Edit = tuple[int, int, tuple[bytes, ...]]


def merge(base: bytes, ours: bytes, theirs: bytes) -> bytes | None:
    """`ours` with the change base -> theirs merged in, or None where both sides changed one line
    (or overlapping lines) differently, or inserted different lines at one place."""
    import merge3

    lines = [split_lines(data) for data in (base, ours, theirs)]
    old, mine, other = lines
    out: list[bytes] = []
    for region in merge3.Merge3(old, mine, other).merge_regions():
        kind = region[0]
        if kind == "unchanged":
            out += old[region[1]:region[2]]
        elif kind in ("a", "same"):
            out += mine[region[1]:region[2]]
        elif kind == "b":
            out += other[region[1]:region[2]]
        else:
            _, z1, z2, a1, a2, b1, b2 = cast("tuple[str, int, int, int, int, int, int]", region)
            found = _region(old[z1:z2], mine[a1:a2], other[b1:b2])
            if found is None:
                return None
            out += found
    return b"".join(out)


def _region(base: list[bytes], ours: list[bytes], theirs: list[bytes]) -> list[bytes] | None:
    """One region both sides changed: both sides' edits applied where none clashes, else None."""
    mine, other = _edits(base, ours), _edits(base, theirs)
    if any(_clash(a, b) for a in mine for b in other):
        return None
    out: list[bytes] = []
    at = 0
    for start, end, lines in sorted(set(mine) | set(other), key=lambda edit: (edit[0], edit[1])):
        out += base[at:start]
        out += lines
        at = end
    return out + base[at:]


def _edits(base: list[bytes], side: list[bytes]) -> list[Edit]:
    """The edits that make `side` from `base`; a block of lines replaced by as many is one edit per
    line, so that a line changed alike on both sides is one and the same edit."""
    found: list[Edit] = []
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(None, base, side, autojunk=False).get_opcodes():
        if tag == "equal":
            continue
        if tag == "replace" and i2 - i1 == j2 - j1:
            found += [(i1 + k, i1 + k + 1, (side[j1 + k],)) for k in range(i2 - i1)]
        else:
            found.append((i1, i2, tuple(side[j1:j2])))
    return found


def _clash(a: Edit, b: Edit) -> bool:
    """Whether two edits of one base, one from each side, cannot both be made: not the same edit,
    and over a common line, or inserting at one place, or one inserting inside the other's lines."""
    if a == b:
        return False
    (a1, a2, _), (b1, b2, _) = a, b
    if a1 == a2 and b1 == b2:
        return a1 == b1
    if a1 == a2:
        return b1 < a1 < b2
    if b1 == b2:
        return a1 < b1 < a2
    return a1 < b2 and b1 < a2
