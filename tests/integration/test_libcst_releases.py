"""The private libcst names the patch API builds on (patchkit/authoring/libcst_private.py) hold on
every libcst release pyproject.toml allows (issue 34): the contract test and the rest of the patch
API's unit tests (tests/unit/authoring/) run in a child on each minor release of the range, its
newest patch release, installed from the package index once into the tests' cache."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from testing.releases import CACHE

pytestmark = [pytest.mark.integration]
REPO = Path(__file__).resolve().parents[2]
# The newest release of each minor version in the allowed range (checked against pyproject.toml below).
RELEASES = ("1.1.0", "1.2.0", "1.3.1", "1.4.0", "1.5.1", "1.6.0", "1.7.0", "1.8.6", "1.9.0")


def allowed_range() -> tuple[tuple[int, int], tuple[int, int]]:
    """(lowest allowed minor, first minor not allowed) from pyproject.toml's "libcst>=A.B,<C.D"."""
    found = re.search(r'"libcst>=(\d+)\.(\d+),<(\d+)\.(\d+)"', (REPO / "pyproject.toml").read_text())
    assert found, "pyproject.toml names libcst's range as libcst>=A.B,<C.D"
    a, b, c, d = map(int, found.groups())
    return (a, b), (c, d)


def test_the_releases_cover_the_allowed_range():
    (low, high) = allowed_range()
    minors = [tuple(map(int, release.split(".")[:2])) for release in RELEASES]
    assert minors[0] == low and minors == [(low[0], n) for n in range(low[1], high[1])], (minors, low, high)


def installed(release: str) -> Path:
    folder = CACHE / "libcst" / release
    if not (folder / "libcst").is_dir():
        work = folder.with_name(f"{release}.partial-{os.getpid()}")
        shutil.rmtree(work, ignore_errors=True)
        subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--target", str(work), f"libcst=={release}"],
                       check=True, capture_output=True, text=True)
        try:
            work.rename(folder)
        except OSError:  # another run installed it first
            shutil.rmtree(work, ignore_errors=True)
    return folder


@pytest.mark.parametrize("release", RELEASES)
def test_the_patch_api_on_each_allowed_libcst_release(release):
    folder = installed(release)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(folder), os.environ.get("PYTHONPATH")]))}
    version = subprocess.run([sys.executable, "-c", "import importlib.metadata as m; print(m.version('libcst'))"],
                             env=env, capture_output=True, text=True, check=True, cwd=REPO).stdout.strip()
    assert version == release  # the child imports this release, not the venv's own
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests/unit/authoring"],
                          env=env, capture_output=True, text=True, cwd=REPO)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    assert "passed" in proc.stdout and " failed" not in proc.stdout
