"""--fetch DIR: a pristine release from the package index, installed without dependencies."""

from __future__ import annotations

import pytest

from testing.cli import run
from testing.releases import HOME, MODEL_CONFIG, pristine

pytestmark = pytest.mark.integration


def test_fetch_installs_and_patches(tmp_path, monkeypatch):
    pristine("0.5.17")  # fills the tests' wheel cache once
    monkeypatch.setenv("PATCHKIT_HOME", str(HOME))
    dest = tmp_path / "build" / "sglang-0.5.17"
    result = run("apply", "--target", "0.5.17", "--fetch", dest)
    assert result.exit_code == 0, result.stderr
    assert (dest / "sglang-0.5.17.dist-info").is_dir()
    assert b'"mtp_num_hidden_layers"' in (dest / MODEL_CONFIG).read_bytes()
    again = run("apply", "--target", "0.5.17", "--fetch", dest)
    assert again.exit_code == 0 and "nothing to do" in again.stdout


def test_fetch_into_folder_with_another_version(tmp_path, monkeypatch, release):
    site = release("0.5.19")
    result = run("apply", "--target", "0.5.17", "--fetch", site)
    assert result.exit_code == 3 and "--target 0.5.17 but SGLang 0.5.19" in result.stderr


def test_a_dry_run_fetch_installs_nothing_and_says_so(tmp_path, monkeypatch):
    cached = pristine("0.5.17")
    monkeypatch.setenv("PATCHKIT_HOME", str(HOME))
    dest = tmp_path / "build" / "sglang-0.5.17"
    result = run("apply", "--dry-run", "--target", "0.5.17", "--fetch", dest, "--json")
    assert result.exit_code == 0, result.stderr
    assert not dest.exists()  # was 93 MB installed there, with "nothing written"
    assert f"nothing was installed into {dest}" in result.stderr
    data = result.json()
    assert data["dry_run"] and data["changed"] and f"+++ b/{MODEL_CONFIG}" in data["diff"]
    assert not (cached / ".patchkit").exists()
