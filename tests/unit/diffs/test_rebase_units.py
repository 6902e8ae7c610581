"""The rebase of a diff on synthetic files (a unit test of the transform): a unit both sides
changed in the same lines is written with standard conflict markers and listed; git apply takes
the rebased diff on the target; the header and the prefix are kept."""

from __future__ import annotations

from patchkit.diffs import rebase, unidiff
from testing.diffs import git_apply, git_diff

REL = "sglang/mod.py"
BASE = b"import os\n\n\ndef keep():\n    return 1\n\n\ndef f(x):\n    y = x + 1\n    return y\n"
PATCHED = BASE.replace(b"def keep():\n    return 1\n", b"def keep():\n    return 2\n").replace(b"x + 1", b"x + 2")
TARGET = b"import os\nimport sys\n\n\ndef keep():\n    return 1\n\n\ndef f(x):\n    y = x + 10\n    return y\n"
HEADER = "Patchkit-Id: my-fix\nPatchkit-Upstream: sgl-project/sglang#1\n\n"


def test_a_conflicting_unit_is_written_with_markers():
    data = git_diff({REL: BASE}, {REL: PATCHED}, prefix="python/", header=HEADER)
    diff = unidiff.load(data, "my-fix.diff")
    made = rebase.rebase(diff, data, "9.9", {REL: TARGET}.get, base=lambda file: BASE)
    assert [(u.unit, u.outcome) for u in made.conflicts] == [("f", "conflict")]
    assert made.resolution.counts()["transplanted"] == 1  # keep(): left as it was here
    assert made.data.startswith(HEADER.encode()) and b"\n+++ b/python/sglang/mod.py\n" in made.data
    code, files, err = git_apply({"python/" + REL: TARGET}, made.data)
    assert code == 0, err
    result = files["python/" + REL]
    assert b"<<<<<<< release\n    y = x + 10\n=======\n    y = x + 2\n>>>>>>> patch\n" in result
    assert b"def keep():\n    return 2\n" in result and b"import sys\n" in result
