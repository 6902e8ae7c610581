"""Pristine SGLang releases from the package index: download once (cached), install anywhere."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

from packaging.version import InvalidVersion, Version

from patchkit.constants import ENV_HOME, PACKAGE
from patchkit.errors import FetchError, PatchkitError
from patchkit.util import run


def home() -> Path:
    return Path(os.environ.get(ENV_HOME) or Path.home() / ".cache" / "patchkit")


def wheel_cache() -> Path:
    return home() / "wheels"


def _cached_wheel(version: str) -> Path | None:
    for wheel in sorted(wheel_cache().glob(f"{PACKAGE}-{version}-*.whl")):
        return wheel
    return None


def download(version: str) -> Path:
    """The pristine wheel of an SGLang release, from the cache or the package index."""
    try:
        Version(version)
    except InvalidVersion:
        raise FetchError(f"{version!r} is not a valid SGLang version") from None
    cached = _cached_wheel(version)
    if cached is not None:
        return cached
    wheel_cache().mkdir(parents=True, exist_ok=True)
    argv = [sys.executable, "-m", "pip", "download", "--no-deps", "--disable-pip-version-check",
            "--only-binary=:all:", "-d", str(wheel_cache()), f"{PACKAGE}=={version}"]
    what = f"cannot download SGLang {version} from the package index"
    if sys.stderr.isatty():
        # On a terminal, pip's own progress bar shows the download.
        if subprocess.run(argv, stdout=sys.stderr, check=False).returncode != 0:
            raise FetchError(f"{what} (pip's message above)")
    else:
        try:
            run(argv, what=what)
        except PatchkitError as exc:
            raise FetchError(str(exc)) from None
    wheel = _cached_wheel(version)
    if wheel is None:
        raise FetchError(f"pip downloaded no wheel for SGLang {version}")
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


def pristine_tree(version: str) -> Path:
    """A cached folder holding the pristine install of a release (for manifests and tracking)."""
    folder = home() / "releases" / version
    if not (folder / PACKAGE / "__init__.py").is_file():
        staging = folder.with_name(folder.name + ".partial")
        shutil.rmtree(staging, ignore_errors=True)
        install(download(version), staging)
        shutil.rmtree(folder, ignore_errors=True)
        staging.rename(folder)
    return folder
