"""`patchkit new`: a patch module and its test from templates, loadable and passing as written."""

from __future__ import annotations

import subprocess
import sys

from testing.cli import run


def test_new_writes_a_patch_and_a_passing_test(tmp_path):
    folder = tmp_path / "acme"
    folder.mkdir()
    (folder / "__init__.py").write_text("")
    (folder / "tests").mkdir()
    result = run("new", "scheduler-leak", "--target", "sglang/srt/managers/scheduler.py", "--class", "Scheduler",
                 "--method", "step", "--out", folder)
    assert result.exit_code == 0, result.stderr
    assert (folder / "scheduler_leak.py").is_file() and (folder / "tests" / "test_scheduler_leak.py").is_file()

    listed = run("--patches", folder, "list", "--json").json()["patches"]
    assert {row["id"]: row["origin"] for row in listed}["scheduler-leak"] == f"folder {folder.resolve()}"
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(folder / "tests")],
                          cwd=tmp_path, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr

    again = run("new", "scheduler-leak", "--target", "sglang/srt/managers/scheduler.py", "--out", folder)
    assert again.exit_code == 2 and "exists already" in again.stderr


def test_new_refuses_bad_input(tmp_path):
    assert run("new", "Bad_Id", "--target", "sglang/x.py", "--out", tmp_path).exit_code == 2
    assert run("new", "ok-id", "--target", "x.txt", "--out", tmp_path).exit_code == 2
    clash = run("new", "mtp-layer-detection", "--target", "sglang/x.py", "--out", tmp_path)
    assert clash.exit_code == 2 and "exists already (built-in)" in clash.stderr
    assert list(tmp_path.iterdir()) == []


def test_new_out_makes_the_package_and_the_step_it_prints_works(tmp_path, monkeypatch):
    """`--out DIR` that does not exist yet: DIR, DIR/tests and what a package of patches needs
    (the two __init__.py) are made, and the test step printed next passes as written, run as the
    user runs it (the venv's `pytest` script, from the folder `new` ran in)."""
    import re
    import shlex
    from pathlib import Path

    monkeypatch.chdir(tmp_path)
    result = run("new", "scheduler-leak", "--target", "sglang/srt/managers/scheduler.py", "--class", "Scheduler",
                 "--method", "step", "--out", "acme")
    assert result.exit_code == 0, result.stderr
    for made in ("acme/__init__.py", "acme/tests/__init__.py", "acme/scheduler_leak.py",
                 "acme/tests/test_scheduler_leak.py"):
        assert (tmp_path / made).is_file(), made
    assert "created acme/" in result.stdout
    (step,) = re.findall(r"run `([^`]+)`", result.stdout)
    argv = shlex.split(step)
    assert argv[0] == "pytest"
    pytest_script = Path(sys.executable).parent / "pytest"
    proc = subprocess.run([str(pytest_script), "-q", "-p", "no:cacheprovider", *argv[1:]], cwd=tmp_path,
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    listed = run("--patches", tmp_path / "acme", "list", "--json").json()["patches"]
    assert "scheduler-leak" in {row["id"] for row in listed}


def test_new_out_whose_parent_is_missing_says_so(tmp_path):
    result = run("new", "x-y", "--target", "sglang/a.py", "--out", tmp_path / "no" / "such")
    assert result.exit_code == 2 and "its parent folder" in result.stderr and "does not exist" in result.stderr
    assert "is not a folder" not in result.stderr
    (tmp_path / "afile").write_text("")
    result = run("new", "x-y", "--target", "sglang/a.py", "--out", tmp_path / "afile")
    assert result.exit_code == 2 and "afile is not a folder" in result.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["afile"]


def test_the_new_patch_puts_its_fix_after_the_methods_docstring(tmp_path, monkeypatch):
    # The template's fix goes first in the method's body, and a docstring stays the docstring.
    import importlib
    import textwrap

    import libcst as cst

    folder = tmp_path / "acme_doc"
    assert run("new", "doc-kept", "--target", "sglang/srt/x.py", "--class", "Server", "--method", "run",
               "--out", folder).exit_code == 0
    monkeypatch.syspath_prepend(str(tmp_path))
    module = importlib.import_module("acme_doc.doc_kept")
    before = textwrap.dedent('''\
        class Server:
            def run(self):
                """Serve."""
                return 1
        ''')
    after = module.DocKept().transform(module.TARGET, cst.parse_module(before)).code
    body = after.split("def run(self):\n", 1)[1].splitlines()
    assert body[0].strip() == '"""Serve."""' and body[1].strip().startswith("self._patchkit_doc_kept = True"), after
