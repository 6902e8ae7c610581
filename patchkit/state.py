"""The state file, the backups folder and the lock, all under `<site>/.patchkit/`."""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator

from patchkit import __version__
from patchkit.constants import BACKUPS_DIR, JOURNAL_FILE, LOCK_FILE, PENDING_DIR, STATE_DIR, STATE_FILE, STATE_SCHEMA

READABLE_SCHEMAS = (1, STATE_SCHEMA)  # schema 1 files (no patch digests) are still read
from patchkit.errors import StateError
from patchkit.util import atomic_write


@dataclass
class FileRecord:
    pristine: str | None  # sha256 of the release's bytes; None when patchkit added the file
    patched: str  # sha256 of the bytes patchkit wrote
    patches: list[str]  # the patch ids that shaped this file, in stacking order
    # {patch id: sha256 of that patch's source} when the file was rendered (schema 2; empty
    # when read from a schema-1 file): a changed patch makes the file `outdated`.
    digests: dict[str, str] = field(default_factory=dict)


@dataclass
class State:
    sglang_version: str
    patches: list[str] = field(default_factory=list)
    files: dict[str, FileRecord] = field(default_factory=dict)
    patchkit_version: str = __version__

    def files_of(self, patch_id: str) -> list[str]:
        return [rel for rel, record in self.files.items() if patch_id in record.patches]

    def to_dict(self) -> dict:
        return {
            "schema": STATE_SCHEMA,
            "patchkit_version": self.patchkit_version,
            "sglang_version": self.sglang_version,
            "patches": list(self.patches),
            "files": {
                rel: {"pristine_sha256": r.pristine, "patched_sha256": r.patched, "patches": list(r.patches),
                      "patch_sha256": dict(r.digests)}
                for rel, r in sorted(self.files.items())
            },
        }

    @classmethod
    def from_dict(cls, data: dict, where: str) -> "State":
        try:
            if data["schema"] not in READABLE_SCHEMAS:
                raise StateError(f"{where}: unsupported state schema {data['schema']!r}")
            files = {
                str(rel): FileRecord(
                    pristine=r["pristine_sha256"], patched=str(r["patched_sha256"]), patches=[str(p) for p in r["patches"]],
                    digests={str(k): str(v) for k, v in r.get("patch_sha256", {}).items()},
                )
                for rel, r in data["files"].items()
            }
            return cls(
                sglang_version=str(data["sglang_version"]),
                patches=[str(p) for p in data["patches"]],
                files=files,
                patchkit_version=str(data["patchkit_version"]),
            )
        except (KeyError, TypeError, AttributeError) as exc:
            raise StateError(f"{where} is corrupt ({exc.__class__.__name__}: {exc}); restore it or reinstall SGLang") from None


def state_dir(site: Path) -> Path:
    return site / STATE_DIR


def state_path(site: Path) -> Path:
    return state_dir(site) / STATE_FILE


def journal_path(site: Path) -> Path:
    return state_dir(site) / JOURNAL_FILE


def pending_dir(site: Path) -> Path:
    return state_dir(site) / PENDING_DIR


def backup_path(site: Path, rel: str) -> Path:
    return state_dir(site) / BACKUPS_DIR / rel


def load(site: Path) -> State | None:
    path = state_path(site)
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise StateError(f"cannot read {path}: {exc.strerror}") from None
    try:
        data = json.loads(raw)
    except ValueError:
        raise StateError(f"{path} is corrupt (not JSON); restore it or reinstall SGLang") from None
    if not isinstance(data, dict):
        raise StateError(f"{path} is corrupt (not an object); restore it or reinstall SGLang")
    return State.from_dict(data, str(path))


def dumps(state: State) -> bytes:
    return (json.dumps(state.to_dict(), indent=2) + "\n").encode()


def save(site: Path, state: State) -> None:
    atomic_write(state_path(site), dumps(state), 0o644)


def read_backup(site: Path, rel: str) -> bytes:
    path = backup_path(site, rel)
    try:
        return path.read_bytes()
    except OSError:
        raise StateError(f"backup of {rel} is missing ({path}); reinstall SGLang to get the pristine file") from None


@contextlib.contextmanager
def locked(site: Path) -> Iterator[None]:
    """Serialize patchkit runs on one folder (flock on `.patchkit/lock`).

    `revert` removes `.patchkit/` with the lock file in it; a waiter that then gets the lock
    on the removed file retries on the new one, so two runs never hold the lock at once.
    """
    path = state_dir(site) / LOCK_FILE
    while True:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            try:
                same = os.stat(path).st_ino == os.fstat(fd).st_ino
            except FileNotFoundError:
                same = False
            if same:
                break
        except BaseException:
            os.close(fd)
            raise
        os.close(fd)
    try:
        yield
    finally:
        _release(site, path, fd)


def _release(site: Path, path: Path, fd: int) -> None:
    """Drop the lock and its file: a run leaves no lock behind, and a waiter that got the lock
    on the unlinked file notices (inode check above) and retries on a fresh one."""
    with contextlib.suppress(OSError):
        path.unlink()
    os.close(fd)
    with contextlib.suppress(OSError):
        state_dir(site).rmdir()  # only when empty: nothing patched here
