"""`--continue`'s order of work (engine/bump_continue.py), on rows alone."""

from __future__ import annotations

from patchkit.engine.bump_continue import _lower_first
from patchkit.engine.bump_record import PatchRow


def _row(pid: str, *waits_on: str) -> PatchRow:
    return PatchRow(id=pid, kind="diff", on_from="applies", on_to="broken", action="conflicts", waits_on=waits_on)


def test_a_diff_is_finished_after_the_ones_it_waits_on_whatever_the_records_order():
    """A folder written with its rows in the order of their names (before they were kept in stack
    order) lists a stacked diff before the one under it: finished in that order, each waited on the
    other at every `--continue`, for ever."""
    rows = [_row("a-pull-weights", "m-release-hicache", "t-top-p"), _row("m-release-hicache", "s-sglang"),
            _row("s-sglang"), _row("t-top-p", "s-sglang"), _row("z-alone")]
    assert _lower_first(rows) == ["s-sglang", "m-release-hicache", "t-top-p", "a-pull-weights", "z-alone"]


def test_the_order_is_kept_where_nothing_waits_and_a_damaged_records_cycle_ends():
    assert _lower_first([_row("b"), _row("a")]) == ["b", "a"]
    assert _lower_first([_row("a", "b"), _row("b", "a")]) == ["b", "a"]
    assert _lower_first([_row("a", "gone")]) == ["a"]
