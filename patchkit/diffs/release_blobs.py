"""Which SGLang release a diff was made for: the `index <pre>..<post>` lines of a git diff name
the git blob hash of each file's pre-image; computed over the files of the releases in the wheel
cache (read straight from the zips, only the diff's files, never a download) they name the
release(s) whose files match, and give the pre-image's bytes for a per-unit merge elsewhere.
"""

from __future__ import annotations

import json
import zipfile
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from packaging.version import InvalidVersion, Version

from patchkit.releases import pristine as releases
from patchkit.base.constants import PACKAGE
from patchkit.base.errors import EnvironmentFailure, PatchkitError
from patchkit.diffs.unidiff import DiffPatchFile, FileDiff, git_blob_sha1
from patchkit.base.util import atomic_write, read_regular


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


def _zip(wheel: Path) -> zipfile.ZipFile | None:
    try:
        return releases.open_wheel(wheel)
    except (OSError, zipfile.BadZipFile, zlib.error, EOFError):
        return None


INDEX_LIMIT = 64 << 20  # bytes: an index holds one hash per file of a wheel asked for


def _index_file(wheel: Path) -> Path:
    return releases.home() / "blobs" / (wheel.name + ".json")


_indexes: dict[Path, tuple[str, dict[str, str | None]]] = {}  # wheel -> (stamp, {file: blob hash or None})


def _blobs(wheel: Path, rels: list[str]) -> dict[str, str | None]:
    """{file: git blob hash, None when the wheel lacks it} for `rels`, from the home's blobs/
    index of that wheel (a few ms), adding the files it does not hold yet: those are read from
    the zip (opening one and reading its directory costs ~0.1 s a wheel), once per wheel and file."""
    try:
        info = wheel.stat()
    except OSError:
        return {}
    stamp = f"{info.st_size}:{info.st_mtime_ns}"
    path = _index_file(wheel)
    if _indexes.get(wheel, ("",))[0] != stamp:
        try:
            # Never blocks: a FIFO or device there is a cache that does not validate, rebuilt.
            saved = json.loads(read_regular(path, INDEX_LIMIT))
            known = saved["blobs"] if saved.get("wheel") == stamp and isinstance(saved.get("blobs"), dict) else {}
        except (OSError, ValueError, KeyError, AttributeError, RecursionError, EnvironmentFailure):
            known = {}
        _indexes[wheel] = (stamp, known)
    known = _indexes[wheel][1]
    missing = [rel for rel in rels if rel not in known]
    if missing:
        archive = _zip(wheel)
        if archive is None:
            return {}
        for rel in missing:
            try:
                known[rel] = git_blob_sha1(archive.read(rel))
            except KeyError:
                known[rel] = None
        try:  # a cache: a home that cannot be written only costs the next run the same work
            atomic_write(path, json.dumps({"wheel": stamp, "blobs": known}).encode("utf-8"), 0o644)
        except OSError:
            pass
    return {rel: known[rel] for rel in rels}


def _read(wheel: Path, rel: str) -> bytes | None:
    archive = _zip(wheel)
    if archive is None:
        return None
    try:
        return archive.read(rel)
    except KeyError:
        return None


def made_for(diff: DiffPatchFile) -> list[Match]:
    """The cached releases whose files match the diff's pre-image hashes, best first (most
    files matched, then the newest); empty when the diff has no hashes or none matches."""
    hashed = [f for f in diff.files if f.old_blob and f.old_path]
    if not hashed:
        return []
    found = []
    for version, wheel in cached_wheels().items():
        blobs = _blobs(wheel, [f.old_path for f in hashed])  # type: ignore[misc]
        matched = 0
        for f in hashed:
            blob = blobs.get(f.old_path)  # type: ignore[arg-type]
            if blob is not None and blob.startswith(f.old_blob):  # type: ignore[arg-type]
                matched += 1
        if matched:
            found.append(Match(version, matched, len(hashed)))
    best = max((m.matched for m in found), default=0)
    return sorted((m for m in found if m.matched == best), key=lambda m: Version(m.version), reverse=True)


def made_for_a_release(diff: DiffPatchFile) -> bool:
    """Whether one cached release holds every file's pre-image (the diff was made on it)."""
    best = made_for(diff)
    return bool(best) and best[0].matched == best[0].total


def on_lower_tree(upper: DiffPatchFile, lower: DiffPatchFile, shared: list[str]) -> bool:
    """Whether `upper` was made on the tree `lower` leaves: its files other than `shared` (those
    whose pre-image is `lower`'s post-image) hold, as pre-image, the files of a release `lower`
    was made for (every file of it matched). For `stacks.stacked_on`."""
    rest = [f for f in upper.files if f.old_path and f.old_blob and f.path not in shared]
    wheels = cached_wheels()
    for match in made_for(lower):
        if match.matched != match.total or match.version not in wheels:
            continue
        blobs = _blobs(wheels[match.version], [f.old_path for f in rest])  # type: ignore[misc]
        if all((blob := blobs.get(f.old_path)) is not None and blob.startswith(f.old_blob)  # type: ignore[arg-type]
               for f in rest):
            return True
    return False


