"""One patch's exception never takes the others down: an outside patch set (`--patches DIR`)
whose probe raises IndexError and whose transform trips an assert, on a real release. Each
broken patch is `failed` with its exception in one line (traceback in the log), every other
patch is judged and shown, the exit code is 1, and `apply` writes nothing."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from testing.cli import run
from testing.releases import HOME, pristine, snapshot

pytestmark = pytest.mark.integration

VERSION = "0.5.17"
PATCH = '''
"""{pid}: a patch with a bug in it."""

import libcst as cst
import libcst.matchers as m

from patchkit.authoring.edits import edit
from patchkit.authoring.patch import Patch


class Broken(Patch):
    ID = "{pid}"
    TITLE = "A patch with a bug"
    RATIONALE = "Its own code raises: the run must go on without it."
    APPLIES_TO = ">=0.5.10"
    TARGETS = ("sglang/version.py",)

    def is_fixed_upstream(self, path, tree):
        {probe}

    @edit(m.Module(), "the module")
    def add_flag(self, original_node, updated_node):
        assert isinstance(updated_node, cst.ClassDef), "the module is not a class"
        return updated_node
'''
PROBE_RAISES = "return [][0]  # IndexError"
PROBE_FINE = "return False"


@pytest.fixture
def broken(tmp_path) -> Path:
    folder = tmp_path / "broken-patches"
    folder.mkdir()
    (folder / "broken_probe.py").write_text(PATCH.format(pid="broken-probe", probe=PROBE_RAISES))
    (folder / "broken_transform.py").write_text(PATCH.format(pid="broken-transform", probe=PROBE_FINE))
    return folder


def _log(detail: str) -> str:
    found = re.search(r"traceback in (\S+)\)", detail)
    assert found, detail
    return Path(found.group(1)).read_text()


def test_status_judges_every_other_patch_and_exits_1(release, broken):
    site = release(VERSION)
    result = run("--patches", broken, "status", "--site-packages", site, "--json")
    assert result.exit_code == 1, result.stderr
    rows = {row["id"]: row for row in result.json()["patches"]}
    probe, transform = rows.pop("broken-probe"), rows.pop("broken-transform")
    assert probe["state"] == transform["state"] == "failed"
    assert "patch broken-probe raised IndexError: list index out of range in its is_fixed_upstream probe" in probe["detail"]
    assert "patch broken-transform raised AssertionError: the module is not a class in its transform" in transform["detail"]
    assert "\n" not in probe["detail"] and "IndexError" in _log(probe["detail"])
    assert "assert isinstance" in _log(transform["detail"])
    # The built-in patches are judged as without the broken ones.
    alone = run("status", "--site-packages", site, "--json")
    assert alone.exit_code == 0
    assert rows == {row["id"]: row for row in alone.json()["patches"]}
    text = run("--patches", broken, "status", "--site-packages", site)
    assert text.exit_code == 1 and "failed" in text.stdout and "mtp-layer-detection" in text.stdout


def test_apply_writes_nothing_shows_the_others_and_names_the_way_on(release, broken):
    site = release(VERSION)
    before = snapshot(site)
    result = run("--patches", broken, "apply", "--site-packages", site)
    assert result.exit_code == 1, result.stderr
    assert snapshot(site) == before
    assert "pending" in result.stdout and "mtp-layer-detection" in result.stdout and "broken-probe" in result.stdout
    [line] = result.stderr.strip().splitlines()
    assert "raised IndexError" in line and "nothing was written" in line and "--skip broken-probe" in line
    dry = run("--patches", broken, "apply", "--site-packages", site, "--dry-run")
    assert dry.exit_code == 1 and snapshot(site) == before
    # Without the broken patches the others apply, and go back byte for byte.
    skipped = run("--patches", broken, "apply", "--site-packages", site, "--skip", "broken-probe", "--skip",
                  "broken-transform")
    assert skipped.exit_code == 0, skipped.stderr
    assert run("--patches", broken, "revert", "--site-packages", site).exit_code == 0
    assert snapshot(site) == before


def test_matrix_and_track_show_the_others_and_exit_1(broken, monkeypatch):
    pristine(VERSION)
    monkeypatch.setenv("PATCHKIT_HOME", str(HOME))
    matrix = run("--patches", broken, "matrix", "--from", VERSION, "--to", VERSION, "--json")
    assert matrix.exit_code == 1, matrix.stderr
    table = matrix.json()
    states = {row["id"]: row["states"][VERSION] for row in table["patches"]}
    assert states["broken-probe"] == states["broken-transform"] == "failed"
    assert states["mtp-layer-detection"] == "applies"
    assert {cell["id"] for cell in table["failed"]} == {"broken-probe", "broken-transform"}
    text = run("--patches", broken, "matrix", "--from", VERSION, "--to", VERSION)
    assert text.exit_code == 1 and "raised IndexError" in text.stderr and "mtp-layer-detection" in text.stdout

    track = run("--patches", broken, "track", "--from", VERSION, "--to", VERSION, "--json")
    assert track.exit_code == 1, track.stderr
    rows = {row["id"]: row for row in track.json()["patches"]}
    assert rows["broken-probe"]["to"]["state"] == "failed" and "IndexError" in rows["broken-probe"]["to"]["detail"]
    assert rows["mtp-layer-detection"]["to"]["state"] == "applies"
