"""`image dockerfile` run by an installed patchkit (the README's `pip install .`, not a checkout):
the running patchkit writes its own wheel into the build context from its installed files, as its
RECORD lists them (issue 37.4: it was exit 2, "give its wheel with --wheel"). The wheel installs
with pip and gives back exactly the installed files."""

from __future__ import annotations

import base64
import csv
import hashlib
import io
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration  # patchkit's wheel is built with its build dependencies from the index

WHEEL = "sglang_patchkit-0.1.0-py3-none-any.whl"


def files_under(folder: Path) -> dict[str, bytes]:
    return {p.relative_to(folder).as_posix(): p.read_bytes() for p in sorted(folder.rglob("*"))
            if p.is_file() and "__pycache__" not in p.parts}


@pytest.fixture(scope="module")
def installed(patchkit_wheel, tmp_path_factory) -> Path:
    """patchkit installed from its wheel into a plain folder (pip --target), as `pip install .` installs it:
    the package and a dist-info whose RECORD lists every file."""
    site = tmp_path_factory.mktemp("own-wheel") / "site"
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-compile", "--target", str(site),
                    str(patchkit_wheel)], check=True, capture_output=True)
    return site


def patchkit_from(site: Path, *args: str | Path, cwd: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(site)}
    return subprocess.run([sys.executable, "-m", "patchkit", *map(str, args)], capture_output=True, text=True,
                          env=env, cwd=cwd, timeout=300)


def test_an_installed_patchkit_writes_its_own_wheel(installed, tmp_path):
    context = tmp_path / "context"
    context.mkdir()
    result = patchkit_from(installed, "image", "dockerfile", "--base", "b", "--target", "0.5.17", "-o",
                           context / "Dockerfile", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert WHEEL in result.stdout and (context / "Dockerfile").is_file()
    wheel = context / WHEEL
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
        record = archive.read("sglang_patchkit-0.1.0.dist-info/RECORD").decode()
        for name, digest, size in csv.reader(io.StringIO(record)):
            if name.endswith("/RECORD"):
                continue
            data = archive.read(name)
            assert digest == "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
            assert int(size) == len(data), name
        assert sorted(names) == sorted(row[0] for row in csv.reader(io.StringIO(record)))
        assert "bin/patchkit" not in record and "../" not in record  # only what lives in site-packages (pip makes the script)
        assert not any(name.endswith(".pyc") for name in names)
    again = tmp_path / "again"
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-compile", "--target", str(again),
                    str(wheel)], check=True, capture_output=True)
    assert files_under(again / "patchkit") == files_under(installed / "patchkit")  # the running patchkit, byte for byte
    (info,) = again.glob("sglang_patchkit-*.dist-info")
    assert (info / "entry_points.txt").read_bytes() == (installed / info.name / "entry_points.txt").read_bytes()
    assert "patchkit = " in (info / "entry_points.txt").read_text()  # pip makes the `patchkit` command from it
    second = tmp_path / "second"
    second.mkdir()
    assert patchkit_from(installed, "image", "dockerfile", "--base", "b", "--target", "0.5.17", "-o",
                         second / "Dockerfile", cwd=tmp_path).returncode == 0
    assert (second / WHEEL).read_bytes() == wheel.read_bytes()  # the same install, the same wheel: a build cache holds
