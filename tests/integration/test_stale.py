"""Stale and orphaned state: `.patchkit/` of a release that pip upgraded or uninstalled."""

from __future__ import annotations

import shutil
import subprocess
import sys

import pytest

from testing.cli import run
from testing.releases import MODEL_CONFIG, snapshot, tree_bytes
from testing.releases import pristine as pristine_release

pytestmark = pytest.mark.integration


def pip_upgrade(site, version: str) -> None:
    """`pip install --upgrade` of another release into the folder, as a user would (no deps)."""
    wheel = next((pristine_release(version).parent.parent / "wheels").glob(f"sglang-{version}-*.whl"))
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-compile", "--upgrade",
                    "--disable-pip-version-check", "--target", str(site), str(wheel)], check=True, capture_output=True)


def uninstall(site) -> None:
    """What `pip uninstall sglang` removes: the files its RECORD lists, i.e. the package and its metadata."""
    shutil.rmtree(site / "sglang")
    for info in site.glob("sglang-*.dist-info"):
        shutil.rmtree(info)


def test_upgraded_release_state_is_discarded(release):
    site = release("0.5.14")
    assert run("apply", "--site-packages", site).exit_code == 0
    pip_upgrade(site, "0.5.17")
    upgraded = tree_bytes(site / "sglang")

    status = run("status", "--site-packages", site, "--json")
    assert status.exit_code == 0, status.stderr
    assert status.json()["sglang"]["version"] == "0.5.17"
    assert any("stale state" in w and "SGLang 0.5.14" in w for w in status.json()["warnings"])
    assert "pending" in {p["state"] for p in status.json()["patches"]}

    diff = run("diff", "--site-packages", site)
    assert diff.exit_code == 0 and diff.stdout == "" and "stale state" in diff.stderr

    applied = run("apply", "--site-packages", site)
    assert applied.exit_code == 0, applied.stderr
    assert "discarded the stale record of SGLang 0.5.14" in applied.stderr
    state = (site / ".patchkit/state.json").read_text()
    assert '"sglang_version": "0.5.17"' in state
    backups = {p.relative_to(site / ".patchkit/backups").as_posix()
               for p in (site / ".patchkit/backups").rglob("*") if p.is_file()}
    assert all(f'"{rel}"' in state for rel in backups)  # no 0.5.14 backup left behind
    assert run("revert", "--site-packages", site).exit_code == 0
    assert tree_bytes(site / "sglang") == upgraded
    assert not (site / ".patchkit").exists()


def test_stale_record_with_patchkit_bytes_still_in_place_is_refused(release):
    site = release("0.5.14")
    assert run("apply", "--site-packages", site).exit_code == 0
    info = site / "sglang-0.5.14.dist-info"
    meta = (info / "METADATA").read_text().replace("Version: 0.5.14", "Version: 0.5.15")
    (info / "METADATA").unlink()
    (info / "METADATA").write_text(meta)
    before = snapshot(site)
    for command in ("apply", "revert", "clean"):
        result = run(command, "--site-packages", site)
        assert result.exit_code == 4, (command, result.stderr)
        assert "still holds what patchkit wrote for SGLang 0.5.14" in result.stderr
    assert snapshot(site) == before


def test_uninstalled_release_leaves_state_that_clean_removes(release):
    site = release("0.5.14")
    assert run("apply", "--site-packages", site).exit_code == 0
    uninstall(site)
    status = run("status", "--site-packages", site)
    assert status.exit_code == 3
    assert f"{site / '.patchkit'} (left by SGLang 0.5.14)" in status.stderr
    assert f"`patchkit clean --site-packages {site}`" in status.stderr
    cleaned = run("clean", "--site-packages", site, "--json")
    assert cleaned.exit_code == 0, cleaned.stderr
    assert cleaned.json() == {"removed": [f"{site / '.patchkit'} (left by SGLang 0.5.14)"]}
    assert not (site / ".patchkit").exists()
    again = run("clean", "--site-packages", site)
    assert again.exit_code == 0 and again.stdout == "nothing to clean\n"


def test_revert_removes_an_orphaned_state_too(release):
    site = release("0.5.14")
    assert run("apply", "--site-packages", site).exit_code == 0
    uninstall(site)
    result = run("revert", "--site-packages", site)
    assert result.exit_code == 0, result.stderr
    assert not (site / ".patchkit").exists()


def test_clean_refuses_live_patches(release):
    site = release("0.5.14")
    assert run("apply", "--site-packages", site).exit_code == 0
    before = snapshot(site)
    result = run("clean", "--site-packages", site)
    assert result.exit_code == 1 and "are live, not stale; `patchkit revert`" in result.stderr
    assert snapshot(site) == before
    assert (site / MODEL_CONFIG).exists()
