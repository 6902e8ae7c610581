"""`matrix` verdicts without parsing: from the committed manifests where they provably say the
same (`from_manifest`), else from a cache keyed by what decides them: patchkit's version and code,
the patch's source digest and the digests of the files it reads. Either way a `matrix` over the
releases patchkit has manifests for reads a few files from each wheel, hashes them and parses
nothing."""

from __future__ import annotations

import functools
import hashlib
import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

from patchkit import __version__
from patchkit.engine import identity, registry
from patchkit.releases import manifest
from patchkit.base.errors import PatchkitError
from patchkit.base.util import atomic_write, read_regular, sha256

if TYPE_CHECKING:
    from patchkit.authoring.patch import Patch
    from patchkit.releases.source import Source

CACHE_FILE = "verdicts.json"
CACHE_LIMIT = 64 * 1024 * 1024  # a few hundred bytes per verdict: far more than any real cache
# The states `upstream.judge` stores (its vocabulary, spelled out: this module must not import it).
STATES = frozenset({"applies", "upstream-fixed", "moved", "broken", "not-applicable", "applied"})
_KEY_CHARS = frozenset("0123456789abcdef")


def valid_entry(key: object, verdict: object) -> bool:
    """Whether a cache entry has the shape `put` writes: a sha256 key and {state, file, detail}
    with a known state. Anything else was not written by patchkit (or is damaged): never shown."""
    return (isinstance(key, str) and len(key) == 64 and set(key) <= _KEY_CHARS
            and isinstance(verdict, dict) and set(verdict) == {"state", "file", "detail"}
            and verdict["state"] in STATES
            and (verdict["file"] is None or (isinstance(verdict["file"], str) and verdict["file"].startswith("sglang/")
                                             and "\n" not in verdict["file"]))
            and isinstance(verdict["detail"], str))


@functools.lru_cache(maxsize=None)
def _code_digest() -> str:
    """patchkit's own code (the engine and the patch API judge too, not only the patch)."""
    package = Path(__file__).parents[1]
    digest = hashlib.sha256()
    for path in sorted(package.rglob("*.py")):
        digest.update(path.relative_to(package).as_posix().encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()


def from_manifest(source: Source) -> dict[str, tuple[str, str]]:
    """{patch id: (matrix state, detail)} for the patches whose verdict on `source` (a release read
    from its wheel) the committed manifest settles by hashes alone (the detail: what the probes
    said beyond the verdict, such as an upstream fix narrower than the patch).

    A verdict is decided by patchkit's engine, the sources of the patch set (a patch's probes and
    transform, and the other patches on the same files, whose SCOPE shapes the part that is
    parsed) and the bytes of the files the patch reads. A manifest records the last two as they
    were when it was made (`patch_sha256` of every patch; `reads`: sha256 of each file the patch
    reads, null when absent), and `manifest check` (run by the tests in CI) holds its verdicts
    to the engine of the same commit. So where every patch has its recorded source and every file
    a patch reads has its recorded bytes (or is absent where recorded absent), the verdict is the
    recorded one. A patch without `reads` ("no target file": matrix then searches the package
    for moved code), another patch set (changed, added or `--patches` modules; diff patches do
    not count) or other bytes: judged by the probes."""
    found = manifest.find(source.version)
    if found is None or not manifest.matches(found, source.version):
        return {}
    # Diff patches aside: they work on bytes and never shape the part of a file another patch's
    # probes see (view.View._scope), so a diff loaded beside the built-in set leaves their verdicts as recorded.
    if found.patch_sha256 != identity.digests([pid for pid in registry.patch_ids() if not registry.is_diff(pid)]):
        return {}
    hashes: dict[str, str | None] = {}

    def sha(rel: str) -> str | None:
        if rel not in hashes:
            data = source.read(rel)
            hashes[rel] = None if data is None else sha256(data)
        return hashes[rel]

    return {pid: (entry.verdict, entry.detail) for pid, entry in found.patches.items()
            if entry.reads and all(sha(rel) == digest for rel, digest in entry.reads.items())}


class VerdictCache:
    def __init__(self, home: Path) -> None:
        self.path = home / CACHE_FILE
        self._entries: dict[str, dict[str, Any]] = {}
        try:
            data = json.loads(read_regular(self.path, CACHE_LIMIT))
        except (OSError, ValueError, RecursionError, PatchkitError):
            data = {}  # absent, unreadable, not a regular file, too large or deep: it is only a cache
        # Entries of another shape are dropped (and rebuilt): a cache never decides what is shown.
        if isinstance(data, dict):
            self._entries = {k: v for k, v in data.items() if valid_entry(k, v)}
        self._dirty = isinstance(data, dict) and len(self._entries) != len(data)

    @staticmethod
    def key(patch: type[Patch], source: Any) -> str:  # source: a wheel source (listing_fingerprint)
        parts = [__version__, _code_digest(), patch.ID, identity.digest(patch.ID)]
        parts += patch.verdict_inputs()  # a diff patch: where its pre-image is
        present = False
        for rel in (*patch.TARGETS, *patch.REQUIRES, *patch.CONSULTS):
            data = source.read(rel)
            present = present or data is not None
            parts.append(f"{rel}={'absent' if data is None else sha256(data)}")
        if not present or patch.reads_package():
            # No target file: the verdict (not-applicable or moved) depends on the whole package;
            # so does a diff patch's (a changed unit may have moved to another file of it).
            parts.append(source.listing_fingerprint())
        return sha256("\n".join(parts).encode())

    def get(self, key: str) -> dict[str, Any] | None:
        return self._entries.get(key)  # every entry was validated on load

    def put(self, key: str, verdict: dict[str, Any]) -> None:
        self._entries[key] = verdict
        self._dirty = True

    def save(self) -> None:
        if self._dirty:
            try:
                atomic_write(self.path, json.dumps(self._entries, sort_keys=True).encode(), 0o644)
            except OSError:
                pass  # a cache that cannot be written costs time, never a result
            self._dirty = False
