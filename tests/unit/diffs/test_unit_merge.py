"""patchkit.diffs.unit_merge on synthetic files (the real-release cases are in
tests/integration/test_diff_patches.py): transplanted, merged, moved, upstream, conflict."""

from __future__ import annotations

from patchkit.diffs import unidiff, unit_merge
from testing.diffs import git_diff

REL = "sglang/srt/m.py"
BASE = b'''import os


def f():
    return 1


def g():
    return 2


class A:
    def m(self):
        return 3
'''
# the diff: f, g and A.m changed, a function h added after g
PATCHED = (BASE.replace(b"return 1", b"return 10").replace(b"return 2", b"return 20")
           .replace(b"return 3", b"return 30").replace(b"\n\nclass A", b"\n\ndef h():\n    return 4\n\n\nclass A"))


def resolve(target: bytes, markers: bool = False) -> unit_merge.FileResolution:
    diff = unidiff.parse(git_diff({REL: BASE}, {REL: PATCHED}), "d.patch")
    return unit_merge.resolve(diff, lambda rel: target, markers=markers, pre_image=lambda f: BASE).files[0]


def outcomes(found: unit_merge.FileResolution) -> dict[str, str]:
    return {u.unit: u.outcome for u in found.units}


def test_each_unit_by_name_wherever_its_lines_are():
    # upstream: one more import (every line shifts), a comment over f, g already has the change,
    # A.m moved under a class B
    target = (b"import os\nimport sys\n\n\n# a comment\ndef f():\n    return 1\n\n\ndef g():\n    return 20\n\n\n"
              b"class B:\n    def m(self):\n        return 3\n")
    found = resolve(target)
    assert found.how == unit_merge.PER_UNIT
    assert outcomes(found) == {"f": "merged", "g": "upstream", "h": "transplanted", "B.m": "moved"}
    assert found.after == (b"import os\nimport sys\n\n\n# a comment\ndef f():\n    return 10\n\n\ndef g():\n"
                           b"    return 20\n\n\ndef h():\n    return 4\n\n\nclass B:\n    def m(self):\n        return 30\n")
    assert any("A.m is B.m" in note for note in found.notes)


def test_a_conflict_names_the_unit_and_markers_only_when_asked():
    target = BASE.replace(b"return 1", b"return 5") + b"\n\nx = 1\n"
    found = resolve(target)
    assert [u.unit for u in found.conflicts] == ["f"] and b"<<<<<<<" not in (found.after or b"")
    marked = resolve(target, markers=True).after or b""
    assert b"<<<<<<< release\n    return 5\n=======\n    return 10\n>>>>>>> patch\n" in marked


def test_a_file_that_is_not_python_has_no_units_a_misfit_is_a_conflict():
    doc = "sglang/README.md"
    diff = unidiff.parse(git_diff({doc: b"# A\n\nline\n"}, {doc: b"# A\n\nline 2\n"}), "d.patch")
    found = unit_merge.resolve(diff, lambda rel: b"# B\n\nother\n", pre_image=lambda f: b"# A\n\nline\n").files[0]
    assert [(u.unit, u.outcome) for u in found.conflicts] == [("<file>", "conflict")]
    assert unit_merge.resolve(diff, lambda rel: b"# A\n\nline\n").files[0].after == b"# A\n\nline 2\n"


def test_a_unit_not_found_is_its_own_block_where_it_was_never_dropped():
    """A changed unit the release does not have (a class upstream removed) is a conflict, and with
    markers (rebase) a block carrying its change, after the unit it followed; without markers
    (status, apply) nothing is written."""
    target = BASE.replace(b"def g():\n    return 2\n\n\n", b"")
    assert b"def g" not in target
    quiet = resolve(target)
    assert [(u.unit, u.outcome) for u in quiet.conflicts] == [("g", "conflict")]
    marked = resolve(target, markers=True).after or b""
    start = marked.index(f"<<<<<<< release: {REL}:g not in the file (removed or renamed)\n=======\n".encode())
    end = marked.index(b">>>>>>> patch: the diff's change to g; make it where that code is now, or delete the block\n")
    block = marked[start:end]
    assert b" def g():\n-    return 2\n+    return 20\n" in block and block.count(b"\n@@ ") == 1
    assert marked.index(b"def f():") < marked.index(block) < marked.index(b"def h():")


def test_a_unit_gone_from_its_file_is_followed_only_to_exactly_one_other_file():
    other, third = "sglang/srt/other.py", "sglang/srt/third.py"
    without_f = BASE.replace(b"def f():\n    return 1\n\n\n", b"")
    moved_f = b"def f():\n    return 1\n"
    files = {REL: without_f, other: moved_f, third: b"x = 1\n"}
    diff = unidiff.parse(git_diff({REL: BASE}, {REL: PATCHED}), "d.patch")

    def run(files: dict[str, bytes], follow: bool) -> unit_merge.Resolution | unit_merge.FileResolution:
        if follow:
            return unit_merge.resolve(diff, files.get, pre_image=lambda f: BASE, python_files=lambda: sorted(files))
        return unit_merge.resolve_file(diff.files[0], files[REL], lambda: BASE, elsewhere=unit_merge.finder(lambda: sorted(files), files.get))

    judged = run(files, follow=False)
    assert isinstance(judged, unit_merge.FileResolution)
    assert [(u.unit, u.detail) for u in judged.conflicts] == [("f", f"moved to {other}:f; rebase with patchkit rebase")]
    assert f"moved: {REL}:f -> {other}:f" in judged.notes
    followed = run(files, follow=True)
    assert isinstance(followed, unit_merge.Resolution) and not followed.conflicts
    assert {f.rel: f.after for f in followed.files}[other] == b"def f():\n    return 10\n"
    # Two other files hold an f: which one is meant is not known, a conflict as before.
    two = run({**files, third: moved_f}, follow=False)
    assert isinstance(two, unit_merge.FileResolution)
    assert [u.detail for u in two.conflicts] == ["not in the file (removed or renamed); looked for by name in the "
                                                 "package's other Python files too"]
