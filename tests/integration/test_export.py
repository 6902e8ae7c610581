"""`patchkit export`: every patch pending on a real release, as a format-patch file, is taken by
`git apply` and by `git am` on a checkout made from that release's files, and the result is
byte for byte what `patchkit apply` writes on the installed release."""

from __future__ import annotations

import pytest

from testing.checkout import checkout, git, package_bytes, wheel_home
from testing.cli import run
from testing.diffs import git_diff, fails_only_beside_the_built_in
from testing.releases import pristine, snapshot

pytestmark = pytest.mark.integration

VERSION = "0.5.17"
OFFLOADER = "sglang/srt/utils/offloader.py"


@pytest.fixture
def home(tmp_path, monkeypatch):
    monkeypatch.setenv("PATCHKIT_HOME", str(wheel_home(tmp_path / "home", (VERSION, "0.5.19", "0.5.20", "0.5.21"))))


def test_exports_apply_on_a_checkout_as_patchkit_applies(home, release, tmp_path):
    site = release(VERSION)
    repo, mailed = checkout(site, tmp_path / "apply"), checkout(site, tmp_path / "am")
    pending = [pid for pid, state in _states(site).items() if state == "pending"]
    assert len(pending) >= 5, pending
    exports = []
    for pid in pending:
        path = tmp_path / f"{pid}.patch"
        result = run("export", pid, "--release", VERSION, "-o", path, "--json")
        assert result.exit_code == 0, result.stderr
        report = result.json()
        assert report["id"] == pid and report["path"] == str(path) and report["files"]
        assert all(item["file"].startswith("python/sglang/") for item in report["files"])
        text = path.read_text()
        assert f"\nPatchkit-Id: {pid}\n" in text and "\nSubject: [PATCH] " in text
        assert "\nindex " in text and " 100644\n" in text
        checked = git(repo, "apply", "--check", path, check=False)
        assert checked.returncode == 0, (pid, checked.stderr)
        git(repo, "apply", path)
        exports.append(path)
    git(mailed, "am", "-q", *exports)
    assert git(mailed, "log", "--format=%s").stdout.count("\n") == len(pending) + 1

    applied = run("apply", "--site-packages", site)
    assert applied.exit_code == 0, applied.stderr
    patched = package_bytes(site)
    assert package_bytes(repo / "python") == patched
    assert package_bytes(mailed / "python") == patched
    # Each export loads back as a diff patch with the same id: beside the built-in set, a clash.
    clash = run("--patches", exports[0], "list")
    assert clash.exit_code == 2 and f"patch id {pending[0]!r} is defined twice" in clash.stderr, clash.stderr


def test_a_diff_patch_exports_and_its_export_loads_back(home, release, tmp_path):
    """upstream's 0.5.20 -> 0.5.21 change of offloader.py as a diff patch, exported against 0.5.19."""
    before, after = ((pristine(v) / OFFLOADER).read_bytes() for v in ("0.5.20", "0.5.21"))
    diff = tmp_path / "offload-tied.diff"
    diff.write_bytes(git_diff({OFFLOADER: before}, {OFFLOADER: after}, header="Patchkit-Id: offload-tied\n\n"))
    exported = tmp_path / "out" / "0001-offload-tied.patch"
    exported.parent.mkdir()
    result = run("--patches", diff, "export", "offload-tied", "--release", "0.5.19", "-o", exported)
    assert result.exit_code == 0, result.stderr
    site = release("0.5.19")
    repo = checkout(site, tmp_path / "repo")
    checked = git(repo, "apply", "--check", exported, check=False)
    assert checked.returncode == 0, checked.stderr
    git(repo, "apply", exported)
    loaded = {p["id"]: p for p in run("--patches", exported, "status", "--site-packages", site, "--json").json()["patches"]}
    assert fails_only_beside_the_built_in(loaded["offload-tied"]), loaded["offload-tied"]
    assert run("--patches", exported, "apply", "--only", "offload-tied", "--site-packages", site).exit_code == 0
    assert package_bytes(site)[OFFLOADER] == package_bytes(repo / "python")[OFFLOADER]


def test_export_to_stdout_matches_the_file(home, tmp_path):
    path = tmp_path / "fix.patch"
    assert run("export", "cpu-offload-tied-params", "--release", VERSION, "-o", path).exit_code == 0
    printed = run("export", "cpu-offload-tied-params", "--release", VERSION)
    assert printed.exit_code == 0, printed.stderr
    # The same file but for the Date: line (the time of the export).
    strip = lambda text: [line for line in text.splitlines() if not line.startswith("Date: ")]  # noqa: E731
    assert strip(printed.stdout) == strip(path.read_text())


def test_a_patch_with_nothing_to_do_there_is_exit_1_and_nothing_written(home, tmp_path):
    before = snapshot(tmp_path)
    result = run("export", "cpu-offload-tied-params", "--release", "0.5.21", "-o", tmp_path / "fix.patch")
    assert result.exit_code == 1, result.stderr
    assert "is upstream-fixed on SGLang 0.5.21" in result.stderr
    assert snapshot(tmp_path) == before


def _states(site) -> dict[str, str]:
    result = run("status", "--site-packages", site, "--json")
    assert result.exit_code == 0, result.stderr
    return {p["id"]: p["state"] for p in result.json()["patches"]}
