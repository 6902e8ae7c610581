"""Diff patches on real releases: diffs made by real git from real upstream code (never a
committed third-party file), applied, judged and reverted by the same engine as the built-in
patches, and held to what real `git apply` writes."""

from __future__ import annotations

import pytest

from testing.cli import run
from testing.diffs import git_apply, git_diff
from testing.releases import pristine, snapshot

pytestmark = pytest.mark.integration

OFFLOADER = "sglang/srt/utils/offloader.py"
ID = "offloader-tied"


def offloader_diff(header: str = "") -> bytes:
    """Upstream's own change to offloader.py from 0.5.20 to 0.5.21 (the tied-parameters fix), made against 0.5.20."""
    return git_diff({OFFLOADER: (pristine("0.5.20") / OFFLOADER).read_bytes()},
                    {OFFLOADER: (pristine("0.5.21") / OFFLOADER).read_bytes()}, header=header)


@pytest.fixture
def offloader_patch(tmp_path):
    path = tmp_path / "patches" / f"0001-{ID}.patch"
    path.parent.mkdir()
    path.write_bytes(offloader_diff("Subject: [PATCH] Offloader: keep tied parameters\n\nPatchkit-Upstream: sglang 0.5.21\n---\n"))
    return path


def test_on_the_release_it_was_made_for_apply_writes_what_git_apply_writes(release, offloader_patch):
    site = release("0.5.20", extra=(OFFLOADER,))
    before = (site / OFFLOADER).read_bytes()
    code, expected, err = git_apply({OFFLOADER: before}, offloader_patch.read_bytes())
    assert code == 0, err
    untouched = {k: v for k, v in snapshot(site).items() if k != OFFLOADER}
    listed = run("--patches", offloader_patch, "list", "--json").json()["patches"]
    row = next(p for p in listed if p["id"] == ID)
    assert row["title"] == "Offloader: keep tied parameters" and row["targets"] == [OFFLOADER]
    assert row["origin"] == f"file {offloader_patch}"
    listed_states = {p["id"]: p["state"] for p in run("--patches", offloader_patch, "status", "--site-packages", site,
                                                       "--json").json()["patches"]}
    assert listed_states[ID] == "pending"
    result = run("--patches", offloader_patch, "apply", "--site-packages", site, "--only", ID)
    assert result.exit_code == 0, result.stderr
    assert (site / OFFLOADER).read_bytes() == expected[OFFLOADER] == (pristine("0.5.21") / OFFLOADER).read_bytes()
    assert {k: v for k, v in snapshot(site).items() if k != OFFLOADER and not k.startswith(".patchkit")} == untouched
    listed_states = {p["id"]: p["state"] for p in run("--patches", offloader_patch, "status", "--site-packages", site,
                                                       "--json").json()["patches"]}
    assert listed_states[ID] == "applied"
    # The diff file changed: the tree was patched by an older version of it.
    offloader_patch.write_bytes(offloader_patch.read_bytes() + b"-- \n2.39.5\n")
    listed_states = {p["id"]: p["state"] for p in run("--patches", offloader_patch, "status", "--site-packages", site,
                                                       "--json").json()["patches"]}
    assert listed_states[ID] == "outdated"
    result = run("--patches", offloader_patch, "revert", "--site-packages", site)
    assert result.exit_code == 0, result.stderr
    assert (site / OFFLOADER).read_bytes() == before
    assert not (site / ".patchkit").exists() or not any((site / ".patchkit").iterdir())


def test_a_folder_of_diffs_loads_beside_modules_and_a_bad_id_exits_2(tmp_path, release):
    folder = tmp_path / "set"
    folder.mkdir()
    (folder / "fixA.patch").write_bytes(offloader_diff())
    site = release("0.5.20", extra=(OFFLOADER,))
    before = snapshot(site)
    result = run("--patches", folder, "apply", "--site-packages", site)
    assert result.exit_code == 2
    assert "fixA.patch" in result.stderr and "'fixA'" in result.stderr
    assert snapshot(site) == before
    (folder / "fixA.patch").rename(folder / "0003-fix-a.diff")
    listed = run("--patches", folder, "list", "--json").json()["patches"]
    assert "fix-a" in {p["id"] for p in listed}
    assert run("--patches", folder / "nope.py", "list").exit_code == 2
