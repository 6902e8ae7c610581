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
