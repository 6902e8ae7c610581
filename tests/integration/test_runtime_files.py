"""The runtime report's files (patchkit/store/runtime_plugin.py) on real release files: written with the first
patch, recorded, removed byte-exactly with the last; a foreign file under their names is exit 4;
none on 0.5.10 (no plugin system); the SGLANG_PLUGINS and SGLANG_PATCHKIT_DISABLE notes."""

from __future__ import annotations

import json

import pytest

from patchkit.base.constants import RUNTIME_DIST_INFO, RUNTIME_MODULE
from testing.cli import run
from testing.releases import snapshot

pytestmark = pytest.mark.integration

PLUGINS = "sglang/srt/plugins/__init__.py"  # what tells patchkit the release has a plugin system
MODULE = f"{RUNTIME_MODULE}/__init__.py"
ENTRY_POINTS = f"{RUNTIME_DIST_INFO}/entry_points.txt"


@pytest.fixture
def site(release, monkeypatch):
    monkeypatch.delenv("SGLANG_PLUGINS", raising=False)
    monkeypatch.delenv("SGLANG_PATCHKIT_DISABLE", raising=False)
    return release("0.5.17", extra=(PLUGINS,))


def test_written_with_the_patches_recorded_and_removed_byte_exactly(site):
    installed = snapshot(site)
    applied = run("apply", "--site-packages", site, "--json")
    assert applied.exit_code == 0, applied.stderr
    assert {MODULE, ENTRY_POINTS} <= set(applied.json()["files"])
    assert (site / ENTRY_POINTS).read_text() == f"[sglang.srt.plugins]\npatchkit = {RUNTIME_MODULE}:register\n"
    state = json.loads((site / ".patchkit/state.json").read_text())
    assert state["schema"] == 3 and state["runtime"]["dir"] is None
    assert sorted(state["runtime"]["files"]) == sorted(
        [MODULE, ENTRY_POINTS, f"{RUNTIME_DIST_INFO}/METADATA", f"{RUNTIME_DIST_INFO}/RECORD"])
    record = (site / f"{RUNTIME_DIST_INFO}/RECORD").read_text()
    assert f"{MODULE},sha256=" in record and record.endswith(f"{RUNTIME_DIST_INFO}/RECORD,,\n")
    again = run("apply", "--site-packages", site)
    assert again.exit_code == 0 and "nothing to do" in again.stdout

    # A partial revert keeps them (patches remain); the last patch takes them along, with the
    # bytecode cache a serving Python wrote for the plugin.
    assert run("revert", "--site-packages", site, "--only", "mtp-layer-detection").exit_code == 0
    assert (site / MODULE).is_file()
    (site / RUNTIME_MODULE / "__pycache__").mkdir()
    (site / RUNTIME_MODULE / "__pycache__" / "__init__.cpython-312.pyc").write_bytes(b"\x00")
    assert run("revert", "--site-packages", site).exit_code == 0
    assert snapshot(site) == installed


def test_a_tree_patched_without_them_gets_them_on_a_no_op_apply(site):
    assert run("apply", "--site-packages", site).exit_code == 0
    path = site / ".patchkit/state.json"
    state = json.loads(path.read_text())
    for rel in state["runtime"]["files"]:
        (site / rel).unlink()
    state["runtime"]["files"] = {}
    path.write_text(json.dumps(state))  # as a patchkit without the runtime report left it
    result = run("apply", "--site-packages", site)
    assert result.exit_code == 0 and "added the runtime report (4 file(s)" in result.stdout, result.stdout
    assert (site / MODULE).is_file()


def test_a_foreign_file_under_their_name_is_exit_4_unless_force(site):
    installed = snapshot(site)
    (site / RUNTIME_DIST_INFO).mkdir()
    (site / ENTRY_POINTS).write_text("[sglang.srt.plugins]\nmine = elsewhere:go\n")
    before = snapshot(site)
    refused = run("apply", "--site-packages", site)
    assert refused.exit_code == 4 and "is not the file patchkit wrote there" in refused.stderr, refused.stderr
    assert snapshot(site) == before
    assert run("apply", "--site-packages", site, "--force").exit_code == 0
    assert "patchkit = " in (site / ENTRY_POINTS).read_text()
    assert run("revert", "--site-packages", site).exit_code == 0
    assert snapshot(site) == installed


