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


def test_a_stack_rebased_to_a_release_is_still_a_stack(patchkit_home):
    """issue 29: rebased to V, the lower diff's post-image of a file can be the next release's file,
    so the upper diff's every pre-image is a release's file: it read as made for that release, not
    stacked (list had no stacked_on after `rebase LOWER UPPER --to V`). Its pre-image is the whole
    tree the lower leaves on V (the files the lower does not change are V's): a stack."""
    from patchkit.diffs import release_blobs
    from tests.unit.diffs.test_release_blobs import wheel

    third = "sglang/srt/z.py"
    wheel(patchkit_home, "0.5.96", {REL: V0, OTHER: b"y = 0\n", third: b"z = 0\n"})  # V, the lower's base
    wheel(patchkit_home, "0.5.97", {REL: V1, OTHER: b"y = 1\n", third: b"z = 0\n"})  # the lower's post-image
    lower = unidiff.parse(git_diff({REL: V0, OTHER: b"y = 0\n"}, {REL: V1, OTHER: b"y = 1\n"}), "base.patch")
    upper = unidiff.parse(git_diff({REL: V1, third: b"z = 0\n"}, {REL: V2, third: b"z = 1\n"}), "extra.patch")
    diffs = {d.id: d for d in (lower, upper)}
    assert release_blobs.made_for_a_release(upper)  # 0.5.97 holds both of its pre-images
    assert stacks.stacked_on(diffs, release_blobs.made_for_a_release) == {}  # as before: read as made for 0.5.97
    found = stacks.stacked_on(diffs, release_blobs.made_for_a_release, release_blobs.on_lower_tree)
    assert found == {"extra": {"base": [REL]}}
    # A diff one of whose other files is not the lower's base release's was made on that release.
    made_on_97 = unidiff.parse(git_diff({REL: V1, OTHER: b"y = 1\n"}, {REL: V2, OTHER: b"y = 2\n"}), "other.patch")
    assert release_blobs.on_lower_tree(made_on_97, lower, []) is False
    wheel(patchkit_home, "0.5.98", {REL: V1, third: b"z = 9\n"})
    elsewhere = unidiff.parse(git_diff({REL: V1, third: b"z = 9\n"}, {REL: V2, third: b"z = 1\n"}), "later.patch")
    assert stacks.stacked_on({d.id: d for d in (lower, elsewhere)}, release_blobs.made_for_a_release,
                             release_blobs.on_lower_tree) == {}
