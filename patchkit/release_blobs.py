"""Which SGLang release a diff was made for: the `index <pre>..<post>` lines of a git diff name
the git blob hash of each file's pre-image; computed over the files of the releases in the wheel
cache (read straight from the zips, only the diff's files, never a download) they name the
release(s) whose files match, and give the pre-image's bytes for a per-unit merge elsewhere.
"""

from __future__ import annotations

import functools
import zipfile
from dataclasses import dataclass
from pathlib import Path

from packaging.version import InvalidVersion, Version

from patchkit import releases
from patchkit.constants import PACKAGE
from patchkit.unidiff import DiffPatchFile, FileDiff, git_blob_sha1


@dataclass(frozen=True)
class Match:
    version: str
    matched: int  # files of the diff whose pre-image blob is this release's file
    total: int  # files of the diff with a pre-image hash

    def to_dict(self) -> dict:
        return {"version": self.version, "matched": self.matched, "total": self.total}

    def __str__(self) -> str:
        return f"{self.version} ({self.matched}/{self.total} files)"


def cached_wheels() -> dict[str, Path]:
    """{version: wheel} of the releases in the wheel cache, oldest first."""
    found: dict[str, Path] = {}
    for wheel in sorted(releases.wheel_cache().glob(f"{PACKAGE}-*.whl")):
        version = wheel.name.split("-")[1]
        try:
            Version(version)
        except InvalidVersion:
            continue
        found.setdefault(version, wheel)
    return dict(sorted(found.items(), key=lambda item: Version(item[0])))


@functools.lru_cache(maxsize=64)
def _zip(wheel: Path, mtime: float) -> zipfile.ZipFile | None:
    try:
        return zipfile.ZipFile(wheel)
    except (OSError, zipfile.BadZipFile):
        return None


@functools.lru_cache(maxsize=4096)
def _blob_of(wheel: Path, mtime: float, rel: str) -> tuple[str, bytes] | None:
    archive = _zip(wheel, mtime)
    if archive is None:
        return None
    try:
        data = archive.read(rel)
    except KeyError:
        return None
    return git_blob_sha1(data), data


def _release_file(wheel: Path, rel: str) -> tuple[str, bytes] | None:
    try:
        mtime = wheel.stat().st_mtime
    except OSError:
        return None
    return _blob_of(wheel, mtime, rel)


def made_for(diff: DiffPatchFile) -> list[Match]:
    """The cached releases whose files match the diff's pre-image hashes, best first (most
    files matched, then the newest); empty when the diff has no hashes or none matches."""
    hashed = [f for f in diff.files if f.old_blob and f.old_path]
    if not hashed:
        return []
    found = []
    for version, wheel in cached_wheels().items():
        matched = 0
        for f in hashed:
            blob = _release_file(wheel, f.old_path)  # type: ignore[arg-type]
            if blob is not None and blob[0].startswith(f.old_blob):  # type: ignore[arg-type]
                matched += 1
        if matched:
            found.append(Match(version, matched, len(hashed)))
    best = max((m.matched for m in found), default=0)
    return sorted((m for m in found if m.matched == best), key=lambda m: Version(m.version), reverse=True)


def pre_image(file: FileDiff) -> bytes | None:
    """The bytes of the file the diff was made against, from a cached release whose file has
    the index line's pre-image hash; None when no cached release has it."""
    if not (file.old_blob and file.old_path):
        return None
    for wheel in reversed(cached_wheels().values()):
        blob = _release_file(wheel, file.old_path)
        if blob is not None and blob[0].startswith(file.old_blob):
            return blob[1]
    return None


def made_for_text(matches: list[dict]) -> str:
    """Where a diff patch was made, in words (list and matrix)."""
    if not matches:
        return "made for: no cached release has its pre-image files (index hashes); judged by its context lines"
    return "made for " + ", ".join(f"{m['version']} ({m['matched']}/{m['total']} files)" for m in matches)