def test_no_plugin_system_no_files_and_a_note(release):
    site = release("0.5.10")
    result = run("apply", "--site-packages", site)
    assert result.exit_code == 0
    assert "SGLang 0.5.10 has no plugin system" in result.stderr
    assert not (site / RUNTIME_MODULE).exists() and not (site / RUNTIME_DIST_INFO).exists()
    assert json.loads((site / ".patchkit/state.json").read_text())["runtime"]["files"] == {}


def test_sglang_plugins_without_patchkit_is_noted_by_apply_and_verify(site, monkeypatch):
    monkeypatch.setenv("SGLANG_PLUGINS", "other")
    applied = run("apply", "--site-packages", site)
    assert applied.exit_code == 0
    assert "SGLANG_PLUGINS=other does not list patchkit" in applied.stderr
    assert "serve with SGLANG_PLUGINS=other,patchkit" in applied.stderr
    verified = run("verify", "--site-packages", site, "--allow-skipped")
    assert "SGLANG_PLUGINS=other does not list patchkit" in verified.stderr
    monkeypatch.setenv("SGLANG_PLUGINS", "other, patchkit")
    assert "SGLANG_PLUGINS" not in run("verify", "--site-packages", site).stderr


def test_list_says_which_patches_can_be_switched_off():
    rows = {row["id"]: row["runtime_switch"] for row in run("list", "--json").json()["patches"]}
    assert rows["mtp-layer-detection"] == ["SGLANG_PATCHKIT_DISABLE=mtp-layer-detection"]
    assert rows["symm-mem-kill-switch"] == ["SGLANG_PATCHKIT_DISABLE=symm-mem-kill-switch",
                                            "SGLANG_PATCH_DISABLE_SYMM_MEM=0"]
    assert rows["eagle3-capture-hook"] == []
    text = run("list").stdout
    assert "runtime switch: none, cannot take the pristine path at run time: it adds methods the release lacks" in text
    assert "runtime switch: none, cannot take the pristine path at run time" in text
    assert ("runtime switch: SGLANG_PATCHKIT_DISABLE=symm-mem-kill-switch or SGLANG_PATCH_DISABLE_SYMM_MEM=0"
            in text)


def test_the_switchable_patches_are_rendered_into_the_plugin(site, monkeypatch):
    monkeypatch.setenv("SGLANG_PATCHKIT_DISABLE", "symm-mem-kill-switch, mtp-layer-detection, eagle3-capture-hook")
    applied = run("apply", "--site-packages", site)
    assert applied.exit_code == 0
    assert ("SGLANG_PATCHKIT_DISABLE lists eagle3-capture-hook, which cannot take the pristine path at runtime"
            in applied.stderr), applied.stderr
    switchable = sorted(pid for pid, switch in
                        ((row["id"], row["runtime_switch"]) for row in run("list", "--json").json()["patches"]) if switch)
    assert {"symm-mem-kill-switch", "mtp-layer-detection"} <= set(switchable)
    assert f"SWITCHABLE = {switchable!r}\n" in (site / MODULE).read_text()


def test_verify_checks_their_bytes(site):
    assert run("apply", "--site-packages", site).exit_code == 0
    checks = {c["check"]: c for c in run("verify", "--site-packages", site, "--json").json()["checks"]}
    assert checks[f"runtime report {MODULE}"]["result"] == "ok"
    (site / MODULE).write_text("def register():\n    pass\n")
    changed = run("verify", "--site-packages", site, "--json")
    assert changed.exit_code == 1
    assert {c["check"]: c["result"] for c in changed.json()["checks"]}[f"runtime report {MODULE}"] == "failed"


@pytest.mark.parametrize("command", ["revert", "apply"])
def test_a_symlinked_runtime_folder_is_a_wrong_file_type_exit_6(site, tmp_path, command):
    """The runtime report's folder replaced by a symlink (to a folder outside the tree): revert said
    exit 3 (SGLang not found, version mismatch) for what is a file of the wrong type (6); nothing is
    written through it, on either side of the link."""
    if command == "revert":
        assert run("apply", "--site-packages", site).exit_code == 0
    elsewhere = tmp_path / "elsewhere"
    if (site / RUNTIME_MODULE).exists():
        (site / RUNTIME_MODULE).rename(elsewhere)
    else:
        elsewhere.mkdir()
    (site / RUNTIME_MODULE).symlink_to(elsewhere, target_is_directory=True)
    before, outside = snapshot(site), snapshot(elsewhere)
    result = run(command, "--site-packages", site)
    assert result.exit_code == 6, (result.stdout, result.stderr)
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and f"{RUNTIME_MODULE} is a symlink" in lines[0], lines
    assert snapshot(site) == before and snapshot(elsewhere) == outside
