"""Patch sets from outside patchkit: a package built and installed in the test (entry point
group `patchkit.patches`) and a folder given with `--patches DIR`."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from testing.cli import run, states
from testing.releases import snapshot

pytestmark = pytest.mark.integration

VERSION_FILE = "sglang/version.py"
PATCH = '''
"""{pid}: an example patch shipped from outside patchkit."""

import libcst as cst
import libcst.matchers as m

from patchkit.authoring.edits import edit
from patchkit.authoring.patch import Patch
from patchkit.authoring.template import Snippet

FLAG = Snippet("PATCHKIT_EXTERNAL_EXAMPLE = True  # patchkit {pid}\\n", blank_lines_before=1)


class Example(Patch):
    ID = "{pid}"
    TITLE = "An example external patch"
    RATIONALE = "Shows that patch sets from outside patchkit get the same guarantees."
    APPLIES_TO = ">=0.5.10"
    TARGETS = ("{target}",)
    MARKS = {{"{target}": ((None, FLAG),)}}

    def is_fixed_upstream(self, path, tree):
        return False

    @edit(m.Module(), "the module")
    def add_flag(self, original_node, updated_node):
        self.warn("an external patch speaking")
        return updated_node.with_changes(body=[*updated_node.body, *FLAG.fill()])
'''


def write_patch(folder: Path, pid: str, target: str = VERSION_FILE) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{pid.replace('-', '_')}.py"
    path.write_text(PATCH.format(pid=pid, target=target))
    return path


def test_folder_patch_set_applies_reverts_and_lists_its_origin(release, tmp_path):
    folder = tmp_path / "my-patches"
    write_patch(folder, "external-example")
    site = release("0.5.14")
    before = snapshot(site)

    listed = run("--patches", folder, "list", "--json").json()["patches"]
    origins = {row["id"]: row["origin"] for row in listed}
    assert origins["external-example"] == f"folder {folder.resolve()}"
    assert origins["mtp-layer-detection"] == "built-in"

    assert states(site)["mtp-layer-detection"] == "pending"  # without --patches: not known
    result = run("--patches", folder, "apply", "--site-packages", site, "--only", "external-example", "--json")
    assert result.exit_code == 0, result.stderr
    assert any("an external patch speaking" in w for w in result.json()["warnings"])
    assert (site / VERSION_FILE).read_text().endswith("PATCHKIT_EXTERNAL_EXAMPLE = True  # patchkit external-example\n")
    status = run("--patches", folder, "status", "--site-packages", site, "--json").json()
    assert {p["id"]: p["state"] for p in status["patches"]}["external-example"] == "applied"
    again = run("--patches", folder, "apply", "--site-packages", site, "--only", "external-example", "--json")
    assert again.exit_code == 0 and again.json()["changed"] is False

    assert run("--patches", folder, "revert", "--site-packages", site).exit_code == 0
    assert snapshot(site) == before


def test_an_id_clash_exits_2_naming_both_origins(release, tmp_path):
    folder = tmp_path / "clashing"
    write_patch(folder, "mtp-layer-detection")
    site = release("0.5.14")
    before = snapshot(site)
    result = run("--patches", folder, "apply", "--site-packages", site)
    assert result.exit_code == 2
    assert "'mtp-layer-detection' is defined twice: by built-in" in result.stderr
    assert f"folder {folder.resolve()}" in result.stderr
    assert snapshot(site) == before


def test_an_id_the_state_file_would_refuse_exits_2_at_load_naming_the_file(release, tmp_path):
    # `fixA` was accepted at load, then its journal was refused as corrupt mid-apply.
    folder = tmp_path / "bad-id"
    folder.mkdir()
    (folder / "fixA.py").write_text(PATCH.format(pid="fixA", target=VERSION_FILE))
    site = release("0.5.14")
    before = snapshot(site)
    result = run("--patches", folder, "apply", "--site-packages", site)
    assert result.exit_code == 2, result.stderr
    assert f"{folder.resolve() / 'fixA.py'}" in result.stderr and "'fixA' is not a valid patch id" in result.stderr
    assert snapshot(site) == before and not (site / ".patchkit").exists()


def test_a_missing_folder_exits_2():
    result = run("--patches", "/no/such/folder", "list")
    assert result.exit_code == 2 and "error: --patches /no/such/folder: not a folder" in result.stderr


def test_entry_point_package_built_and_installed(tmp_path):
    project = tmp_path / "acme-patches"
    write_patch(project / "acme_patches", "acme-example")
    (project / "acme_patches" / "__init__.py").write_text('"""ACME\'s patches for SGLang."""\n')
    (project / "pyproject.toml").write_text(textwrap.dedent("""
        [build-system]
        requires = ["setuptools>=68"]
        build-backend = "setuptools.build_meta"

        [project]
        name = "acme-patches"
        version = "1.2.0"

        [project.entry-points."patchkit.patches"]
        acme = "acme_patches"

        [tool.setuptools]
        packages = ["acme_patches"]
    """))
    site = tmp_path / "site"
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps",
                    "--disable-pip-version-check", "--target", str(site), str(project)], check=True)
    env_path = f"{site}"
    listed = subprocess.run([sys.executable, "-m", "patchkit", "list", "--json"], capture_output=True, text=True,
                            env={"PYTHONPATH": env_path, "PATH": "/usr/bin:/bin", "PATCHKIT_HOME": str(tmp_path / "home")})
    assert listed.returncode == 0, listed.stderr
    import json

    origins = {row["id"]: row["origin"] for row in json.loads(listed.stdout)["patches"]}
    assert origins["acme-example"] == "entry point acme (acme-patches 1.2.0)"
    assert origins["draft-lmhead-placeholder"] == "built-in"
