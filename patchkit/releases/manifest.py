"""Per-release manifests (`manifests/<version>.json`): which patches a release carries and
each target file's pristine sha256. They let `status` and a no-op `apply` decide by hashing
alone, without parsing (or importing libcst).

A manifest also records what its verdicts were decided from, so that `matrix` can reuse them
without parsing where that is provably the same verdict (`verdicts.from_manifest`): the sha256
of every patch source it was made with (`patch_sha256`, the digest the image labels carry) and,
per patch, the sha256 of every file the patch reads (`reads`: its TARGETS, REQUIRES and CONSULTS, null
when absent)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

from patchkit.base.lean_typing import TYPE_CHECKING
from patchkit.releases import versions
from patchkit.base.constants import MANIFEST_SCHEMA, PACKAGE
from patchkit.base.errors import TargetError
from patchkit.base.util import read_regular

if TYPE_CHECKING:
    from typing import Any

MANIFESTS_PACKAGE = "patchkit.manifests"
MANIFEST_LIMIT = 64 * 1024 * 1024  # a manifest is kilobytes
VERDICTS = ("applies", "upstream-fixed", "not-applicable")


@dataclass(frozen=True)
class PatchEntry:
    verdict: str
    files: tuple[str, ...]
    # Every file the patch reads -> its sha256 on this release (None: absent). Empty where the
    # verdict is "no target file" (matrix then looks for moved code across the whole package).
    # Not compared by `==` (`manifest check` compares it where the patch set is unchanged).
    reads: dict[str, str | None] = field(default_factory=dict, compare=False)
    # What the verdict says beyond itself where the probes said it (an upstream fix narrower than
    # the patch), shown by `status` and `matrix` as they would show it parsing the release.
    detail: str = ""


@dataclass(frozen=True)
class Manifest:
    version: str
    patches: dict[str, PatchEntry] = field(default_factory=dict)
    files: dict[str, str] = field(default_factory=dict)  # path -> pristine sha256
    # {patch id: sha256 of its source} of the whole patch set the verdicts were decided with.
    patch_sha256: dict[str, str] = field(default_factory=dict, compare=False)

    def to_json(self) -> str:
        patches: dict[str, dict] = {}
        for pid, e in sorted(self.patches.items()):
            patches[pid] = {"verdict": e.verdict, "files": list(e.files)}
            if e.reads:
                patches[pid]["reads"] = dict(sorted(e.reads.items()))
            if e.detail:
                patches[pid]["detail"] = e.detail
        data: dict = {"schema": MANIFEST_SCHEMA, "sglang": self.version, "patches": patches,
                      "files": dict(sorted(self.files.items()))}
        if self.patch_sha256:
            data["patch_sha256"] = dict(sorted(self.patch_sha256.items()))
        return json.dumps(data, indent=2) + "\n"

    def changed_patches(self, fresh: "Manifest") -> list[str]:
        """The patches whose source differs from the one this manifest was made with (or that
        were added or removed since): then `matrix` reuses none of its verdicts."""
        return sorted(pid for pid in {*self.patch_sha256, *fresh.patch_sha256}
                      if self.patch_sha256.get(pid) != fresh.patch_sha256.get(pid))

    def reads_differ(self, fresh: "Manifest") -> list[str]:
        """The patches whose files read have other bytes in `fresh` (made from the same release)."""
        return sorted(pid for pid, entry in self.patches.items()
                      if pid in fresh.patches and entry.reads != fresh.patches[pid].reads)


def _check_path(path: object, where: str) -> str:
    if not isinstance(path, str):
        raise TargetError(f"{where}: file path {path!r} is not a string")
    pure = PurePosixPath(path)
    if pure.is_absolute() or ".." in pure.parts or not pure.parts or pure.parts[0] != PACKAGE:
        raise TargetError(f"{where}: path {path!r} escapes the {PACKAGE} package folder")
    return path


def parse(raw: str, where: str) -> Manifest:
    try:
        data = json.loads(raw)
        if not isinstance(data, dict):
            raise TargetError(f"{where}: corrupt manifest (not a JSON object)")
        if data.get("schema") != MANIFEST_SCHEMA:
            raise TargetError(f"{where}: unsupported manifest schema {data.get('schema')!r}")
        files = {_check_path(path, where): str(sha) for path, sha in data["files"].items()}
        patches = {}
        for pid, entry in data["patches"].items():
            if entry["verdict"] not in VERDICTS:
                raise TargetError(f"{where}: patch {pid}: unknown verdict {entry['verdict']!r}")
            entry_files = tuple(_check_path(path, where) for path in entry["files"])
            missing = [path for path in entry_files if path not in files]
            if missing:
                raise TargetError(f"{where}: patch {pid}: no pristine sha256 for {missing[0]}")
            reads = {_check_path(path, where): _digest(sha, where) for path, sha in entry.get("reads", {}).items()}
            detail = entry.get("detail", "")
            if not isinstance(detail, str):
                raise TargetError(f"{where}: patch {pid}: detail {detail!r} is not a string")
            patches[pid] = PatchEntry(verdict=entry["verdict"], files=entry_files, reads=reads, detail=detail)
        digests = {str(pid): _digest(sha, where) or "" for pid, sha in data.get("patch_sha256", {}).items()}
        if "" in digests.values():
            raise TargetError(f"{where}: patch_sha256 holds a null digest")
        return Manifest(version=str(data["sglang"]), patches=patches, files=files, patch_sha256=digests)
    except (ValueError, KeyError, TypeError, AttributeError, RecursionError) as exc:
        raise TargetError(f"{where}: corrupt manifest ({exc.__class__.__name__}: {exc})") from None


def _digest(value: object, where: str) -> str | None:
    if value is not None and not (isinstance(value, str) and len(value) == 64):
        raise TargetError(f"{where}: {value!r} is not a sha256")
    return value


def checkout_folder() -> Path | None:
    """The top-level manifests/ folder of the checkout patchkit runs from, or None when patchkit
    is an installed copy (whose manifests are read, never rewritten)."""
    import patchkit

    root = Path(patchkit.__file__).resolve().parent.parent
    folder = root / "manifests"
    return folder if (root / "pyproject.toml").is_file() and (folder / "__init__.py").is_file() else None


def _manifests() -> Any:
    """The folder of the shipped manifests: a Path where the package is a folder on disk (the
    usual case; importlib.resources, which imports tempfile and shutil, is a cost of every
    `status`), else importlib.resources' traversable (a zipped install)."""
    import importlib.util

    spec = importlib.util.find_spec(MANIFESTS_PACKAGE)
    locations = list(spec.submodule_search_locations or ()) if spec is not None else []
    if len(locations) == 1 and Path(locations[0]).is_dir():
        return Path(locations[0])
    from importlib import resources

    return resources.files(MANIFESTS_PACKAGE)


