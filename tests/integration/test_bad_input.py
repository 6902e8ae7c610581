"""Every bad input: one clear line, its exit code, and no change on disk."""

from __future__ import annotations

import os

import pytest

from patchkit.releases import manifest
from patchkit.base.errors import TargetError
from testing.cli import run
from testing.releases import MODEL_CONFIG, snapshot

pytestmark = pytest.mark.integration


def assert_refused(result, code: int, message: str) -> None:
    assert result.exit_code == code, (result.stdout, result.stderr)
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    assert message in lines[0]


def test_sglang_missing(tmp_path):
    assert_refused(run("apply", "--site-packages", tmp_path), 3, "no SGLang in")
    assert list(tmp_path.iterdir()) == []


def test_site_packages_not_a_folder(tmp_path):
    assert_refused(run("status", "--site-packages", tmp_path / "nope"), 3, "is not a folder")


def test_wrong_target_version(release):
    site = release("0.5.17")
    before = snapshot(site)
    assert_refused(run("apply", "--target", "0.5.19", "--site-packages", site), 3, "--target 0.5.19 but SGLang 0.5.17")
    assert snapshot(site) == before


def test_corrupt_state_file(release):
    site = release("0.5.17")
    run("apply", "--site-packages", site)
    (site / ".patchkit/state.json").write_text("{not json")
    before = snapshot(site)
    for command in ("apply", "revert", "status"):
        assert_refused(run(command, "--site-packages", site), 1, "state.json is corrupt")
    assert snapshot(site) == before


def test_state_file_with_wrong_shape(release):
    site = release("0.5.17")
    run("apply", "--site-packages", site)
    (site / ".patchkit/state.json").write_text('{"schema": 1, "patches": []}')
    before = snapshot(site)
    assert_refused(run("revert", "--site-packages", site), 1, "is corrupt")
    assert snapshot(site) == before


def test_unreadable_state_file(release):
    site = release("0.5.17")
    (site / ".patchkit/state.json").mkdir(parents=True)  # root reads any file: a folder is unreadable
    before = snapshot(site)
    assert_refused(run("apply", "--site-packages", site), 6, "state.json: Is a directory (EISDIR)")
    assert snapshot(site) == before


def test_target_file_with_syntax_error(release):
    site = release("0.5.17")
    with open(site / MODEL_CONFIG, "a") as handle:
        handle.write("\ndef broken(:\n")
    before = snapshot(site)
    assert_refused(run("apply", "--site-packages", site), 1, f"{MODEL_CONFIG} has a syntax error")
    assert snapshot(site) == before


def test_symlink_pointing_out_of_the_package(release, tmp_path):
    site = release("0.5.17")
    outside = tmp_path / "elsewhere.py"
    outside.write_bytes((site / MODEL_CONFIG).read_bytes())
    (site / MODEL_CONFIG).unlink()
    os.symlink(outside, site / MODEL_CONFIG)
    before, outside_bytes = snapshot(site), outside.read_bytes()
    assert_refused(run("apply", "--site-packages", site), 3, "symlink that points out of")
    assert snapshot(site) == before and outside.read_bytes() == outside_bytes


@pytest.mark.parametrize("path", ["../etc/passwd", "/etc/passwd", "sglang/../../x.py", "other/x.py"])
def test_manifest_path_escaping_the_package(path):
    raw = '{"schema": 1, "sglang": "0.5.17", "files": {"%s": "0"}, "patches": {}}' % path
    with pytest.raises(TargetError, match="escapes the sglang package folder"):
        manifest.parse(raw, "manifests/0.5.17.json")


def test_manifest_path_escaping_refused_by_the_cli(release, monkeypatch):
    site = release("0.5.17")
    bad = '{"schema": 1, "sglang": "0.5.17", "files": {"sglang/../../evil.py": "0"}, "patches": {}}'
    monkeypatch.setattr(manifest, "find", lambda version: manifest.parse(bad, "manifests/0.5.17.json"))
    before = snapshot(site)
    assert_refused(run("apply", "--site-packages", site), 3, "escapes the sglang package folder")
    assert snapshot(site) == before


def test_fetch_unknown_version_changes_nothing(tmp_path):
    dest = tmp_path / "sglang-x"
    assert_refused(run("apply", "--target", "0.0.999", "--fetch", dest), 3, "patchkit knows nothing about SGLang 0.0.999")
    assert not dest.exists()


def test_fetch_of_a_release_the_index_lacks_changes_nothing(tmp_path):
    dest = tmp_path / "sglang-x"  # 0.5.99 lies in the patches' ranges, so it is downloaded: and fails
    assert_refused(run("apply", "--target", "0.5.99", "--fetch", dest), 3, "cannot download SGLang 0.5.99")
    assert not dest.exists()


def test_fetch_invalid_version(tmp_path):
    assert_refused(run("apply", "--target", "not a version", "--fetch", tmp_path / "d"), 2, "is not a version")


def test_fetch_needs_target(tmp_path):
    assert_refused(run("apply", "--fetch", tmp_path / "d"), 2, "--fetch DIR needs --target")


def test_unexpected_error_names_the_log(release, monkeypatch, patchkit_home):
    from patchkit.engine import planning

    def boom(*args, **kwargs):
        raise RuntimeError("kaboom")

    monkeypatch.setattr(planning, "plan_apply", boom)
    site = release("0.5.17")
    result = run("apply", "--site-packages", site)
    assert result.exit_code == 70
    logs = list((patchkit_home / "logs").iterdir())
    assert len(logs) == 1 and "kaboom" in logs[0].read_text() and "Traceback" in logs[0].read_text()
    assert str(logs[0]) in result.stderr


def test_usage_error_exit_code():
    assert run("apply", "--no-such-flag").exit_code == 2


def test_a_backup_replaced_by_an_empty_folder_is_refused_and_kept(release):
    """It was deleted (by the cleanup of the run's recovery) while the message said nothing was written."""
    site = release("0.5.17")
    assert run("apply", "--site-packages", site).exit_code == 0
    backup = site / ".patchkit" / "backups" / MODEL_CONFIG
    backup.unlink()
    backup.mkdir()
    before = snapshot(site)
    for command in (("revert",), ("revert", "--force"), ("revert", "--only", "mtp-layer-detection"), ("diff",)):
        assert_refused(run(*command, "--site-packages", site), 6,
                       f"{backup}: a folder where the backup of {MODEL_CONFIG} should be (EISDIR); nothing was written")
        assert backup.is_dir() and snapshot(site) == before, command
