"""The SGLang releases the package index has, post releases included (0.5.12.post1,
0.5.15.post1, ...): asked of pip (`pip index versions sglang`) once a day and kept in
PATCHKIT_HOME/index-versions.json; where the index cannot be asked, the releases patchkit has
manifests for and the wheels in the cache.
"""

from __future__ import annotations

import json
import sys
import time

from packaging.version import InvalidVersion, Version

from patchkit.base.constants import PACKAGE
from patchkit.base.home import home
from patchkit.base.util import atomic_write
from patchkit.releases import pristine

KEPT_FOR = 24 * 3600.0  # seconds: a new release is heard of the next day at the latest
_FILE = "index-versions.json"
_LIMIT = 1 << 20  # bytes: the list of a package's versions is a few kB


def _parse(text: str) -> list[str]:
    """pip's `Available versions: a, b, ...` line as versions, oldest first."""
    for line in text.splitlines():
        if line.startswith("Available versions:"):
            found = []
            for word in line.split(":", 1)[1].split(","):
                try:
                    found.append(Version(word.strip()))
                except InvalidVersion:
                    continue
            return [str(v) for v in sorted(set(found))]
    return []


def _asked() -> list[str]:
    import subprocess  # here: a status never asks the index

    try:
        done = subprocess.run([sys.executable, "-m", "pip", "index", "versions", PACKAGE, "--disable-pip-version-check"],
                              capture_output=True, text=True, timeout=60, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return []
    return _parse(done.stdout) if done.returncode == 0 else []


def _known() -> list[str]:
    """What patchkit knows without the index: its manifests and the cached wheels."""
    from patchkit.releases import manifest

    found = {Version(v) for v in manifest.available()}
    for wheel in pristine.wheel_cache().glob(f"{PACKAGE}-*.whl"):
        version = pristine.wheel_version(wheel)
        if version is not None:
            found.add(version)
    return [str(v) for v in sorted(found)]


def versions() -> list[str]:
    """Every release of the index, oldest first (post releases included); where the index cannot be
    asked, the releases patchkit knows (`listed` tells the two apart)."""
    return listed() or _known()


def listed() -> list[str]:
    """The releases the index lists (its answer of the last day, else asked now); [] where it cannot be asked."""
    path = home() / _FILE
    try:
        with open(path, "rb") as handle:
            saved = json.loads(handle.read(_LIMIT))
        if time.time() - float(saved["at"]) < KEPT_FOR and isinstance(saved["versions"], list) and saved["versions"]:
            return [str(v) for v in saved["versions"]]
    except (OSError, ValueError, KeyError, TypeError):
        pass
    asked = _asked()
    if not asked:
        return []
    try:  # a cache: a home that cannot be written only costs the next run the same question
        atomic_write(path, json.dumps({"at": time.time(), "versions": asked}).encode("utf-8"), 0o644)
    except OSError:
        pass
    return asked


def in_range(first: str, last: str) -> list[str]:
    """The index's releases from `first` to `last` (post releases of `last` included), oldest first."""
    low, high = Version(first), Version(last)
    return [v for v in versions() if low <= Version(v) and Version(Version(v).base_version) <= high]
