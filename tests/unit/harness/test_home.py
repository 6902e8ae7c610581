"""The tests never write into the real home: tests/conftest.py gives the session a home of its own
and puts pip's, SGLang's, torch inductor's, triton's and the XDG caches into the tests' cache folder, for
the tests and for every child process they start (which inherits the environment)."""

from __future__ import annotations

import json
import os
import pwd
import subprocess
import sys
from pathlib import Path

import pytest

from testing.releases import CACHE

REAL_HOME = Path(pwd.getpwuid(os.getuid()).pw_dir)


def inside(path: str, folder: Path) -> bool:
    return Path(path).resolve().is_relative_to(folder.resolve())


def test_a_child_process_sees_no_real_home():
    child = subprocess.run([sys.executable, "-c", (
        "import json, os, os.path; print(json.dumps({'home': os.path.expanduser('~'), "
        "'sglang': os.path.expanduser('~/.cache/sglang'), "
        "**{k: os.environ.get(k) for k in ('XDG_CACHE_HOME', 'PIP_CACHE_DIR', 'TORCHINDUCTOR_CACHE_DIR', 'SGLANG_CACHE_DIR')}}))")],
        capture_output=True, text=True, check=True)
    seen = json.loads(child.stdout)
    assert not inside(seen["home"], REAL_HOME) and not inside(seen["sglang"], REAL_HOME), seen
    for name in ("XDG_CACHE_HOME", "PIP_CACHE_DIR", "TORCHINDUCTOR_CACHE_DIR", "SGLANG_CACHE_DIR"):
        assert seen[name] and inside(seen[name], CACHE), (name, seen[name])


def test_pip_caches_in_the_tests_cache():
    """pip's own answer (its wheel cache was ~/.cache/pip/wheels)."""
    child = subprocess.run([sys.executable, "-m", "pip", "cache", "dir"], capture_output=True, text=True, check=True)
    assert inside(child.stdout.strip(), CACHE) and not inside(child.stdout.strip(), REAL_HOME), child.stdout


def test_temporary_folders_are_under_the_tests_cache(tmp_path, request):
    """Issue 43.5: the suite's temporary folders (a server test's throwaway venvs, released trees,
    the session's home) went into pytest's shared default, /tmp/pytest-of-USER. They go under the
    cache the suite owns (`PATCHKIT_TEST_CACHE/tmp`), unless the run names its own (--basetemp, or
    PYTEST_DEBUG_TEMPROOT set before pytest starts)."""
    root = CACHE / "tmp"
    worker = getattr(request.config, "workerinput", None)  # under xdist: the controller's command line
    argv = worker["mainargv"] if worker else request.config.invocation_params.args
    if any(str(arg).startswith("--basetemp") for arg in argv) or \
            os.environ.get("PYTEST_DEBUG_TEMPROOT", str(root)) != str(root):
        pytest.skip("this run names its own temporary folder")
    assert inside(str(tmp_path), root) and inside(os.environ["HOME"], root), (tmp_path, os.environ["HOME"])
