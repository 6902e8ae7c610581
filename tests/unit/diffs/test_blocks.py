"""patchkit.diffs.blocks and code_place on synthetic files (the real-release shapes are in
tests/integration/test_conflict_blocks.py): a conflict block is the size of the change, git's block
where both sides changed the same few lines, else the diff's hunk on the code it names."""

from __future__ import annotations

from patchkit.diffs import blocks as blocks_mod
from patchkit.diffs import code_place, unidiff, unit_merge
from testing.blocks import blocks
from testing.diffs import git_diff

REL = "sglang/srt/m.py"
BODY = [f"    value_{i} = compute_something({i})\n".encode() for i in range(40)]
BASE = b"import os\n\n\ndef long_function():\n" + b"".join(BODY) + b"    return value_0\n"
# the diff: one log line after value_20
PATCHED = BASE.replace(BODY[20], BODY[20] + b'    logger.info("twenty done")\n')


def marked(target: bytes, package: dict[str, bytes] | None = None) -> unit_merge.FileResolution:
    diff = unidiff.parse(git_diff({REL: BASE}, {REL: PATCHED}), "d.patch")
    files = {REL: target, **(package or {})}
    return unit_merge.resolve(diff, files.get, markers=True, pre_image=lambda f: BASE,
                             python_files=lambda: sorted(files)).files[0]


def test_a_small_conflict_stays_gits_block():
    target = BASE.replace(BODY[20], b"    value_20 = compute_other(20)\n")
    found = marked(target)
    assert [u.unit for u in found.conflicts] == ["long_function"]
    (block,) = blocks(found.after or b"")
    assert block.where == "" and block.release == b"    value_20 = compute_other(20)\n"
    assert block.patch == BODY[20] + b'    logger.info("twenty done")\n'


def test_a_rewritten_unit_gets_the_diffs_hunk_right_above_its_code():
    # the release nests the whole body one level deeper: merge3 would set all 40 old lines against it
    target = b"import os\n\n\ndef long_function():\n    if True:\n" + b"".join(b"    " + line for line in BODY) + \
        b"        return value_0\n"
    found = marked(target)
    (block,) = blocks(found.after or b"")
    assert block.lines <= 12 and block.release == b""
    assert block.patch.splitlines()[0] == b"@@ -23,6 +23,7 @@"  # as git diff numbers it
    assert b'+    logger.info("twenty done")\n' in block.patch
    assert block.place == (REL, 24)  # value_18: the hunk's first context line, in this release's file
    lines = (found.after or b"").splitlines()
    assert lines[block.start - 1 + block.lines] == b"        value_18 = compute_something(18)"
    assert "long_function is there, changed in those lines" in block.where
    assert found.conflicts[0].detail.endswith(f"this release has that code at {REL}:24 (long_function is there, "
                                              "changed in those lines)")


def test_code_moved_to_another_file_is_named_there():
    other = "sglang/srt/other.py"
    target = b"import os\n\n\ndef long_function():\n    return None\n"
    moved = b"import os\n\n\ndef helper():\n" + b"".join(BODY) + b"    return value_0\n"
    found = marked(target, {other: moved, "sglang/srt/third.py": b"x = 1\n"})
    (block,) = blocks(found.after or b"")
    assert block.place == (other, 23)  # value_18 there
    assert "(moved to that file, into helper)" in block.where


def test_a_place_needs_enough_of_the_hunks_telling_lines():
    old = [b"    else:\n", b"        value = compute(a, b)\n", b"        other = compute(b, a)\n", b"    )\n"]
    assert [key for _, key in code_place.telling(old)] == [b"value=compute(a,b)", b"other=compute(b,a)"]
    assert code_place.in_lines(old, [b"x\n", b"  value = compute(a, b)\n", b"  other = compute(b, a)\n"]) == (1, 2)
    assert code_place.in_lines(old, [b"value = compute(a, b)\n"] + [b"x\n"] * 40 + [b"other = compute(b, a)\n"]) is None


# late() ends in a common line; this release renamed it finish() and rewrote it (no `return None`).
EARLY_LATE = (b"import os\n\n\ndef early(flag):\n    if flag:\n        os.sync()\n    return None\n\n\n"
              b"def late(items):\n    for item in items:\n        os.remove(item)\n    count = 0\n    total = 1\n"
              b"    size = 2\n    return None\n")


