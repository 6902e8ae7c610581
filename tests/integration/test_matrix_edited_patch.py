"""`matrix` after a patch source was edited (its digest no longer the manifests' patch_sha256):
its verdicts come from the probes on the real release files, not from the committed manifests."""

from __future__ import annotations

import shutil
import sys

import pytest

from patchkit import manifest, registry, verdicts
from patchkit.releases import WheelSource
from testing.cli import run
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
    registry.use_folders(())  # forget the listed sets
    yield
    registry.use_folders(())


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
