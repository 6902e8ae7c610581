"""The read-only fast path (issue 22.9): plain `status` and `apply` command lines run before click
is imported, with the same stdout, stderr and exit code as through the click CLI, on a real
release, pristine and patched, as child processes (`python -m patchkit` against `patchkit.cli.app`)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from patchkit.cli.fast_path import plain
from testing.releases import copy_minimal, tree_bytes

pytestmark = pytest.mark.integration
CLICK = "import sys; from patchkit.cli.app import main; sys.argv[0] = 'patchkit'; main()"
PROBE = ("import sys, runpy; sys.argv[1:] = {args!r}; sys.argv[0] = 'patchkit'\n"
         "try:\n    runpy.run_module('patchkit', run_name='__main__')\nexcept SystemExit as exc:\n"
         "    print('CLICK' if 'click' in sys.modules else 'NO-CLICK', file=sys.stderr); raise\n")


def both(tmp_path, args: list[str], pristine: bool) -> list[tuple[int, str, str]]:
    """(exit, stdout, stderr) of the fast path and of the click CLI, each on its own fresh copy of
    0.5.17 at the same path (pristine, or patched first)."""
    results = []
    site = tmp_path / "site"
    for argv in ([sys.executable, "-m", "patchkit", *args], [sys.executable, "-c", CLICK, *args]):
        shutil.rmtree(site, ignore_errors=True)
        copy_minimal("0.5.17", site)
        if not pristine:
            subprocess.run([sys.executable, "-c", CLICK, "apply", "--site-packages", str(site)], check=True,
                           capture_output=True, cwd=tmp_path)
        proc = subprocess.run([a.replace("SITE", str(site)) for a in argv], capture_output=True, text=True, cwd=tmp_path,
                              env={**os.environ, "PATCHKIT_HOME": str(tmp_path / "home")})
        results.append((proc.returncode, proc.stdout, proc.stderr, tree_bytes(site / "sglang")))
    return results


@pytest.mark.parametrize("pristine", [True, False], ids=["pristine", "patched"])
@pytest.mark.parametrize("args", [
    ["status", "--site-packages", "SITE"],
    ["status", "--site-packages", "SITE", "--json", "--target", "0.5.17"],
    ["status", "--site-packages", "SITE", "--target", "0.5.16"],  # a mismatch: exit 3
    ["apply", "--site-packages", "SITE"],
    ["apply", "--json", "--site-packages", "SITE"],
])
def test_the_fast_path_and_the_click_cli_say_and_do_the_same(tmp_path, args, pristine):
    fast, slow = both(tmp_path, args, pristine)
    assert fast == slow
    assert fast[0] in (0, 3)


def test_the_fast_path_does_not_import_click(tmp_path):
    site = copy_minimal("0.5.17", tmp_path / "site")
    proc = subprocess.run([sys.executable, "-c", PROBE.format(args=["status", "--site-packages", str(site)])],
                          capture_output=True, text=True, cwd=tmp_path)
    assert proc.returncode == 0 and proc.stderr.strip().splitlines()[-1] == "NO-CLICK", proc.stderr
    proc = subprocess.run([sys.executable, "-c", PROBE.format(args=["status", "--site-packages", str(site), "--only"])],
                          capture_output=True, text=True, cwd=tmp_path)
    assert proc.returncode == 2 and proc.stderr.strip().splitlines()[-1] == "CLICK", proc.stderr


@pytest.mark.parametrize("argv", [
    [], ["status", "-h"], ["--patches", "d", "status"], ["status", "--patches", "d"], ["status", "--json", "--json"],
    ["status", "--site-packages"], ["status", "--site-packages", "--json"], ["status", "--site-packages=x"],
    ["apply", "--only", "x"], ["apply", "--dry-run"], ["revert"], ["status", "extra"],
])
def test_anything_but_a_plain_command_line_is_clicks(argv):
    assert plain(argv) is None


def test_a_plain_command_line_is_parsed_as_click_parses_it():
    assert plain(["apply", "--json", "--target", "0.5.17", "--site-packages", "/s"]) == (
        "apply", {"site_packages": "/s", "version": "0.5.17", "as_json": True})
    assert plain(["status"]) == ("status", {"site_packages": None, "version": None, "as_json": False})


# What a plain status or no-op apply on a patched tree must not load (hash checks only): libcst
# (the probes and stack rendering), the stack-clash renderer that imports it, click, and what only
# other commands need (issue 43.3: each a cost of every run): importlib.metadata and the email
# package it imports (the version is read from METADATA directly), the wheel cache (zipfile),
# shutil and tempfile (nothing is copied or written), the reading of hand-applied diffs, packaging
# (plain release spellings are compared by `versions.plain`), hashlib (OpenSSL's sha256 is taken from
# _hashlib), signal (its functions from _signal) and typing (base/lean_typing); and in `status`, the
# lock, the leftover search and what only writing needs.
NOT_ON_THE_FAST_PATH = ("libcst", "patchkit.engine.stack_clash", "click", "email", "importlib.metadata",
                        "importlib.resources", "zipfile", "shutil", "tempfile", "subprocess",
                        "packaging.specifiers", "packaging.version", "hashlib", "signal", "typing",
                        "patchkit.releases.pristine", "patchkit.engine.hand_applied")
NOT_IN_STATUS = ("patchkit.store.lock", "patchkit.store.stale", "patchkit.store.transaction", "patchkit.engine.planning")
# Only what the run itself imported: a module the interpreter had loaded before it is not its cost.
LOADED = ("import sys, runpy; before = set(sys.modules); sys.argv[1:] = {args!r}; sys.argv[0] = 'patchkit'\n"
          "try:\n    runpy.run_module('patchkit', run_name='__main__')\nexcept SystemExit:\n"
          "    print('LOADED:', *[m for m in {heavy!r} if m in sys.modules and m not in before], file=sys.stderr)"
          "; raise\n")


def project_venv_site(tmp_path) -> Path:
    """A real 0.5.17 in the site-packages of a project's `.venv`, inside a git checkout (as CI's own
    clone holds the test cache): a venv's files are never the checkout's, so no `git` runs."""
    project = tmp_path / "project"
    subprocess.run(["git", "init", "-q", str(project)], check=True)
    (project / ".venv").mkdir()
    (project / ".venv" / "pyvenv.cfg").write_text(f"home = {Path(sys.executable).parent}\n")
    return copy_minimal("0.5.17", project / ".venv" / "lib" / "python3.11" / "site-packages")


@pytest.mark.parametrize("command", ["status", "apply"])
def test_a_plain_command_on_a_patched_tree_loads_no_heavy_module(tmp_path, command):
    site = project_venv_site(tmp_path)
    env = {**os.environ, "PATCHKIT_HOME": str(tmp_path / "home")}
    subprocess.run([sys.executable, "-c", CLICK, "apply", "--site-packages", str(site)], check=True,
                   capture_output=True, cwd=tmp_path, env=env)
    heavy = NOT_ON_THE_FAST_PATH + (NOT_IN_STATUS if command == "status" else ())
    proc = subprocess.run([sys.executable, "-c", LOADED.format(args=[command, "--site-packages", str(site)],
                                                              heavy=heavy)],
                          capture_output=True, text=True, cwd=tmp_path, env=env)
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr.strip().splitlines()[-1] == "LOADED:", proc.stderr


@pytest.mark.parametrize("patched", [False, True], ids=["pristine", "patched"])
def test_status_of_this_pythons_own_sglang_says_the_same_and_loads_no_email(tmp_path, patched):
    """Plain `status` (no targeting option) of the SGLang this Python imports (here a real 0.5.17
    on PYTHONPATH): the fast path reads its METADATA itself, and says what the click CLI says."""
    site = project_venv_site(tmp_path)
    env = {**os.environ, "PATCHKIT_HOME": str(tmp_path / "home"), "PYTHONPATH": str(site)}
    # (The first run fills the home's cache of patch digests: a write, with tempfile.)
    subprocess.run([sys.executable, "-c", CLICK, "apply" if patched else "status"], check=True, capture_output=True,
                   cwd=tmp_path, env=env)
    runs = [subprocess.run([sys.executable, *argv], capture_output=True, text=True, cwd=tmp_path, env=env)
            for argv in (["-c", LOADED.format(args=["status"], heavy=NOT_ON_THE_FAST_PATH + NOT_IN_STATUS)],
                         ["-c", CLICK, "status"], ["-c", CLICK, "status", "--json"], ["-m", "patchkit", "status", "--json"])]
    fast, slow, slow_json, fast_json = runs
    assert fast.returncode == slow.returncode == 0, (fast.stderr, slow.stderr)
    assert fast.stdout == slow.stdout and fast.stdout.startswith(f"SGLang 0.5.17 at {site}\n")
    assert fast.stderr.strip().splitlines()[-1] == "LOADED:", fast.stderr
    assert (fast_json.returncode, fast_json.stdout, fast_json.stderr) == (slow_json.returncode, slow_json.stdout,
                                                                        slow_json.stderr)
    assert json.loads(fast_json.stdout)["sglang"] == {"version": "0.5.17", "path": str(site)}
