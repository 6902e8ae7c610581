"""Pristine SGLang releases from the package index: download once (cached), install anywhere."""

from __future__ import annotations

import contextlib
import fcntl
import functools
import os
import shutil
import sys
import time
import zipfile
import zlib
from pathlib import Path
from typing import Callable, Iterator

from packaging.version import InvalidVersion, Version

from patchkit.base.constants import PACKAGE
from patchkit.base.home import home
from patchkit.base.errors import FetchError, PatchkitError
from patchkit.base.util import dies_with_parent, run


# Where a download's one line goes ("downloaded SGLang V: WHEEL, N MB in T s, done"): the command
# passes output.progress; the library itself prints nothing.
Progress = Callable[[str], None]


def quiet(line: str) -> None:
    pass


def wheel_cache() -> Path:
    return home() / "wheels"


def _spelled(name: str) -> Version | None:
    try:
        return Version(name)
    except InvalidVersion:
        return None


def wheel_version(wheel: Path) -> Version | None:
    """The version a wheel's file name declares (`sglang-0.5.17-cp311-...whl` -> 0.5.17)."""
    from packaging.utils import InvalidWheelFilename, parse_wheel_filename

    try:
        return parse_wheel_filename(wheel.name)[1]
    except (InvalidWheelFilename, InvalidVersion):
        return None


CACHE_LOCK = ".lock"
CACHE_LOCK_TIMEOUT = 1800.0  # a download of a release over a slow link; past it, another run is stuck


@contextlib.contextmanager
def cache_locked(folder: Path, what: str) -> Iterator[None]:
    """Serialize the runs that fill one cache folder (flock on `folder/.lock`): two runs on a cold
    cache would otherwise download into, or rename, the same files under each other. Bounded: a
    holder stuck longer than CACHE_LOCK_TIMEOUT makes the waiter give up (exit 3, naming it)."""
    folder.mkdir(parents=True, exist_ok=True)
    fd = os.open(folder / CACHE_LOCK, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, 0o644)
    try:
        deadline = time.monotonic() + CACHE_LOCK_TIMEOUT
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    raise FetchError(f"another patchkit run has held {folder / CACHE_LOCK} for "
                                     f"{CACHE_LOCK_TIMEOUT:.0f} s while making {what}; gave up") from None
                time.sleep(0.1)
        yield
    finally:
        os.close(fd)  # drops the lock; the file stays (removing it would race with a waiter)


def _cached_wheel(version: str) -> Path | None:
    # Matched as versions, not as text: `0.5.17.0` and `v0.5.17` are the wheel of 0.5.17.
    wanted = Version(version)
    for wheel in sorted(wheel_cache().glob(f"{PACKAGE}-*.whl")):
        if wheel_version(wheel) == wanted:
            return wheel
    return None


def published(version: str, progress: Progress = quiet) -> str:
    """The spelling of a release as its wheel names it (`0.5.17.0` -> `0.5.17`): the name of
    every file or folder patchkit keeps for it (downloads it if it is not in the cache)."""
    return str(wheel_version(download(version, progress)))


def download(version: str, progress: Progress = quiet) -> Path:
    """The pristine wheel of an SGLang release, from the cache or the package index."""
    try:
        Version(version)
    except InvalidVersion:
        raise FetchError(f"{version!r} is not a valid SGLang version") from None
    cached = _cached_wheel(version)
    if cached is not None:
        return cached
    with cache_locked(wheel_cache(), f"the wheel of SGLang {version}"):
        return _cached_wheel(version) or _download(version, progress)  # another run may have fetched it meanwhile


_DOWNLOADING = ".download-"  # one download's own folder in the cache (the same file system: renamed atomically)


def _download(version: str, progress: Progress) -> Path:
    """pip downloads into a folder of its own, and the complete wheel is renamed into the cache:
    a wheel name there always holds the whole wheel (pip copies into its `-d` folder in place,
    so a run reading the cache unlocked, or one after a kill mid-copy, read a truncated wheel)."""
    import subprocess  # here: a status never downloads
    import tempfile

    cache = wheel_cache()
    for left in cache.glob(f"{_DOWNLOADING}*"):  # a killed run's: the cache lock is ours, nobody else downloads
        shutil.rmtree(left, ignore_errors=True)
    staging = Path(tempfile.mkdtemp(prefix=_DOWNLOADING, dir=cache))
    try:
        argv = [sys.executable, "-m", "pip", "download", "--no-deps", "--disable-pip-version-check",
                "--only-binary=:all:", "-d", str(staging), f"{PACKAGE}=={version}"]
        what = f"cannot download SGLang {version} from the package index"
        # One line per download on stderr, on a terminal or not (CI logs show what a slow run did).
        started = time.monotonic()
        if sys.stderr.isatty():
            # On a terminal, pip's own progress bar shows the download.
            if subprocess.run(argv, stdout=sys.stderr, check=False, preexec_fn=dies_with_parent()).returncode != 0:
                raise FetchError(f"{what} (pip's message above)")
        else:
            try:
                run(argv, what=what)
            except PatchkitError as exc:
                raise FetchError(str(exc)) from None
        wanted = Version(version)
        found = [wheel for wheel in sorted(staging.glob(f"{PACKAGE}-*.whl")) if wheel_version(wheel) == wanted]
        if not found:
            raise FetchError(f"pip downloaded no wheel for SGLang {version}")
        with open(found[0], "rb") as handle:
            os.fsync(handle.fileno())
        wheel = cache / found[0].name
        os.replace(found[0], wheel)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    size = wheel.stat().st_size / 1e6
    progress(f"downloaded SGLang {version}: {wheel.name}, {size:.1f} MB in {time.monotonic() - started:.1f} s, done")
    return wheel


