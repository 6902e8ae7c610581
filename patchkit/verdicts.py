"""A cache of `matrix` verdicts, keyed by what decides them: patchkit's version, the patch's
source digest and the digests of the files it reads. A warm `matrix` reads a few files from each
cached wheel, hashes them and parses nothing."""

from __future__ import annotations

import functools
import hashlib
import json
from pathlib import Path

from patchkit import __version__, identity
from patchkit.util import atomic_write, sha256

CACHE_FILE = "verdicts.json"


@functools.lru_cache(maxsize=None)
def _code_digest() -> str:
    """patchkit's own code (the engine and the patch API judge too, not only the patch)."""
    package = Path(__file__).parent
    digest = hashlib.sha256()
    for path in sorted(package.rglob("*.py")):
        digest.update(path.relative_to(package).as_posix().encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()


class VerdictCache:
    def __init__(self, home: Path) -> None:
        self.path = home / CACHE_FILE
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
            self._entries: dict[str, dict] = data if isinstance(data, dict) else {}
        except (OSError, ValueError):
            self._entries = {}  # absent or unreadable: it is only a cache
        self._dirty = False

    @staticmethod
    def key(patch, source) -> str:
        parts = [__version__, _code_digest(), patch.ID, identity.digest(patch.ID)]
        present = False
        for rel in (*patch.TARGETS, *patch.REQUIRES):
            data = source.read(rel)
            present = present or data is not None
            parts.append(f"{rel}={'absent' if data is None else sha256(data)}")
        if not present:
            # No target file: the verdict (not-applicable or moved) depends on the whole package.
            parts.append(source.listing_fingerprint())
        return sha256("\n".join(parts).encode())

    def get(self, key: str) -> dict | None:
        return self._entries.get(key)

    def put(self, key: str, verdict: dict) -> None:
        self._entries[key] = verdict
        self._dirty = True

    def save(self) -> None:
        if self._dirty:
            try:
                atomic_write(self.path, json.dumps(self._entries, sort_keys=True).encode(), 0o644)
            except OSError:
                pass  # a cache that cannot be written costs time, never a result
            self._dirty = False