def available() -> list[str]:
    names = [entry.name for entry in _manifests().iterdir() if entry.name.endswith(".json")]
    return versions.ordered([name[: -len(".json")] for name in names])


def find(version: str) -> Manifest | None:
    """The manifest of a release, or None when patchkit has none for it.

    A local build (0.5.19+cu130) shares its public release's manifest (its hashes are still
    checked file by file); versions compare as versions (0.5.17.0 is 0.5.17)."""
    if versions.plain(version) is None:  # v0.5.17, a local build: its public release, by packaging (exit 3 if none)
        version = str(versions.public(versions.parse(version, what="SGLang version", error=TargetError)))
    for name in available():
        if versions.same(name, version):
            entry = _manifests() / f"{name}.json"
            # Read without blocking where it is a file (a FIFO there is refused, exit 6).
            raw = read_regular(entry, MANIFEST_LIMIT) if isinstance(entry, Path) else entry.read_bytes()
            return parse(raw.decode("utf-8"), f"manifests/{name}.json")
    return None


def load(version: str) -> Manifest:
    """The manifest of a release; TargetError (exit 3) when patchkit has none for it."""
    found = find(version)
    if found is None:
        known = ", ".join(available()) or "none"
        raise TargetError(f"no patch set for SGLang {version} (patchkit has manifests for: {known})")
    return found


def matches(manifest: Manifest, version: str) -> bool:
    """Whether `manifest` describes the release `version` was built from (its hashes apply)."""
    if versions.plain(version) is not None and versions.plain(manifest.version) is not None:
        return versions.same(manifest.version, version)
    from packaging.version import InvalidVersion, Version

    try:
        return Version(manifest.version) == versions.public(Version(version))
    except InvalidVersion:
        return False
