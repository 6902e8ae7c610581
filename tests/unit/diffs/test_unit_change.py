"""unit_change.holds: a unit that has a diff's change reads so, also where the release changed the
lines right beside it (hand-written units, the shape of 0.5.12's validate_deepseek_v4_cp)."""

from __future__ import annotations

from textwrap import dedent

from patchkit.diffs import three_way, unit_change, unit_merge

BEFORE = dedent("""\
    def validate(args):
        check(args)
        log(
            "disabling a"
        )
        disable()
        log(
            "enabled"
        )
    """).encode()
# The diff inserts a check after check(args).
AFTER = BEFORE.replace(b"    check(args)\n", b"    check(args)\n    if args.x:\n        raise ValueError(args.x)\n")
# The release removed the first log() and disable(), right after where the diff inserts.
RELEASE = BEFORE.replace(b'    log(\n        "disabling a"\n    )\n    disable()\n', b"")


def merge(base: bytes, ours: bytes, theirs: bytes) -> tuple[bytes, bool]:
    return three_way.merge_unit(base, ours, theirs, False)


def test_a_merged_unit_with_the_release_s_change_beside_the_diff_s_holds_it():
    merged, clean = merge(BEFORE, RELEASE, AFTER)
    assert clean and b"raise ValueError" in merged and b"disabling a" not in merged
    again, clean = merge(BEFORE, merged, AFTER)
    assert not clean  # what a 3-way merge alone made of it: the bytes written read as a conflict
    assert unit_change.holds(BEFORE, merged, AFTER, merge)


def test_a_unit_without_the_change_does_not_hold_it():
    assert not unit_change.holds(BEFORE, RELEASE, AFTER, merge)
    assert not unit_change.holds(BEFORE, BEFORE, AFTER, merge)
    assert unit_change.holds(BEFORE, AFTER, AFTER, merge)


def test_undo_puts_the_diff_s_lines_back_as_the_pre_image_had_them():
    merged, _ = merge(BEFORE, RELEASE, AFTER)
    assert unit_change.undo(BEFORE, merged, AFTER) == RELEASE
    assert unit_change.undo(BEFORE, RELEASE, AFTER) is None  # the diff's lines are not there


def test_per_unit_the_merged_file_reads_back_as_upstream():
    file = b"import os\n\n\n" + BEFORE
    target = b"import os\n\n\n" + RELEASE
    patched = b"import os\n\n\n" + AFTER
    first = unit_merge._per_unit("m.py", file, patched, target, False)
    assert [(u.unit, u.outcome) for u in first.units] == [("validate", unit_merge.MERGED)]
    again = unit_merge._per_unit("m.py", file, patched, first.after or b"", False)
    assert again.upstream, again.units
