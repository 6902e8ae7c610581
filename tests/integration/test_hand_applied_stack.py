"""A stack of diffs applied by hand (`git apply`, in order) on a pristine release whose dist-info
RECORD is there reads as applied by hand, as one diff applied that way does (issue 40 item 4): the
upper diff's files are the lower one's post-image, so undoing the stack, top first, gives the
RECORD's bytes; `revert` goes back to them."""

from __future__ import annotations

import shutil

import pytest

from patchkit.base.constants import EXIT_DRIFT
from testing.checkout import checkout, git, wheel_home
from testing.cli import run
from testing.field_diffs import field_diff, stacked_diff
from testing.releases import pristine

pytestmark = [pytest.mark.integration, pytest.mark.slow]  # a whole release (0.5.15.post1 has no manifest): 40 s

LOWER, UPPER = "v0-5-15-post1-sglang", "v0-5-15-post1-sglang-extra"


def test_a_git_applied_stack_reads_applied_by_hand_and_reverts_to_the_record(tmp_path, monkeypatch, release):
    monkeypatch.setenv("PATCHKIT_HOME", str(wheel_home(tmp_path / "home", ("0.5.15.post1",))))
    lower, upper = field_diff("0.5.15.post1"), stacked_diff("0.5.15.post1")
    folder = tmp_path / "set"
    folder.mkdir()
    paths = [lower.write(folder), upper.write(folder)]
    files = sorted(set(lower.after) | set(upper.after))
    site = release("0.5.15.post1", whole=True)  # no manifest of its own: the whole release
    repo = checkout(site, tmp_path / "repo")
    for path in paths:  # as the field applies its stack: git apply, lower first
        git(repo, "apply", path)
    for rel in files:
        shutil.copyfile(repo / "python" / rel, site / rel)
    assert {rel: (site / rel).read_bytes() for rel in upper.after} == upper.after

    rows = {p["id"]: p for p in run("--patches", folder, "status", "--site-packages", site, "--json").json()["patches"]}
    for pid in (LOWER, UPPER):
        assert rows[pid]["state"] == "applied" and "applied by hand" in rows[pid]["detail"], rows
    # The lower one alone would take the upper's change with it: refused, nothing written.
    half = run("--patches", folder, "revert", "--site-packages", site, "--only", LOWER)
    assert half.exit_code == EXIT_DRIFT and f"applied by hand as a stack; reverting {LOWER} alone" in half.stderr, half.stderr
    assert {rel: (site / rel).read_bytes() for rel in upper.after} == upper.after
    reverted = run("--patches", folder, "revert", "--site-packages", site)
    assert reverted.exit_code == 0, reverted.stderr
    differ = [rel for rel in files if (site / rel).read_bytes() != (pristine("0.5.15.post1") / rel).read_bytes()]
    assert not differ, differ
    rows = {p["id"]: p for p in run("--patches", folder, "status", "--site-packages", site, "--json").json()["patches"]}
    assert {rows[pid]["state"] for pid in (LOWER, UPPER)} == {"pending"}, rows
