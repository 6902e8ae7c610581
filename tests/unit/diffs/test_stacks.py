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
    assert stacks.ordered(diffs, stacks.stacked_on(diffs)) == ["other", "zz-base", "aa-on-top"]  # by id, but the stack first
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


F = "sglang/srt/f.py"
UNITS = (b"def one():\n    return 1\n\n\ndef two():\n    return 2\n\n\ndef three():\n    return 3\n\n\n"
         b"def four():\n    return 4\n")


def _three_deep(patchkit_home):
    """A stack three deep on one file, each diff changing a function of its own: `base` (on a cached
    release, 0.5.96), `middle` on base's post-image, `top` on middle's (not on base's); and V, where
    upstream changed base's function in the same line."""
    from patchkit.diffs import rebase
    from tests.unit.diffs.test_release_blobs import wheel

    wheel(patchkit_home, "0.5.96", {F: UNITS})
    low = UNITS.replace(b"return 1\n", b"return 10\n")
    mid = low.replace(b"return 2\n", b"return 20\n")
    top = mid.replace(b"return 3\n", b"return 30\n")
    texts = {"base.patch": git_diff({F: UNITS}, {F: low}), "middle.patch": git_diff({F: low}, {F: mid}),
             "top.patch": git_diff({F: mid}, {F: top})}
    items = [(unidiff.load(data, name), data) for name, data in texts.items()]
    on_v = UNITS.replace(b"return 1\n", b"return 100\n").replace(b"return 4\n", b"return 40\n")
    return items, rebase.rebase_stack(items, "0.5.99", {F: on_v}.get)


def test_the_upper_waits_rule_is_one_for_a_three_deep_stack(patchkit_home, tmp_path):
    """issue 44 item 5: one definition of "stacked" (stacks.stack) and one "upper waits on lower"
    rule (stacks.Unfinished), used by rebase of a stack and by bump alike. The lowest diff conflicts
    on V; the middle one is stacked on its file there (it depends on it); the top one is stacked on
    the middle's file only, which is unfinished because the middle depends on the lowest: it depends
    on the middle one too. Before, `rebase --tree` gave the top diff a tree made on the middle one's
    file rebased on V's bytes (the lowest diff's change lost): only bump's copy of the rule made it wait."""
    from patchkit.diffs import rebase_tree

    items, stacked = _three_deep(patchkit_home)
    diffs = {diff.id: diff for diff, _ in items}
    found = stacks.stack(diffs)
    assert found.under == {"middle": {"base": [F]}, "top": {"middle": [F]}}
    assert found.order == ("base", "middle", "top")
    made = dict(stacked)
    assert [u.unit for u in made["base"].conflicts] == ["one"]
    assert made["middle"].depends_on == {"base": [F]} and made["top"].depends_on == {"middle": [F]}
    trees = {tree.id: tree for tree in rebase_tree.write_stack(stacked, {d.id: data for d, data in items},
                                                               tmp_path / "trees")}
    assert trees["base"].tree == "base.tree" and trees["base"].conflicts
    assert (trees["middle"].tree, trees["middle"].waits_on) == ("", ("base",))
    assert (trees["top"].tree, trees["top"].waits_on) == ("", ("middle",))
    assert sorted(p.name for p in (tmp_path / "trees").iterdir()) == ["base.tree"]


def test_an_upper_diff_is_rebased_on_the_lower_ones_side_of_its_blocks(patchkit_home):
    """issue 40 item 7: where the lowest diff conflicts, the diffs on top of it are rebased on its
    file with its blocks taken as its own side (`return 10`), not on V's bytes: their own change is
    found (and would conflict) now, and each says what it depends on."""
    _, stacked = _three_deep(patchkit_home)
    made = dict(stacked)
    for pid, mine in (("middle", b"return 20\n"), ("top", b"return 30\n")):
        after = made[pid].changes[0].before
        assert b"return 10\n" in after and b"return 40\n" in after and b"<<<<<<<" not in after, pid
        assert mine in made[pid].changes[0].after and not made[pid].conflicts
        assert any("depends on its resolution there" in note for note in made[pid].notes), made[pid].notes
