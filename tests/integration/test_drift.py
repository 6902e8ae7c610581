from __future__ import annotations

import pytest

from testing.cli import run, states
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
    assert set(states(drifted).values()) == {"applied"}
