from __future__ import annotations

import subprocess

import pytest

from testing.cli import fully_applied, run, states
from testing.releases import MODEL_CONFIG, pristine, snapshot

pytestmark = pytest.mark.integration


@pytest.fixture
def drifted(release):
    site = release("0.5.17")
    assert run("apply", "--site-packages", site).exit_code == 0
    with open(site / MODEL_CONFIG, "a") as handle:
        handle.write("# a local edit\n")
    return site


def test_status_says_drifted(drifted):
    patch = next(p for p in run("status", "--site-packages", drifted, "--json").json()["patches"] if p["id"] == "mtp-layer-detection")
    assert patch["state"] == "drifted"
    assert MODEL_CONFIG in patch["detail"]


@pytest.mark.parametrize("command", ["apply", "revert"])
def test_refused_without_force(drifted, command):
    before = snapshot(drifted)
    result = run(command, "--site-packages", drifted)
    assert result.exit_code == 4
    assert "changed outside patchkit" in result.stderr and "--force" in result.stderr
    assert snapshot(drifted) == before


def test_revert_force_restores_pristine(drifted):
    edited = (drifted / MODEL_CONFIG).read_bytes()
    result = run("revert", "--site-packages", drifted, "--force")
    assert result.exit_code == 0
    assert (drifted / MODEL_CONFIG).read_bytes() == (pristine("0.5.17") / MODEL_CONFIG).read_bytes()
    # The overwritten edit is named and kept (only that is left under .patchkit/) until the next full revert.
    [kept] = [p for p in (drifted / ".patchkit").rglob("*") if p.is_file()]
    assert MODEL_CONFIG in result.stdout and str(kept.relative_to(drifted)) in result.stdout
    assert kept.read_bytes() == edited and kept.relative_to(drifted).parts[:2] == (".patchkit", "overwritten")
    assert run("revert", "--site-packages", drifted).exit_code == 0
    assert not (drifted / ".patchkit").exists()


def test_apply_force_reapplies_on_pristine(drifted):
    assert run("apply", "--site-packages", drifted, "--force").exit_code == 0
    text = (drifted / MODEL_CONFIG).read_text()
    assert "# a local edit" not in text and '"mtp_num_hidden_layers"' in text
    assert states(drifted) == fully_applied("0.5.17")


def test_two_force_runs_in_one_second_keep_both_copies(drifted, monkeypatch):
    # Both runs see the same UTC second: the second one's folder must not replace the first one's.
    import time

    from patchkit.store import transaction

    frozen = time.gmtime()
    monkeypatch.setattr(transaction.time, "gmtime", lambda *_: frozen)
    first = (drifted / MODEL_CONFIG).read_bytes()
    assert run("apply", "--site-packages", drifted, "--force").exit_code == 0
    with open(drifted / MODEL_CONFIG, "a") as handle:
        handle.write("# another local edit\n")
    second = (drifted / MODEL_CONFIG).read_bytes()
    assert run("apply", "--site-packages", drifted, "--force").exit_code == 0
    kept = sorted((drifted / ".patchkit" / "overwritten").glob(f"*/{MODEL_CONFIG}"))
    assert [path.read_bytes() for path in kept] == [first, second]
    assert len({path.relative_to(drifted).parts[2] for path in kept}) == 2


def test_a_full_force_revert_in_a_checkout_keeps_the_copy_out_of_git_status(release):
    site = release("0.5.17")
    git = ["git", "-C", str(site), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run([*git, "init", "-q"], check=True)
    subprocess.run([*git, "add", "-A"], check=True)
    subprocess.run([*git, "commit", "-q", "-m", "release"], check=True)
    assert run("apply", "--source", site).exit_code == 0
    with open(site / MODEL_CONFIG, "a") as handle:
        handle.write("# a local edit\n")
    result = run("revert", "--source", site, "--force")
    assert result.exit_code == 0, result.stderr
    [kept] = (site / ".patchkit" / "overwritten").glob(f"*/{MODEL_CONFIG}")
    assert f"kept in {kept}" in result.stdout  # where it is, as a path that works from anywhere
    status = subprocess.run([*git, "status", "--porcelain", "--untracked-files=all"], capture_output=True, text=True,
                            check=True)
    assert status.stdout == ""
