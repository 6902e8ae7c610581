"""Patch identity: each patched file records the sha256 of the patch source that rendered it.
A tree patched by an older patch shows `outdated` once patchkit is re-installed with a changed
patch, and `apply` brings the new code."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import pytest

from patchkit.image import dockerfile
from testing.cli import run
from testing.releases import MODEL_CONFIG, REPO, tree_bytes

pytestmark = pytest.mark.integration

PATCH_ID = "mtp-layer-detection"
PATCH_FILE = "patches/mtp_layer_detection.py"
# The edit: the code the patch inserts, with its condition's operands swapped.
OLD_LINE = "        self.num_nextn_predict_layers is None\n        and self.is_draft_model\n"
MARK = "    self.is_draft_model\n        and self.num_nextn_predict_layers is None"


def holds_mark(path) -> bool:
    """MARK in the file, whatever indentation the snippet was rendered at."""
    return " ".join(MARK.split()) in " ".join(path.read_text().split())


def project_copy(dest):
    files = subprocess.run(["git", "-C", str(REPO), "ls-files", "--cached", "--others", "--exclude-standard"],
                           capture_output=True, text=True, check=True).stdout.splitlines()
    for rel in files:
        if (REPO / rel).is_file() and not rel.startswith("tests/"):
            (dest / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(REPO / rel, dest / rel)
    return dest


def install(project, lib):
    """A real (non-editable) install of patchkit from `project` into the folder `lib`."""
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-compile",
                    "--disable-pip-version-check", "--target", str(lib), str(project)],
                   check=True, capture_output=True, text=True)
    return lib


def patchkit(lib, *args):
    proc = subprocess.run([sys.executable, "-m", "patchkit", *map(str, args)], capture_output=True, text=True,
                          cwd=lib.parent, env={**os.environ, "PYTHONPATH": str(lib)})
    return proc


@pytest.mark.slow  # two real installs of patchkit
def test_changed_patch_makes_the_tree_outdated(tmp_path, release):
    site = release("0.5.17")
    pristine = tree_bytes(site / "sglang")
    project = project_copy(tmp_path / "project")
    first = install(project, tmp_path / "lib-1")

    applied = patchkit(first, "apply", "--site-packages", site)
    assert applied.returncode == 0, applied.stderr
    recorded = json.loads((site / ".patchkit/state.json").read_text())
    assert recorded["schema"] == 3
    labels = dockerfile.patch_labels("0.5.17")  # what the image labels carry
    for record in recorded["files"].values():
        assert record["patch_sha256"] == {pid: labels[pid] for pid in record["patches"]}

    source = (project / PATCH_FILE).read_text()
    assert source.count(OLD_LINE) == 1, f"{PATCH_FILE} changed: update this test's edit"
    (project / PATCH_FILE).write_text(source.replace(OLD_LINE, "    " + MARK + "\n"))
    second = install(project, tmp_path / "lib-2")

    status = patchkit(second, "status", "--site-packages", site, "--json")
    assert status.returncode == 0, status.stderr
    states = {p["id"]: p["state"] for p in json.loads(status.stdout)["patches"]}
    assert states[PATCH_ID] == "outdated", states
    assert set(states.values()) - {"outdated"} <= {"applied", "upstream-fixed", "not-applicable"}, states
    assert "outdated" in patchkit(second, "status", "--site-packages", site).stdout
    assert patchkit(second, "verify", "--site-packages", site, "--strict").returncode == 1
    assert '"outdated"' not in patchkit(first, "status", "--site-packages", site, "--json").stdout  # v1's own work

    assert not holds_mark(site / MODEL_CONFIG)
    updated = patchkit(second, "apply", "--site-packages", site)
    assert updated.returncode == 0, updated.stderr
    assert holds_mark(site / MODEL_CONFIG)
    states = {p["id"]: p["state"] for p in json.loads(patchkit(second, "status", "--site-packages", site, "--json").stdout)["patches"]}
    assert "outdated" not in states.values() and states[PATCH_ID] == "applied", states

    reverted = patchkit(second, "revert", "--site-packages", site)
    assert reverted.returncode == 0, reverted.stderr
    assert tree_bytes(site / "sglang") == pristine
    assert not (site / ".patchkit").exists()


def test_schema_1_state_is_judged_by_rendering(release):
    """A tree patched before digests were recorded: applied when its bytes are what the current
    patches render, outdated otherwise."""
    site = release("0.5.17")
    assert run("apply", "--site-packages", site).exit_code == 0
    path = site / ".patchkit/state.json"
    recorded = json.loads(path.read_text())
    recorded["schema"] = 1
    del recorded["runtime"]
    for record in recorded["files"].values():
        del record["patch_sha256"]
    path.write_text(json.dumps(recorded))
    result = run("status", "--site-packages", site, "--json")
    assert result.exit_code == 0, result.stderr
    assert "outdated" not in {p["state"] for p in result.json()["patches"]}
    assert "applied" in {p["state"] for p in result.json()["patches"]}


def as_schema_1(site) -> bytes:
    """Rewrite the state as patchkit wrote it before patch digests were recorded."""
    path = site / ".patchkit/state.json"
    recorded = json.loads(path.read_text())
    recorded["schema"] = 1
    del recorded["runtime"]
    for record in recorded["files"].values():
        del record["patch_sha256"]
    path.write_text(json.dumps(recorded, indent=2) + "\n")
    return path.read_bytes()


def test_a_no_op_apply_upgrades_a_schema_1_state(tmp_path):
    from testing.releases import copy_minimal

    site = copy_minimal("0.5.17", tmp_path / "site")  # the files patchkit touches, real copies
    # Three patches, one of them on two files (the renderer proves each file current).
    only = ["--only", "draft-lmhead-placeholder", "--only", "eagle3-capture-hook", "--only", PATCH_ID]
    assert run("apply", "--site-packages", site, *only).exit_code == 0
    schema_2 = json.loads((site / ".patchkit/state.json").read_text())
    as_schema_1(site)
    patched = tree_bytes(site / "sglang")
    result = run("apply", "--site-packages", site, *only)
    assert result.exit_code == 0 and "nothing to do" in result.stdout, result.stderr
    assert tree_bytes(site / "sglang") == patched  # only the state file was rewritten
    upgraded = json.loads((site / ".patchkit/state.json").read_text())
    assert upgraded["schema"] == 3 and upgraded["files"] == schema_2["files"]
    assert sorted(p.name for p in (site / ".patchkit").iterdir()) == ["backups", "state.json"]  # no temp file left
    # From now on status decides from hashes: the renderer (libcst) is not needed.
    proc = subprocess.run([sys.executable, "-c", "import sys; from patchkit.cli.app import main; sys.argv[1:] = "
                           f"['status', '--site-packages', {str(site)!r}, '--json']\n"
                           "try:\n    main()\nexcept SystemExit:\n    pass\n"
                           "print('LIBCST' if 'libcst' in sys.modules else 'NO-LIBCST', file=sys.stderr)"],
                          capture_output=True, text=True)
    assert proc.stderr.strip().splitlines()[-1] == "NO-LIBCST", proc.stderr
    states = {p["id"]: p["state"] for p in json.loads(proc.stdout)["patches"]}
    assert [states[pid] for pid in only[1::2]] == ["applied"] * 3, states


def test_a_no_op_apply_on_a_read_only_tree_keeps_a_schema_1_state(tmp_path):
    from testing.releases import copy_minimal

    point = tmp_path / "mnt"
    point.mkdir()
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64m", "tmpfs", str(point)], capture_output=True, text=True)
    if mounted.returncode != 0:
        pytest.skip(f"mounting is not permitted here: {mounted.stderr.strip()}")
    try:
        site = copy_minimal("0.5.17", point / "site")
        assert run("apply", "--site-packages", site, "--only", PATCH_ID).exit_code == 0
        old = as_schema_1(site)
        subprocess.run(["mount", "-o", "remount,ro", str(point)], check=True)
        result = run("apply", "--site-packages", site, "--only", PATCH_ID)
        assert result.exit_code == 0 and "nothing to do" in result.stdout, result.stderr
        assert "could not record the patch digests" in result.stderr and "Read-only file system" in result.stderr
        assert (site / ".patchkit/state.json").read_bytes() == old
        assert run("status", "--site-packages", site).exit_code == 0
    finally:
        subprocess.run(["umount", "-l", str(point)], check=False)


def test_a_state_with_the_file_hash_digests_of_before_is_outdated_and_apply_updates_it(tmp_path):
    """Before issue 22.2 a patch's digest was the sha256 of its source file. A tree patched then
    reads `outdated` (another identity: patchkit cannot tell which engine rendered it), and `apply`
    re-renders it (the same bytes here: the same code) and records today's digests."""
    from patchkit.engine import identity, registry
    from patchkit.base.util import sha256
    from testing.releases import copy_minimal

    site = copy_minimal("0.5.17", tmp_path / "site")
    only = ["--only", "draft-lmhead-placeholder", "--only", PATCH_ID]
    assert run("apply", "--site-packages", site, *only).exit_code == 0
    path = site / ".patchkit/state.json"
    today = json.loads(path.read_text())
    old = json.loads(path.read_text())
    for record in old["files"].values():
        record["patch_sha256"] = {pid: sha256(registry.source_file(pid).read_bytes()) for pid in record["patches"]}
    path.write_text(json.dumps(old, indent=2) + "\n")
    patched = tree_bytes(site / "sglang")

    result = run("status", "--site-packages", site, "--json")
    assert result.exit_code == 0, result.stderr
    states = {p["id"]: p["state"] for p in result.json()["patches"]}
    assert [states[pid] for pid in only[1::2]] == ["outdated", "outdated"], states
    assert run("verify", "--site-packages", site, "--strict").exit_code == 1

    updated = run("apply", "--site-packages", site, *only)
    assert updated.exit_code == 0, updated.stderr
    assert tree_bytes(site / "sglang") == patched
    recorded = json.loads(path.read_text())
    assert recorded["files"] == today["files"]
    assert all(record["patch_sha256"] == identity.digests(record["patches"]) for record in recorded["files"].values())
    states = {p["id"]: p["state"] for p in run("status", "--site-packages", site, "--json").json()["patches"]}
    assert [states[pid] for pid in only[1::2]] == ["applied", "applied"], states