def name_base(diff: DiffPatchFile, candidates: list[str], fetch: Callable[[str], object],
              near_to: str | None = None) -> list[Match]:
    """`made_for`, fetching (`fetch(version)`: download its wheel into the cache) releases of
    `candidates` (the index's, post releases included, oldest first) that are not cached, until one
    holds every file's pre-image, or until the best match is the best there is around it (the
    candidates either side of its releases are tried and match fewer files: a file whose
    pre-image no release holds, a local edit, never fetches every release): nearest the best
    partial match first (a diff made for 0.5.15.post1 matches most of 0.5.15's and 0.5.16's
    files), else nearest `near_to` (the release the diff is moved to), else the newest cached;
    post releases before finals at the same distance. A release that cannot be fetched is passed over."""
    found = made_for(diff)
    if not any(f.old_blob and f.old_path for f in diff.files):
        return found
    cached = set(cached_wheels())
    order = sorted(candidates, key=Version)
    if found:
        near = Version(found[-1].version)  # the oldest of the best
    elif near_to is not None:
        near = Version(near_to)  # nothing cached matches: search out from where the diff goes
    else:
        near = max((Version(v) for v in cached), default=Version(order[-1]) if order else Version("0"))
    position = {v: i for i, v in enumerate(order)}
    anchor = _index(order, near)
    waiting = sorted((v for v in order if v not in cached),
                     key=lambda v: (abs(position[v] - anchor), not Version(v).is_postrelease, Version(v)))
    tried = set(cached)
    for version in waiting:
        if found and (found[0].matched == found[0].total or _best_around(found, order, tried)):
            break
        tried.add(version)
        try:
            fetch(version)
        except PatchkitError:
            continue
        found = made_for(diff)
    return found


def _best_around(found: list[Match], order: list[str], tried: set[str]) -> bool:
    """Whether the candidates just older and just newer than the best matches (`found`) are tried:
    none of them matched as many files, so no release further out is likely to."""
    versions = {m.version for m in found}
    at = [i for i, v in enumerate(order) if v in versions]
    if not at:
        return False
    around = [order[i] for i in (min(at) - 1, max(at) + 1) if 0 <= i < len(order)]
    return all(v in tried for v in around)


def _same_blob(a: str | None, b: str | None) -> bool:
    """Two index hashes of one blob (either may be abbreviated)."""
    if not a or not b:
        return False
    return a.startswith(b) or b.startswith(a)


def shared_files(upper: DiffPatchFile, lower: DiffPatchFile) -> list[str]:
    """The files of `upper` whose pre-image is `lower`'s post-image (`stacks` builds on this)."""
    after = {f.path: f.new_blob for f in lower.files if f.new_path is not None}
    return [f.path for f in upper.files if f.old_path is not None and _same_blob(f.old_blob, after.get(f.path))]


def find_bases(diffs: list[DiffPatchFile], to: str, progress: Callable[[str], None], last: str | None = None) -> None:
    """`find_base` for each of `diffs` (loaded together) on the files whose pre-image is its own:
    a file stacked on another diff's post-image (`shared_files`) is no release's, so it is
    left out of the search, and a diff stacked on others in every file is not searched (its base
    is theirs)."""
    from dataclasses import replace

    for diff in diffs:
        stacked = {rel for other in diffs if other is not diff for rel in shared_files(diff, other)}
        own = tuple(f for f in diff.files if f.path not in stacked)
        if any(f.old_blob and f.old_path for f in own):
            find_base(replace(diff, files=own), to, progress, last=last)


def find_base(diff: DiffPatchFile, to: str, progress: Callable[[str], None], first: str | None = None,
              last: str | None = None) -> list[Match]:
    """The release the diff was made for, from its index hashes, on any machine: the releases the
    package index has from `first` (default: the oldest patchkit knows) to `last` (default: `to`
    where `first` is given, else the newest patchkit knows: a rebase may move a diff to an older
    release; `last=to` where the base is older than `to`, as bump's V0 is), post releases
    included, are fetched into the wheel cache as needed, nearest `to` first where no cached
    release matches (`name_base`), so that the pre-images can be read afterwards."""
    from patchkit.releases import index, manifest

    known = manifest.available()
    newest = last or (to if first is not None else max([*known, to], key=Version))
    candidates = index.in_range(first or (known[0] if known else to), newest)
    return name_base(diff, candidates, lambda version: releases.download(version, progress), near_to=to)


def _index(order: list[str], near: Version) -> int:
    """The position in `order` of `near`, or of the release just after it."""
    return next((i for i, v in enumerate(order) if Version(v) >= near), len(order) - 1)


def pre_image(file: FileDiff) -> bytes | None:
    """The bytes of the file the diff was made against, from a cached release whose file has
    the index line's pre-image hash; None when no cached release has it."""
    if not (file.old_blob and file.old_path):
        return None
    for wheel in reversed(cached_wheels().values()):
        blob = _blobs(wheel, [file.old_path]).get(file.old_path)
        if blob is not None and blob.startswith(file.old_blob):
            data = _read(wheel, file.old_path)
            if data is not None and git_blob_sha1(data) == blob:
                return data
    return None


def made_for_text(matches: list[dict]) -> str:
    """Where a diff patch was made, in words (list and matrix)."""
    if not matches:
        return "made for: no cached release has its pre-image files (index hashes); judged by its context lines"
    return "made for " + ", ".join(f"{m['version']} ({m['matched']}/{m['total']} files)" for m in matches)
