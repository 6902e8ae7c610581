"""line_merge: the 3-way merge `bump --continue` puts a stacked diff's resolution on top of the
lower one's with: a line each side changed next to the other's, or a change both made alike, is
taken; a line both changed otherwise, or one side took away, is a conflict (None)."""

from __future__ import annotations

from patchkit.diffs import line_merge

BASE = b"def f(x):\n    if x > 0:\n        return g(\n            x * 1024\n        )\n    return None\n"
LOWER = BASE.replace(b"x * 1024", b"x * (1 << 10)")  # the lower's resolution
UPPER = BASE.replace(b"return g(", b"return  g(")  # the upper's change, the line right above


def test_a_line_changed_next_to_the_others_change_is_merged():
    assert line_merge.merge(BASE, LOWER, UPPER) == LOWER.replace(b"return g(", b"return  g(")


def test_a_resolution_holding_the_lowers_change_too_is_merged():
    both = LOWER.replace(b"return g(", b"return  g(")
    assert line_merge.merge(BASE, LOWER, both) == both


def test_the_same_line_changed_otherwise_is_a_conflict():
    assert line_merge.merge(BASE, LOWER, BASE.replace(b"x * 1024", b"x * 1000")) is None


def test_a_line_the_lower_took_away_and_the_upper_changes_is_a_conflict():
    gone = BASE.replace(b"            x * 1024\n", b"")
    assert line_merge.merge(BASE, gone, BASE.replace(b"x * 1024", b"x * 1000")) is None


def test_two_insertions_at_one_place_are_a_conflict_and_apart_are_merged():
    first = BASE.replace(b"    return None\n", b"    log(x)\n    return None\n")
    other = BASE.replace(b"    return None\n", b"    trace(x)\n    return None\n")
    assert line_merge.merge(BASE, first, other) is None
    top = BASE.replace(b"def f(x):\n", b"def f(x):\n    trace(x)\n")
    assert line_merge.merge(BASE, first, top) == first.replace(b"def f(x):\n", b"def f(x):\n    trace(x)\n")