def install(wheel: Path, dest: Path) -> None:
    """Install a wheel, without its dependencies, into a plain folder."""
    dest.mkdir(parents=True, exist_ok=True)
    try:
        run(
            [sys.executable, "-m", "pip", "install", "--no-deps", "--no-compile",
             "--disable-pip-version-check", "--target", str(dest), str(wheel)],
            what=f"cannot install {wheel.name} into {dest}",
        )
    except PatchkitError as exc:
        raise FetchError(str(exc)) from None


def cached_tree(version: str) -> Path | None:
    """The pristine install of a release already in the cache (made by `pristine_tree`), else None: nothing is
    downloaded or unpacked."""
    releases = home() / "releases"
    for folder in sorted(releases.iterdir()) if releases.is_dir() else ():
        if _spelled(folder.name) == Version(version) and (folder / PACKAGE / "__init__.py").is_file():
            return folder
    return None


def pristine_tree(version: str, progress: Progress = quiet) -> Path:
    """A cached folder holding the pristine install of a release (for manifests and tracking)."""
    found = cached_tree(version)
    if found is not None:
        return found
    releases = home() / "releases"
    folder = releases / published(version, progress)
    if (folder / PACKAGE / "__init__.py").is_file():
        return folder
    wheel = download(version, progress)
    with cache_locked(releases, f"the pristine tree of SGLang {version}"):
        if not (folder / PACKAGE / "__init__.py").is_file():  # not made by another run meanwhile
            staging = folder.with_name(folder.name + ".partial")
            shutil.rmtree(staging, ignore_errors=True)
            install(wheel, staging)
            shutil.rmtree(folder, ignore_errors=True)
            staging.rename(folder)
    return folder


def open_wheel(wheel: Path) -> zipfile.ZipFile:
    """A cached wheel's zip, opened once per process (reading its directory costs ~0.1 s): the
    release readers share it (WheelSource, release_blobs)."""
    return _open_zip(wheel, wheel.stat().st_mtime_ns)


@functools.lru_cache(maxsize=64)
def _open_zip(wheel: Path, mtime_ns: int) -> zipfile.ZipFile:
    return zipfile.ZipFile(wheel)


class WheelSource:
    """A release read straight from its cached wheel (a zip): no unpacking, only the files asked
    for are inflated. Has what `upstream` and `manifest_describe.describe` need: `read`, `version`, `label`,
    `python_files`, and each file's CRC-32 from the zip's directory (for the verdict cache)."""

    def __init__(self, version: str, progress: Progress = quiet) -> None:
        self.wheel = download(version, progress)
        self.version = str(wheel_version(self.wheel))  # as the release spells itself (0.5.17.0 -> 0.5.17)
        try:
            self._zip = open_wheel(self.wheel)
        except (OSError, zipfile.BadZipFile, zlib.error, EOFError) as exc:
            raise FetchError(f"cannot read {self.wheel}: {exc}; remove it to download it again") from None
        self._entries = {info.filename: info for info in self._zip.infolist() if not info.is_dir()}

    @property
    def label(self) -> str:
        return self.version

    def read(self, rel: str) -> bytes | None:
        info = self._entries.get(rel)
        if info is None:
            return None
        try:
            return self._zip.read(info)
        except (zipfile.BadZipFile, zlib.error, EOFError, NotImplementedError) as exc:
            # A damaged cached download: refused, naming it, never judged from half its bytes.
            raise FetchError(f"{self.wheel}: its member {rel} is corrupt ({exc}); remove the wheel so that it is "
                             "downloaded again") from None

    def python_files(self) -> list[str]:
        return sorted(name for name in self._entries if name.startswith(PACKAGE + "/") and name.endswith(".py"))

    def package_files(self) -> list[str]:
        """Every file of the package (not only the Python files)."""
        return sorted(name for name in self._entries if name.startswith(PACKAGE + "/"))

    def fingerprint(self, rel: str) -> str:
        """A cheap identity of a file's bytes (CRC-32 and size from the zip directory; no inflating)."""
        info = self._entries.get(rel)
        return "absent" if info is None else f"{info.CRC:08x}:{info.file_size}"

    def listing_fingerprint(self) -> str:
        """The identity of the whole package (every file's name and fingerprint)."""
        import hashlib

        digest = hashlib.sha256()
        for name in self.python_files():
            digest.update(f"{name}={self.fingerprint(name)}\n".encode())
        return digest.hexdigest()
