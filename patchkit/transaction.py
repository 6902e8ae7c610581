"""Commit a plan to disk: all or nothing, also across a crash.

Order of a commit (every write is temp file + fsync + os.replace):
  1. back up the pristine bytes of each file about to change for the first time;
  2. stage every new file under `.patchkit/pending/`;
  3. write the journal: the commit point;
  4. move each staged file into place (removals too);
  5. write (or remove) the state file; 6. drop journal and staging.
An exception in 4 rolls every moved file back. A crash before 3 leaves the tree untouched
(staging is dropped on the next run); a crash after 3 is finished by `recover()`.
"""

from __future__ import annotations

import json
import os
import shutil
from dataclasses import dataclass
from pathlib import Path

from patchkit import state as state_mod
from patchkit.constants import BACKUPS_DIR, LOCK_FILE
from patchkit.errors import StateError
from patchkit.state import State
from patchkit.target import Target
from patchkit.util import atomic_write, replace


@dataclass(frozen=True)
class FileWrite:
    rel: str
    before: bytes | None  # bytes on disk when planned (None: absent)
    after: bytes | None  # bytes to leave (None: remove the file)
    pristine: bytes | None  # the release's bytes, kept as backup (None: a file patchkit adds)


def _mode(path: Path) -> int:
    try:
        return os.stat(path).st_mode & 0o7777
    except FileNotFoundError:
        return 0o644


def commit(target: Target, writes: list[FileWrite], old: State | None, new: State | None) -> None:
    site = target.site
    for write in writes:
        if target.read(write.rel) != write.before:
            raise StateError(f"{write.rel} changed while patchkit was planning; run the command again")

    tracked = set(old.files) if old else set()
    created_backups: list[Path] = []
    done: list[FileWrite] = []
    staged = state_mod.pending_dir(site)
    try:
        for write in writes:
            if write.pristine is not None and write.rel not in tracked:
                # Only files patchkit has not changed yet are backed up: a backup is never patched bytes.
                backup = state_mod.backup_path(site, write.rel)
                atomic_write(backup, write.pristine, _mode(target.path(write.rel)))
                created_backups.append(backup)
        for write in writes:
            if write.after is not None:
                atomic_write(staged / write.rel, write.after, _mode(target.path(write.rel)))
        journal = {
            "state": new.to_dict() if new else None,
            "files": [{"rel": w.rel, "remove": w.after is None} for w in writes],
        }
        atomic_write(state_mod.journal_path(site), json.dumps(journal).encode())
        for write in writes:
            _move_into_place(target, write.rel, remove=write.after is None)
            done.append(write)
    except BaseException:
        for write in reversed(done):
            _restore(target, write)
        state_mod.journal_path(site).unlink(missing_ok=True)
        shutil.rmtree(staged, ignore_errors=True)
        for backup in created_backups:
            backup.unlink(missing_ok=True)
            _remove_empty_parents(backup.parent, state_mod.state_dir(site))
        raise
    _finish(target, new)


def _remove_temp_files(folder: Path, prefix: str = ".") -> None:
    """Temp files of atomic writes that a killed run left (never a file's only copy)."""
    if folder.is_dir():
        for leftover in folder.rglob(f"{prefix}*.tmp"):
            leftover.unlink(missing_ok=True)


def _remove_empty_parents(folder: Path, stop: Path) -> None:
    while folder != stop and folder.is_dir() and not any(folder.iterdir()):
        folder.rmdir()
        folder = folder.parent


def _move_into_place(target: Target, rel: str, remove: bool) -> None:
    path = target.path(rel)
    if remove:
        if path.exists():
            path.unlink()
        return
    staged = state_mod.pending_dir(target.site) / rel
    if staged.exists():  # absent only when recover() already moved it
        replace(staged, path)


def _restore(target: Target, write: FileWrite) -> None:
    path = target.path(write.rel)
    if write.before is None:
        path.unlink(missing_ok=True)
    else:
        atomic_write(path, write.before, _mode(path))


def _finish(target: Target, new: State | None) -> None:
    site = target.site
    if new is None:
        # Nothing patched any more: leave the folder as the release installed it.
        for entry in state_mod.state_dir(site).iterdir():
            if entry.name != LOCK_FILE:
                shutil.rmtree(entry) if entry.is_dir() else entry.unlink()
        return
    state_mod.save(site, new)
    if target.checkout is not None:
        # In a git checkout, `git status` shows the patched files, not patchkit's own folder.
        ignore = state_mod.state_dir(site) / ".gitignore"
        if not ignore.exists():
            atomic_write(ignore, b"*\n", 0o644)
    _prune_backups(site, new)
    state_mod.journal_path(site).unlink(missing_ok=True)
    shutil.rmtree(state_mod.pending_dir(site), ignore_errors=True)


def _prune_backups(site: Path, new: State) -> None:
    root = state_mod.state_dir(site) / BACKUPS_DIR
    if not root.is_dir():
        return
    for path in sorted(root.rglob("*"), reverse=True):
        rel = path.relative_to(root).as_posix()
        if path.is_file() and rel not in new.files:
            path.unlink()
        elif path.is_dir() and not any(path.iterdir()):
            path.rmdir()


def recover(target: Target) -> bool:
    """Finish or discard an operation that was killed; True when one was finished."""
    site = target.site
    journal_file = state_mod.journal_path(site)
    _remove_temp_files(state_mod.state_dir(site))
    if not journal_file.exists():
        shutil.rmtree(state_mod.pending_dir(site), ignore_errors=True)
        return False
    try:
        journal = json.loads(journal_file.read_bytes())
        files = [(entry["rel"], bool(entry["remove"])) for entry in journal["files"]]
        new = State.from_dict(journal["state"], str(journal_file)) if journal["state"] is not None else None
    except (ValueError, KeyError, TypeError) as exc:
        raise StateError(f"{journal_file} is corrupt ({exc}); reinstall SGLang and remove {state_mod.state_dir(site)}") from None
    for rel, remove in files:
        _move_into_place(target, rel, remove)
        _remove_temp_files(target.path(rel).parent, prefix=f".{target.path(rel).name}.")
    _finish(target, new)
    return True

