"""patchkit.diffs.units: a file cut into named units that partition its lines."""

from __future__ import annotations

from patchkit.diffs import units

SOURCE = b'''"""doc"""
import os
from x import (
    y,
)

A = 1


# about f
@deco
def f():
    return 1


class C(Base):
    """C."""

    attr = 2

    def m(self):
        pass

    @property
    def p(self):
        return 1

    @p.setter
    def p(self, value):
        pass

    other = 3


if TYPE_CHECKING:
    import z
a = 1; b = 2
# trailing comment
'''


def test_units_partition_the_file_and_are_named():
    found = units.units(SOURCE)
    lines = units.split_lines(SOURCE)
    assert found[0].start == 0 and found[-1].end == len(lines)
    assert all(a.end == b.start for a, b in zip(found, found[1:]))
    assert [u.name for u in found] == [
        "<docstring>", "<imports>", "A", "f", "C", "C.m", "C.p", "C.p#2", "C.other", "if TYPE_CHECKING", "a", units.END]
    text = units.texts(SOURCE)
    assert b"".join(text.values()) == SOURCE
    assert text["f"].startswith(b"\n\n# about f\n@deco\ndef f():")  # leading blank lines, comment and decorator
    assert text["C"].startswith(b"\n\nclass C(Base):") and b"attr = 2" in text["C"] and b"def m" not in text["C"]


def test_the_same_unit_is_found_after_lines_moved():
    moved = SOURCE.replace(b"A = 1\n", b"A = 1\nB = 2\nC2 = 3\n")
    assert units.texts(moved)["C.m"] == units.texts(SOURCE)["C.m"]
    assert units.containing(units.units(SOURCE), 11).name == "f"
