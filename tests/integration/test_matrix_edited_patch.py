"""A committed manifest speaks only for the patch sources it was made with (`patch_sha256`) and
the files they read (`reads`): after a patch was edited, or where a file differs, `matrix`,
`status` and `apply` judge by the probes on the real release files."""

from __future__ import annotations

import shutil
import sys

import pytest

from patchkit.engine import decide, registry, verdicts
from patchkit.releases import manifest
from patchkit.engine import view as view_mod
from patchkit.releases.pristine import WheelSource
from patchkit.store.target import Target
from testing.cli import run
from testing.releases import pristine
from tests.integration.test_matrix_wheels import wheels_home  # noqa: F401 (a fixture)

pytestmark = pytest.mark.integration

PROBE = "    def is_fixed_upstream(self, path: str, tree: cst.Module) -> bool:\n"


@pytest.fixture
def edited_builtin_set(tmp_path, monkeypatch):
    """The built-in patch set as a user who edited patches/mtp_layer_detection.py has it: its
    upstream probe now never finds upstream's fix."""
    import patchkit.patches as builtin

    folder = tmp_path / "patches"
    shutil.copytree(list(builtin.__path__)[0], folder, ignore=shutil.ignore_patterns("__pycache__"))
    path = folder / "mtp_layer_detection.py"
    text = path.read_text()
    assert text.count(PROBE) == 1
    path.write_text(text.replace(PROBE, PROBE + "        return False  # edited\n"))
    monkeypatch.setattr(builtin, "__path__", [str(folder)])
    for name in [n for n in sys.modules if n.startswith("patchkit.patches.")]:
        monkeypatch.delitem(sys.modules, name)
    with registry.running(registry.PatchSets()):  # listed afresh, from the edited folder
        yield


def test_matrix_judges_an_edited_patch_by_its_probes(wheels_home, edited_builtin_set):  # noqa: F811
    assert verdicts.from_manifest(WheelSource("0.5.18")) == {}  # the manifest speaks for another patch set
    result = run("matrix", "--from", "0.5.17", "--to", "0.5.18", "--json")
    assert result.exit_code == 0, result.stderr
    states = {row["id"]: row["states"] for row in result.json()["patches"]}
    # The committed manifest of 0.5.18 says upstream-fixed; the edited probe cannot say so.
    assert states["mtp-layer-detection"]["0.5.17"] == "applies"
    assert states["mtp-layer-detection"]["0.5.18"] != "upstream-fixed", states["mtp-layer-detection"]
    # The unedited patches, judged too, say what the committed manifests say.
    for version in ("0.5.17", "0.5.18"):
        recorded = {pid: entry.verdict for pid, entry in manifest.load(version).patches.items()}
        judged = {pid: row[version] for pid, row in states.items()}
        del recorded["mtp-layer-detection"], judged["mtp-layer-detection"]
        assert judged == recorded, version


def test_status_judges_an_edited_patch_by_its_probes(release, edited_builtin_set):
    """`status` and `apply` take a pristine file's verdict from the manifest only for the patch
    source the manifest was made with (before: the edited probe was never run, and 0.5.18 stayed
    upstream-fixed, so `apply` would skip the patch)."""
    site = release("0.5.18")
    result = run("status", "--site-packages", site, "--json")
    assert result.exit_code == 0, result.stderr
    states = {row["id"]: row["state"] for row in result.json()["patches"]}
    assert states["mtp-layer-detection"] != "upstream-fixed"
    assert states["autoround-packed-mapping"] == "pending"


def test_a_file_the_patch_reads_that_the_release_lacks_sends_it_to_the_probes(release):
    """0.5.10's manifest judged eagle3-capture-hook with qwen3_5_text.py absent; a tree of that
    version that has one (a fork, a backport) is not the release the manifest speaks for."""
    site = release("0.5.10")
    rel = "sglang/srt/models/qwen3_5_text.py"
    assert manifest.load("0.5.10").patches["eagle3-capture-hook"].reads[rel] is None
    view = view_mod.open_view(Target(site=site, version="0.5.10"))
    assert decide.fast_status(view, "eagle3-capture-hook") is not None  # the release: hashes decide
    shutil.copy(pristine("0.5.17") / rel, site / rel)
    view = view_mod.open_view(Target(site=site, version="0.5.10"))
    assert decide.fast_status(view, "eagle3-capture-hook") is None
    assert decide.fast_status(view, "autoround-packed-mapping") is not None  # it does not read that file
