"""The checkout and the installed copy are one thing: `patches/` and `manifests/` at the top of
the repository load as `patchkit.patches` / `patchkit.manifests` only, `python -m patchkit`
works from a checkout, and `manifest update` writes only where it is told."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from patchkit.releases import manifest
from patchkit.engine import registry
from testing.cli import run

REPO = Path(__file__).resolve().parents[3]

# A child interpreter that finds patchkit only as the checkout's folder (no install at all).
_FROM_CHECKOUT = """
import runpy, sys
sys.meta_path[:] = [f for f in sys.meta_path if "editable" not in type(f).__name__.lower() and "editable" not in repr(f).lower()]
sys.path[:] = [p for p in sys.path if "__editable__" not in p]
sys.argv = ["patchkit", *sys.argv[1:]]
runpy.run_module("patchkit", run_name="__main__")
"""


def test_python_m_patchkit_from_a_checkout(tmp_path):
    proc = subprocess.run([sys.executable, "-c", _FROM_CHECKOUT, "list", "--json"], cwd=REPO, capture_output=True,
                          text=True, env={"PATH": "/usr/bin:/bin", "PATCHKIT_HOME": str(tmp_path), "PYTHONPATH": str(REPO)})
    assert proc.returncode == 0, proc.stderr
    assert "mtp-layer-detection" in proc.stdout


def test_each_patch_module_has_one_name():
    import importlib

    registry.load_all()
    names = [name for name in sys.modules if name.endswith(".mtp_layer_detection") or name == "mtp_layer_detection"]
    assert names == ["patchkit.patches.mtp_layer_detection"]
    try:
        importlib.import_module("patches")
    except ImportError as exc:
        assert "patchkit.patches" in str(exc)
    else:
        raise AssertionError("the built-in patches imported under a second name")


def test_manifest_update_writes_only_to_an_explicit_or_checkout_folder(tmp_path, monkeypatch):
    assert manifest.checkout_folder() == REPO / "manifests"
    monkeypatch.setattr(manifest, "checkout_folder", lambda: None)  # as an installed copy
    result = run("manifest", "update", "0.5.17")
    assert result.exit_code == 2 and "pass --out DIR" in result.stderr
    result = run("manifest", "update", "0.5.17", "--out", tmp_path / "missing")
    assert result.exit_code == 2 and "not a folder" in result.stderr
