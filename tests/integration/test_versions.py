"""Version strings as people and builds spell them: `v0.5.14`, `0.5.14.0`, a local build
`0.5.14+cu130`, a post release without a manifest, and what is not a version."""

from __future__ import annotations

import stat
import shutil

import pytest

from testing.cli import run, states
from testing.releases import snapshot, tree_bytes

pytestmark = pytest.mark.integration

VERSION = "0.5.14"


def relabel(site, version: str) -> None:
    """Make the installed metadata say `version` (as a local or post build of the same code would)."""
    info = site / f"sglang-{VERSION}.dist-info"
    meta = (info / "METADATA").read_text().replace(f"Version: {VERSION}", f"Version: {version}")
    (info / "METADATA").unlink()
    (info / "METADATA").write_text(meta)
    shutil.move(info, site / f"sglang-{version}.dist-info")


@pytest.mark.parametrize("spelling", [f"v{VERSION}", f"{VERSION}.0", f" {VERSION}"])
def test_target_spellings_of_the_same_release(release, spelling):
    site = release(VERSION)
    result = run("status", "--site-packages", site, "--target", spelling, "--json")
    assert result.exit_code == 0, result.stderr
    assert result.json()["sglang"]["version"] == VERSION


@pytest.mark.parametrize("command", ["apply", "status", "revert", "diff"])
def test_not_a_version_is_a_usage_error(release, command):
    site = release(VERSION)
    before = snapshot(site)
    result = run(command, "--site-packages", site, "--target", "banana")
    assert result.exit_code == 2, (result.stdout, result.stderr)
    assert result.stderr.strip().splitlines() == ["error: --target: 'banana' is not a version (expected something like 0.5.17)"]
    assert snapshot(site) == before


def test_fetch_checks_the_version_before_downloading(tmp_path, patchkit_home):
    bad = run("apply", "--target", "banana", "--fetch", tmp_path / "x")
    assert bad.exit_code == 2 and "not a version" in bad.stderr
    unknown = run("apply", "--target", "0.1.0", "--fetch", tmp_path / "y")
    assert unknown.exit_code == 3, unknown.stderr
    assert "patchkit knows nothing about SGLang 0.1.0" in unknown.stderr and "nothing downloaded" in unknown.stderr
    assert not (tmp_path / "x").exists() and not (tmp_path / "y").exists()
    assert not (patchkit_home / "wheels").exists()


def test_local_build_uses_its_release_manifest_and_fast_path(release):
    from tests.integration.test_transaction import imports_libcst

    site = release(VERSION)
    relabel(site, f"{VERSION}+cu130")
    pristine = tree_bytes(site / "sglang")
    result = run("status", "--site-packages", site, "--target", VERSION, "--json")
    assert result.exit_code == 0, result.stderr
    assert result.json()["sglang"]["version"] == f"{VERSION}+cu130"
    assert "pending" in {p["state"] for p in result.json()["patches"]}
    assert imports_libcst("status", "--site-packages", site) is False  # the manifest's hashes decide
    assert run("apply", "--site-packages", site, "--target", f"v{VERSION}").exit_code == 0
    assert imports_libcst("status", "--site-packages", site) is False
    wrong = run("status", "--site-packages", site, "--target", f"{VERSION}+cu128")
    assert wrong.exit_code == 3 and f"SGLang {VERSION}+cu130 is installed" in wrong.stderr
    assert run("revert", "--site-packages", site).exit_code == 0
    assert tree_bytes(site / "sglang") == pristine


@pytest.mark.parametrize("label", [f"{VERSION}.post1", "0.4.0"])
def test_release_without_manifest_is_judged_by_probes(release, label):
    site = release(VERSION, whole=True)  # verify imports the patched modules
    relabel(site, label)
    pristine = tree_bytes(site / "sglang")
    status = run("status", "--site-packages", site, "--json")
    assert status.exit_code == 0, status.stderr
    assert any(f"SGLang {label} was not verified by patchkit" in w for w in status.json()["warnings"])
    assert "pending" in {p["state"] for p in status.json()["patches"]}
    applied = run("apply", "--site-packages", site)
    assert applied.exit_code == 0, applied.stderr
    assert f"warning: SGLang {label} was not verified by patchkit" in applied.stderr
    assert "pending" not in states(site).values()
    assert run("verify", "--site-packages", site).exit_code == 0
    assert run("revert", "--site-packages", site).exit_code == 0
    assert tree_bytes(site / "sglang") == pristine


# A version names a cached wheel, a cached release folder, a manifest file and a pip request:
# each is found as a version, never as the string typed (`0.5.17.0` keeps its `.0` in
# packaging's normal form; the wheel is sglang-0.5.17-...).
SPELLED = "0.5.17"


@pytest.fixture
def cached_home(monkeypatch):
    from testing.releases import HOME, pristine

    pristine(SPELLED)  # fills the tests' wheel and release caches once
    monkeypatch.setenv("PATCHKIT_HOME", str(HOME))
    return HOME


def test_fetch_finds_the_cached_wheel_of_another_spelling(cached_home, tmp_path):
    from testing.releases import MODEL_CONFIG

    dest = tmp_path / "fetched"
    result = run("apply", "--target", f"{SPELLED}.0", "--fetch", dest)
    assert result.exit_code == 0, result.stderr
    assert b'"mtp_num_hidden_layers"' in (dest / MODEL_CONFIG).read_bytes()


def test_manifest_update_writes_the_release_spelling(cached_home, tmp_path):
    from patchkit.releases.manifest import checkout_folder

    result = run("manifest", "update", f"v{SPELLED}", f"{SPELLED}.0", "--out", tmp_path, "--json")
    assert result.exit_code == 0, result.stderr
    assert [row["path"] for row in result.json()["manifests"]] == [str(tmp_path / f"{SPELLED}.json")] * 2
    assert [p.name for p in tmp_path.iterdir()] == [f"{SPELLED}.json"]
    assert (tmp_path / f"{SPELLED}.json").read_bytes() == (checkout_folder() / f"{SPELLED}.json").read_bytes()
    assert stat.S_IMODE((tmp_path / f"{SPELLED}.json").stat().st_mode) == 0o644  # readable as the checkout's are


def test_track_and_doctor_take_any_spelling(cached_home, tmp_path):
    from testing.doctor import model_folder

    releases_before = sorted(p.name for p in (cached_home / "releases").iterdir())
    tracked = run("track", "--from", f"{SPELLED}.0", "--to", f"v{SPELLED}", "--json")
    assert tracked.exit_code == 0, tracked.stderr
    assert (tracked.json()["from"], tracked.json()["to"]) == (SPELLED, SPELLED)
    model = model_folder(tmp_path / "model")
    doctor = run("doctor", "--version", f"{SPELLED}.0", "--gpus", "1", "--gpu-memory", "80", "--gpu-free", "79",
                 "--sm", "9.0", "--json", "--", "--model-path", model)
    assert doctor.exit_code in (0, 1), doctor.stdout + doctor.stderr
    assert doctor.json()["sglang"]["version"] == SPELLED
    assert sorted(p.name for p in (cached_home / "releases").iterdir()) == releases_before  # no 0.5.17.0 copy
