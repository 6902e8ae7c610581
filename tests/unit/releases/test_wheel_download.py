"""A release's wheel lands in patchkit's wheel cache whole, or not at all: pip downloads into a
folder of its own and the complete wheel is renamed into the cache (pip copies into its `-d`
folder in place: a run reading the cache meanwhile, or after a kill mid-copy, found a truncated
wheel under the final name). Two racing processes download from a real local file index
(`PIP_FIND_LINKS`, no package index: the tier stays offline) a wheel this test builds."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import time
import zipfile
from pathlib import Path

import pytest

from patchkit.releases import pristine as releases

VERSION = "0.9.1"
NAME = f"sglang-{VERSION}-py3-none-any.whl"
BIG = 48 * 1024 * 1024  # copying it takes long enough for a reader to see a partial copy
REPO = Path(__file__).resolve().parents[3]
DOWNLOAD = "import sys; from patchkit.releases import pristine; print(pristine.download(sys.argv[1]))"


def _index(folder: Path, size: int) -> Path:
    """A folder pip reads as an index (find-links) holding one SGLang wheel of about `size` bytes."""
    folder.mkdir()
    files = {
        "sglang/__init__.py": b"__version__ = '" + VERSION.encode() + b"'\n",
        "sglang/blob.bin": os.urandom(size),
        f"sglang-{VERSION}.dist-info/METADATA": f"Metadata-Version: 2.1\nName: sglang\nVersion: {VERSION}\n".encode(),
        f"sglang-{VERSION}.dist-info/WHEEL": b"Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
    }
    record = "".join(f"{name},sha256={hashlib.sha256(data).hexdigest()},{len(data)}\n" for name, data in files.items())
    with zipfile.ZipFile(folder / NAME, "w", zipfile.ZIP_STORED) as wheel:
        for name, data in files.items():
            wheel.writestr(name, data)
        wheel.writestr(f"sglang-{VERSION}.dist-info/RECORD", record + f"sglang-{VERSION}.dist-info/RECORD,,\n")
    return folder / NAME


@pytest.fixture
def local_index(tmp_path, monkeypatch, request) -> Path:
    """The wheel pip finds (no package index); big where the test needs a long copy."""
    wheel = _index(tmp_path / "index", BIG if request.node.get_closest_marker("slow") else 4096)
    monkeypatch.setenv("PIP_FIND_LINKS", str(wheel.parent))
    return wheel


def _start() -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", DOWNLOAD, VERSION], cwd=REPO, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)


@pytest.mark.slow  # a 48 MiB wheel: the copy a reader could catch half-done
def test_two_racing_downloads_never_show_a_partial_wheel(local_index):
    size = local_index.stat().st_size
    cache = releases.wheel_cache()
    runs = [_start(), _start()]
    partial: set[int] = set()
    while any(run.poll() is None for run in runs):
        for wheel in cache.glob("sglang-*.whl") if cache.is_dir() else ():
            try:
                seen = wheel.stat().st_size
            except FileNotFoundError:
                continue
            if seen != size:
                partial.add(seen)
        time.sleep(0.001)
    outs = [run.communicate() for run in runs]
    assert [run.returncode for run in runs] == [0, 0], [err for _, err in outs]
    assert partial == set(), f"a reader of the cache saw a wheel of {sorted(partial)} bytes, not {size}"
    assert {out.strip() for out, _ in outs} == {str(cache / NAME)}
    assert (cache / NAME).read_bytes() == local_index.read_bytes()
    assert sorted(path.name for path in cache.iterdir()) == [releases.CACHE_LOCK, NAME]


def test_a_killed_runs_download_folder_is_never_taken_for_the_wheel(local_index):
    """What a kill mid-download leaves is a folder of its own, never a wheel name in the cache:
    the next download ignores it, fetches the whole wheel and removes the leftover."""
    cache = releases.wheel_cache()
    left = cache / ".download-killed"
    left.mkdir(parents=True)
    (left / NAME).write_bytes(local_index.read_bytes()[:1000])
    wheel = releases.download(VERSION)
    assert wheel == cache / NAME and wheel.read_bytes() == local_index.read_bytes()
    assert not left.exists()


def test_the_download_line_goes_to_the_callers_progress_and_the_library_prints_nothing(local_index, capfd):
    """releases returns data and reports through the caller's `progress` (22.4): the command passes
    output.progress; without one a download writes nothing of patchkit's to stdout or stderr."""
    lines: list[str] = []
    wheel = releases.download(VERSION, lines.append)
    assert wheel == releases.wheel_cache() / NAME
    assert len(lines) == 1 and lines[0].startswith(f"downloaded SGLang {VERSION}: {NAME}, ") and lines[0].endswith(", done")
    wheel.unlink()
    capfd.readouterr()
    assert releases.download(VERSION) == wheel
    out, err = capfd.readouterr()
    assert "downloaded SGLang" not in out + err