def test_a_lone_common_line_never_places_a_block():
    """The hunk's only telling line is `return None`, which early() also has: the block is not set in
    early() as if late()'s code were there (it was: 'moved or renamed to early'); found nowhere, it says so."""
    patched = EARLY_LATE.replace(b"    return None\n", b"    return count + total + size\n", 2).replace(
        b"    return count + total + size\n", b"    return None\n", 1)
    target = EARLY_LATE.split(b"def late")[0] + b"def finish(items):\n    for item in items:\n        os.unlink(item)\n" \
        b"    return len(items)\n"
    diff = unidiff.parse(git_diff({REL: EARLY_LATE}, {REL: patched}), "d.patch")
    found = unit_merge.resolve(diff, {REL: target}.get, markers=True, pre_image=lambda f: EARLY_LATE,
                               python_files=lambda: [REL]).files[0]
    (block,) = blocks(found.after or b"")
    assert block.place is None and "early" not in block.where, block.where
    assert "not found" in block.where
    assert "early" not in found.conflicts[0].detail and "not found" in found.conflicts[0].detail
    lines = target.splitlines(keepends=True)
    assert code_place.in_lines([b"    count = 0\n", b"    return None\n"], lines) is None
    # a distinctive line found once is a place; a common one found once is not
    assert code_place.in_lines([b"        os.unlink(item)\n"], lines) == (11, 1)
    assert code_place.in_lines([b"    return None\n"], lines[:8]) is None


# six log lines after value_20; this release nests the body a level deeper (the diff's hunk is the
# block) and has some of those lines already, as a diff upstream took in part leaves it
LOGS = [f'    logger.info("step {i} of twenty done", extra={{"step": {i}}})\n'.encode() for i in range(6)]


def _nested_with(logs: list[bytes]) -> tuple[bytes, bytes]:
    patched = BASE.replace(BODY[20], BODY[20] + b"".join(LOGS))
    target = b"import os\n\n\ndef long_function():\n    if True:\n" + b"".join(
        b"    " + line for line in BODY[:21]) + b"".join(b"    " + line for line in logs) + b"".join(
        b"    " + line for line in BODY[21:]) + b"        return value_0\n"
    diff = unidiff.parse(git_diff({REL: BASE}, {REL: patched}), "d.patch")
    found = unit_merge.resolve(diff, {REL: target}.get, markers=True, pre_image=lambda f: BASE,
                               python_files=lambda: [REL]).files[0]
    return found.after or b"", found.conflicts[0].detail.encode()


def test_a_block_says_how_much_of_its_change_the_release_has_already():
    """Five of the hunk's six added lines are in the release's file (re-indented, in order): the block
    and the conflict's detail say so, where, and which line is not there; with three of six (under
    two thirds) they say nothing of it."""
    after, detail = _nested_with(LOGS[:3] + LOGS[4:])
    (block,) = blocks(after)
    said = (f'5 of 6 added lines already in V at {REL}:27-31; the rest: '
            '`logger.info("step 3 of twenty done", extra={"step": 3})`')
    assert block.where.endswith(said) and block.release == b"", block.where
    assert detail.decode().endswith(said)
    after, detail = _nested_with(LOGS[:3])
    (block,) = blocks(after)
    assert "already in V" not in block.where and b"already in V" not in detail


def test_gits_block_says_how_much_of_its_change_the_release_has_already():
    """A small conflict stays git's block (the `<<<<<<< release` line as it was); where the release's
    side holds most of the lines the diff adds, its `>>>>>>> patch` line says so."""
    patched = BASE.replace(BODY[20], b"".join(LOGS))
    target = BASE.replace(BODY[20], b"".join(LOGS[:5]) + LOGS[5].replace(b"step", b"stage"))
    diff = unidiff.parse(git_diff({REL: BASE}, {REL: patched}), "d.patch")
    found = unit_merge.resolve(diff, {REL: target}.get, markers=True, pre_image=lambda f: BASE,
                               python_files=lambda: [REL]).files[0]
    (block,) = blocks(found.after or b"")
    assert block.where == "" and block.release.count(b"\n") == 6, block.release
    said = (f'5 of 6 added lines already in V at {REL}:25-29; the rest: '
            '`logger.info("step 5 of twenty done", extra={"step": 5})`')
    close = next(line for line in (found.after or b"").splitlines() if line.startswith(b">>>>>>> patch"))
    assert close == b">>>>>>> patch: " + said.encode(), close
    assert found.conflicts[0].detail.endswith(said)
    assert blocks_mod.without_blocks(found.after or b"", "patch") == patched  # a side is still taken
