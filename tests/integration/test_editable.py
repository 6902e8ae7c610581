"""The official image layout for real: a release's source as `<tmp>/sgl-workspace/sglang/python`
(a git checkout, as the Dockerfile's clone is), installed with `pip install -e` in both editable
modes into a virtual environment; patchkit works on it through that environment's own Python."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import venv
from pathlib import Path

import pytest

from testing import behaviour
from testing.cli import run
from testing.releases import MODEL_CONFIG, source_project, tree_bytes

pytestmark = [pytest.mark.integration, pytest.mark.slow]  # two venvs, two editable installs: minutes

VERSION = "0.5.14"


def git(checkout: Path, *args: str) -> str:
    env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@t", "GIT_OPTIONAL_LOCKS": "0"}  # status must not refresh .git/index
    proc = subprocess.run(["git", "-C", str(checkout), *args], capture_output=True, text=True, env=env, check=True)
    return proc.stdout


def git_dir_snapshot(checkout: Path) -> dict[str, tuple[int, int]]:
    return {p.relative_to(checkout).as_posix(): (p.stat().st_size, p.stat().st_mtime_ns)
            for p in (checkout / ".git").rglob("*") if p.is_file()}


def imported_file(python: Path, module: str) -> str:
    code = f"import importlib.util; print(importlib.util.find_spec({module!r}).origin)"
    proc = subprocess.run([str(python), "-c", code], capture_output=True, text=True, cwd="/",
                          env={**os.environ, "CUDA_VISIBLE_DEVICES": "", "PYTHONWARNINGS": "ignore"})
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc.stdout.strip().splitlines()[-1]


@pytest.fixture(scope="module", params=["finder", "compat"])
def editable(request, tmp_path_factory):
    """(venv python, checkout root, python/ folder) of an editable SGLang in the official layout
    (shared by the tests of a module: each leaves the tree pristine)."""
    tmp_path = tmp_path_factory.mktemp(f"editable-{request.param}")
    checkout = tmp_path / "sgl-workspace" / "sglang"
    project = source_project(VERSION, checkout / "python")
    (checkout / ".gitignore").write_text("__pycache__/\n*.egg-info/\n")  # as SGLang's own ignores them
    git(checkout, "init", "-q")
    git(checkout, "add", "-A")
    git(checkout, "commit", "-q", "-m", f"v{VERSION}")

    env_dir = tmp_path / "venv"
    venv.EnvBuilder(with_pip=False).create(env_dir)  # this pip installs into it (--python): no ensurepip
    python = env_dir / "bin" / "python"
    # The packages SGLang's import chain needs (numpy, torch, transformers...), from the behaviour
    # tests' CPU environment, so that `find_spec` and verify's imports run for real.
    deps = Path(behaviour.python()).parent.parent
    site = Path(subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                               capture_output=True, text=True, check=True).stdout.strip())
    (site / "behaviour-deps.pth").write_text(
        str(next((deps / "lib").glob("python3*/site-packages"))) + "\n")
    argv = [sys.executable, "-m", "pip", "--python", str(python), "install", "-q", "--disable-pip-version-check",
            "--no-deps", "-e", str(project)]
    if request.param == "compat":
        argv += ["--config-settings", "editable_mode=compat"]
    subprocess.run(argv, check=True, capture_output=True, text=True)
    kind = {p.name for p in site.iterdir()}
    if request.param == "finder":
        assert any(name.startswith("__editable___sglang") and name.endswith("_finder.py") for name in kind), kind
    else:
        assert not any(name.endswith("_finder.py") for name in kind), kind
    return python, checkout, project


def test_editable_install_in_the_official_layout(editable):
    python, checkout, project = editable
    patched_file = project / MODEL_CONFIG
    pristine_tree = tree_bytes(project / "sglang")
    git_before = git_dir_snapshot(checkout)
    assert git(checkout, "status", "--porcelain").strip() == ""
    assert imported_file(python, "sglang") == str(project / "sglang" / "__init__.py")  # finds, imports nothing

    status = run("status", "--python", python, "--json")
    assert status.exit_code == 0, status.stderr
    assert status.json()["sglang"] == {"version": VERSION, "path": str(project)}
    assert "pending" in {p["state"] for p in status.json()["patches"]}
    assert "installed editable" in status.stderr

    applied = run("apply", "--python", python, "--target", f"v{VERSION}")
    assert applied.exit_code == 0, applied.stderr
    assert f"in the git checkout {checkout}" in applied.stderr and "git status" in applied.stderr
    assert (project / ".patchkit" / "state.json").is_file()
    changed = {line[3:] for line in git(checkout, "status", "--porcelain").splitlines()}
    assert f"python/{MODEL_CONFIG}" in changed and not any(".patchkit" in path for path in changed), changed
    assert patched_file.read_bytes() != pristine_tree[MODEL_CONFIG.removeprefix("sglang/")]
    # The file Python imports is the one patched: the patched module's code is live.
    assert imported_file(python, "sglang.srt.configs.model_config") == str(patched_file)
    # The runtime report goes beside the install's metadata (the checkout is not on sys.path in
    # the finder mode), and SGLang's real load_plugins() there finds it and reads the checkout's files.
    site = Path(imported_file(python, "sglang_patchkit_runtime")).parent.parent
    assert site.name == "site-packages" and (site / "sglang_patchkit_runtime-1.dist-info/entry_points.txt").is_file()
    [line] = behaviour.load_plugins_lines(python)
    assert f" sglang={VERSION} active=" in line and "mtp-layer-detection@" in line and line.endswith(" drifted=-"), line

    states = {p["id"]: p["state"] for p in run("status", "--python", python, "--json").json()["patches"]}
    assert "pending" not in states.values() and "applied" in states.values(), states
    verified = run("verify", "--python", python, "--strict", "--json")
    assert verified.exit_code == 0, (verified.stdout, verified.stderr)
    checks = {c["check"]: c["result"] for c in verified.json()["checks"]}
    assert checks["import sglang.srt.configs.model_config"] == "ok", checks
    assert run("diff", "--python", python).stdout.count("+++ b/sglang/") >= 1

    reverted = run("revert", "--python", python)
    assert reverted.exit_code == 0, reverted.stderr
    assert tree_bytes(project / "sglang") == pristine_tree
    assert not (project / ".patchkit").exists()
    assert not any(p.name.startswith("sglang_patchkit_runtime") for p in site.iterdir())
    assert git(checkout, "status", "--porcelain").strip() == ""
    assert git_dir_snapshot(checkout) == git_before


def test_source_checkout_given_directly(editable):
    """`--source DIR`, with DIR the checkout root or its python/ folder, reaches the same tree."""
    python, checkout, project = editable
    pristine_tree = tree_bytes(project / "sglang")
    for folder in (checkout, project):
        status = run("status", "--source", folder, "--json")
        assert status.exit_code == 0, status.stderr
        assert status.json()["sglang"] == {"version": VERSION, "path": str(project)}
    assert run("apply", "--source", checkout).exit_code == 0
    python_view = {p["id"]: p["state"] for p in run("status", "--python", python, "--json").json()["patches"]}
    source_view = {p["id"]: p["state"] for p in run("status", "--source", project, "--json").json()["patches"]}
    assert python_view == source_view and "applied" in source_view.values()
    assert run("revert", "--source", project).exit_code == 0
    assert tree_bytes(project / "sglang") == pristine_tree


def test_site_packages_of_an_editable_install_follows_it(editable):
    python, _, project = editable
    site = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                          capture_output=True, text=True, check=True).stdout.strip()
    status = run("status", "--site-packages", site, "--json")
    assert status.exit_code == 0, status.stderr
    assert status.json()["sglang"]["path"] == str(project)


def test_this_python_finds_the_editable_install(editable):
    """Default discovery (no targeting flag) from patchkit running inside that environment."""
    python, _, project = editable
    ours = next(p for p in sys.path if p.endswith("site-packages") and Path(p, "click").is_dir())
    code = ("import site, sys; site.addsitedir(sys.argv.pop(1)); sys.argv[0] = 'patchkit'; "
            "from patchkit.cli.app import main; main()")
    proc = subprocess.run([str(python), "-c", code, ours, "status", "--json"], capture_output=True, text=True,
                          cwd="/", env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])})
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["sglang"] == {"version": VERSION, "path": str(project)}


def test_verify_runs_the_interpreter_of_the_environment_named(editable, monkeypatch):
    """`verify --site-packages` of an editable install runs that venv's interpreter, not one found
    beside the checkout; `verify --python` with a relative path works (children run elsewhere)."""
    python, checkout, project = editable
    site = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                          capture_output=True, text=True, check=True).stdout.strip()
    # A virtual environment around the checkout (outside its git tree) whose interpreter cannot
    # import anything: picking it instead of the venv's fails every import check.
    workspace = checkout.parent
    (workspace / "pyvenv.cfg").write_text("home = /nowhere\n")
    (workspace / "bin").mkdir()
    (workspace / "bin" / "python").write_text("#!/bin/sh\necho 'not the environment named' >&2\nexit 7\n")
    (workspace / "bin" / "python").chmod(0o755)
    try:
        assert run("apply", "--site-packages", site).exit_code == 0
        verified = run("verify", "--site-packages", site, "--json")
        assert verified.exit_code == 0, (verified.stdout, verified.stderr)
        checks = {c["check"]: c["result"] for c in verified.json()["checks"]}
        assert checks["import sglang.srt.configs.model_config"] == "ok", checks

        monkeypatch.chdir(python.parent.parent.parent)
        relative = python.relative_to(python.parent.parent.parent)
        by_path = run("verify", "--python", relative, "--json")
        assert by_path.exit_code == 0, (by_path.stdout, by_path.stderr)
        assert by_path.json()["sglang"]["path"] == str(project)
    finally:
        shutil.rmtree(workspace / "bin")
        (workspace / "pyvenv.cfg").unlink()
        assert run("revert", "--site-packages", site).exit_code == 0
    assert git(checkout, "status", "--porcelain").strip() == ""
