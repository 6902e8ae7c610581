from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

import pytest

import testing.releases
from testing.releases import CACHE, copy_minimal, copy_release

# Tests on real releases, the behaviour venv or a GPU are `slow`: `pytest -m "not slow"` is the
# inner loop (the unit tests of the core and the before/after tests of every patch).
_SLOW_MARKS = ("integration", "behaviour", "gpu", "faults", "server")


# What the tests and every child they start (pip, SGLang, torch, git) would otherwise write under
# the real home (~/.cache/pip/wheels, ~/.cache/sglang/inductor, ...): a home of the session's own,
# and the caches worth keeping between runs in the tests' cache folder.
_CACHE_DIRS = {"XDG_CACHE_HOME": "xdg-cache", "PIP_CACHE_DIR": "pip", "TORCHINDUCTOR_CACHE_DIR": "inductor",
               "TRITON_CACHE_DIR": "triton", "SGLANG_CACHE_DIR": "sglang"}
_SESSION_HOME: list[str] = []


def pytest_configure(config):
    # pytest's temporary folders (tmp_path: released trees, the server tier's throwaway venvs) and the
    # session's home go under the cache the suite owns, not /tmp/pytest-of-USER; a run's own
    # --basetemp or PYTEST_DEBUG_TEMPROOT (pytest's setting of that root) wins.
    temp_root = Path(os.environ.setdefault("PYTEST_DEBUG_TEMPROOT", str(CACHE / "tmp")))
    temp_root.mkdir(parents=True, exist_ok=True)
    real = Path(os.path.expanduser("~"))
    home = tempfile.mkdtemp(prefix="patchkit-test-home-", dir=temp_root)
    _SESSION_HOME.append(home)
    os.environ["HOME"] = home
    if "PYENV_ROOT" not in os.environ and (real / ".pyenv").is_dir():
        os.environ["PYENV_ROOT"] = str(real / ".pyenv")  # pyenv's shims on PATH find it through $HOME
    for name, folder in _CACHE_DIRS.items():
        os.environ[name] = str(CACHE / folder)


def pytest_unconfigure(config):
    for home in _SESSION_HOME:
        shutil.rmtree(home, ignore_errors=True)


def pytest_collection_modifyitems(config, items):
    for item in items:
        if any(item.get_closest_marker(name) for name in _SLOW_MARKS):
            item.add_marker(pytest.mark.slow)


def _local(address) -> bool:
    if not isinstance(address, tuple):
        return True  # AF_UNIX
    import ipaddress

    host = address[0]
    try:
        return host == "localhost" or ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False  # a host name: would be looked up


@pytest.fixture(autouse=True)
def offline_unless_slow(request, monkeypatch):
    """The fast tier (`-m "not slow"`) is offline: a test there that reaches for the network (a
    socket to anything but this machine, pip asking an index) fails at once here too, not only on
    a machine without a network. Slow tests may download."""
    if request.node.get_closest_marker("slow"):
        return
    import socket

    connect = socket.socket.connect

    def guarded(sock, address):
        if not _local(address):
            raise AssertionError(f"the fast tier is offline: {request.node.nodeid} connects to {address!r} "
                                 "(mark it integration, or make what it needs in the test)")
        return connect(sock, address)

    monkeypatch.setattr(socket.socket, "connect", guarded)
    monkeypatch.setenv("PIP_NO_INDEX", "1")  # and pip, in any child: no index
    monkeypatch.setattr(testing.releases, "FAST_TIER_TEST", request.node.nodeid)  # nor a release, cached or not


@pytest.fixture(autouse=True)
def patchkit_home(tmp_path_factory, monkeypatch) -> Path:
    """Each test gets its own PATCHKIT_HOME (logs, caches); the real home stays untouched."""
    home = tmp_path_factory.mktemp("patchkit-home")
    monkeypatch.setenv("PATCHKIT_HOME", str(home))
    return home


@pytest.fixture(scope="session")
def patchkit_wheel(tmp_path_factory) -> Path:
    """patchkit as a wheel, as a user builds it (`pip wheel --no-deps` of this checkout, its build
    dependencies from the index, cached): built once per test run for every test that needs one."""
    import fcntl
    import subprocess
    import sys

    from testing.releases import REPO

    # Under xdist each worker has a session of its own: the wheel goes into the folder above the
    # workers' temporary folders, built by the first worker that needs it, under a lock.
    shared = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        shared = shared.parent
    out = shared / "patchkit-wheel"
    with open(shared / "patchkit-wheel.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not out.is_dir():
            staging = Path(tempfile.mkdtemp(prefix="patchkit-wheel-", dir=shared))
            subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(staging), str(REPO)],
                           check=True, capture_output=True)
            staging.rename(out)
    (wheel,) = out.glob("*.whl")
    return wheel


@pytest.fixture
def release(tmp_path):
    """release("0.5.17") -> a private copy of what patchkit touches in that real SGLang release:
    the files its manifest names, `sglang/__init__.py`, `sglang/version.py` and the dist-info
    (testing.releases.copy_minimal; `extra=` adds files a test needs). A test that needs the
    whole release (importing SGLang's modules, an image, an editable install) asks for it:
    release("0.5.17", whole=True)."""

    def make(version: str, *, whole: bool = False, extra: tuple[str, ...] = ()) -> Path:
        dest = tmp_path / f"sglang-{version}"
        if whole:
            return copy_release(version, dest)
        return copy_minimal(version, dest, extra)

    return make
