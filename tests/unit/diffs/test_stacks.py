"""patchkit.diffs.stacks: a diff made on top of another, told from the index hashes."""

from __future__ import annotations

from patchkit.diffs import stacks, unidiff
from testing.diffs import git_diff

REL, OTHER = "sglang/srt/x.py", "sglang/srt/y.py"
V0, V1, V2 = b"x = 0\n", b"x = 1\n", b"x = 2\n"


def test_a_diff_whose_pre_image_is_another_s_post_image_is_stacked_on_it_and_ordered_after():
    lower = unidiff.parse(git_diff({REL: V0, OTHER: b"y = 0\n"}, {REL: V1, OTHER: b"y = 1\n"}), "zz-base.patch")
    upper = unidiff.parse(git_diff({REL: V1}, {REL: V2}), "aa-on-top.patch")
    alone = unidiff.parse(git_diff({REL: V0}, {REL: V2}), "other.patch")
    diffs = {d.id: d for d in (lower, upper, alone)}
    assert stacks.stacked_on(diffs) == {"aa-on-top": {"zz-base": [REL]}}
    assert stacks.ordered(diffs) == ["other", "zz-base", "aa-on-top"]  # by id, but the stack first
    # One whose every pre-image is a release's file was made on that release.
    assert stacks.stacked_on(diffs, made_for_a_release=lambda diff: diff.id == "aa-on-top") == {}