def test_a_tree_patched_by_another_rendering_code_reads_outdated_and_reverts_byte_exactly(tmp_path, monkeypatch):
    """patchkit's rendering code is part of every module patch's digest (identity.RENDERING), so any
    patchkit whose rendering code differs (issue 44: View's render path asking each kind instead of
    `works_on_bytes`) recorded other digests. A tree it patched reads `outdated`, saying so, and
    `revert` restores the release's bytes exactly: revert reads the backups, never the digests."""
    from patchkit.engine import identity
    from testing.releases import copy_minimal

    site = copy_minimal("0.5.17", tmp_path / "site")
    pristine_tree = tree_bytes(site / "sglang")
    only = ["--only", "draft-lmhead-placeholder", "--only", PATCH_ID]
    today = identity.digest(PATCH_ID)
    with monkeypatch.context() as older:  # the patchkit before: another engine digest in every module patch's
        older.setattr(identity, "engine_digest", lambda package=None: "0" * 64)
        assert identity.digest(PATCH_ID) != today
        assert run("apply", "--site-packages", site, *only).exit_code == 0
    patched = tree_bytes(site / "sglang")
    assert patched != pristine_tree

    result = run("status", "--site-packages", site, "--json")
    assert result.exit_code == 0, result.stderr
    states = {p["id"]: p for p in result.json()["patches"]}
    assert [states[pid]["state"] for pid in only[1::2]] == ["outdated", "outdated"], states
    assert "another version of mtp-layer-detection or of patchkit" in states[PATCH_ID]["detail"], states[PATCH_ID]
    assert tree_bytes(site / "sglang") == patched  # status wrote nothing

    reverted = run("revert", "--site-packages", site)
    assert reverted.exit_code == 0, reverted.stderr
    assert tree_bytes(site / "sglang") == pristine_tree
    assert not (site / ".patchkit").exists()
