"""Per-release manifests (`manifests/<version>.json`): which patches a release carries and
each target file's pristine sha256. They let `status` and a no-op `apply` decide by hashing
alone, without parsing (or importing libcst)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path, PurePosixPath

from packaging.version import InvalidVersion, Version

from patchkit import versions
from patchkit.constants import MANIFEST_SCHEMA, PACKAGE
from patchkit.errors import TargetError

MANIFESTS_PACKAGE = "patchkit.manifests"
VERDICTS = ("applies", "upstream-fixed", "not-applicable")


@dataclass(frozen=True)
class PatchEntry:
    verdict: str
    files: tuple[str, ...]


@dataclass(frozen=True)
class Manifest:
    version: str
    patches: dict[str, PatchEntry] = field(default_factory=dict)
    files: dict[str, str] = field(default_factory=dict)  # path -> pristine sha256

    def to_json(self) -> str:
        data = {
            "schema": MANIFEST_SCHEMA,
            "sglang": self.version,
            "patches": {pid: {"verdict": e.verdict, "files": list(e.files)} for pid, e in sorted(self.patches.items())},
            "files": dict(sorted(self.files.items())),
        }
        return json.dumps(data, indent=2) + "\n"


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
            patches[pid] = PatchEntry(verdict=entry["verdict"], files=entry_files)
        return Manifest(version=str(data["sglang"]), patches=patches, files=files)
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        raise TargetError(f"{where}: corrupt manifest ({exc.__class__.__name__}: {exc})") from None


def checkout_folder() -> Path | None:
    """The top-level manifests/ folder of the checkout patchkit runs from, or None when patchkit
    is an installed copy (whose manifests are read, never rewritten)."""
    import patchkit

    root = Path(patchkit.__file__).resolve().parent.parent
    folder = root / "manifests"
    return folder if (root / "pyproject.toml").is_file() and (folder / "__init__.py").is_file() else None


def available() -> list[str]:
    names = [entry.name for entry in resources.files(MANIFESTS_PACKAGE).iterdir() if entry.name.endswith(".json")]
    return sorted((name[: -len(".json")] for name in names), key=Version)


def find(version: str) -> Manifest | None:
    """The manifest of a release, or None when patchkit has none for it.

    A local build (0.5.19+cu130) shares its public release's manifest (its hashes are still
    checked file by file); versions compare as versions (0.5.17.0 is 0.5.17)."""
    wanted = versions.public(versions.parse(version, what="SGLang version", error=TargetError))
    for name in available():
        if Version(name) == wanted:
            entry = resources.files(MANIFESTS_PACKAGE) / f"{name}.json"
            return parse(entry.read_text(encoding="utf-8"), f"manifests/{name}.json")
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
    try:
        return Version(manifest.version) == versions.public(Version(version))
    except InvalidVersion:
        return False
