"""Commit a plan to disk: all or nothing, also across a crash, a Ctrl-C or an I/O error.

Order of a commit (every write is temp file + fsync + os.replace + fsync of the folder):
  1. back up the pristine bytes of each file about to change for the first time; stage every
     new file (and, for `--force`, a copy of the bytes it overwrites) under `.patchkit/pending/`;
  2. write the journal: the commit point. It names each file with the sha256 it had before
     and must have after;
  3. move each staged file into place (removals too), then sync each folder a file moved into
     (a failed sync is retried once; if it fails again the run still finishes and then exits 6
     naming the folder: its files are in place, their durability is not proven);
  4. write (or remove) the state file; 5. drop journal and staging.
A failure before 2 discards what 1 wrote: the tree is untouched. From 2 on the run is finished
(rolled forward), in this process when it can, else by `recover()` in the next run, which first
checks every file's current bytes against the journal and writes nothing when one is neither.
"""

from __future__ import annotations

import errno
import json
import os
import time
from dataclasses import dataclass
from pathlib import Path

from patchkit.base.lean_typing import TYPE_CHECKING, NamedTuple
from patchkit.store import state as state_mod
from patchkit.base.constants import BACKUPS_DIR, JOURNAL_FILE, JOURNAL_SCHEMA, LOCK_FILE, OVERWRITTEN_DIR, STATE_DIR
from patchkit.base.errors import (
    DriftError, EnvironmentFailure, Interrupted, StateError, environment_failure, is_environment_failure,
)
from patchkit.store.state import State
from patchkit.store.target import Target, is_runtime_file
from patchkit.base.util import atomic_write, fsync_dir, sha256

if TYPE_CHECKING:
    from typing import Any


@dataclass(frozen=True)
class FileWrite:
    rel: str
    before: bytes | None  # bytes on disk when planned (None: absent)
    after: bytes | None  # bytes to leave (None: remove the file)
    pristine: bytes | None  # the release's bytes, kept as backup (None: a file patchkit adds)


class Recovery(NamedTuple):  # (not a dataclass: making one costs every apply ~0.5 ms)
    finished: bool = False  # an interrupted run was finished
    kept: tuple[str, ...] = ()  # copies of overwritten bytes (`--force`), relative to the site
    warnings: tuple[str, ...] = ()


def _metadata(path: Path) -> tuple[int, tuple[int, int]]:
    """The mode and (uid, gid) the bytes written for `path` get: the file's own, so a tree
    owned by another user stays theirs; a new file gets 0o644 and its folder's owner."""
    try:
        st = os.stat(path)
        return st.st_mode & 0o7777, (st.st_uid, st.st_gid)
    except FileNotFoundError:
        pass
    for folder in path.parents:
        try:
            st = os.stat(folder)
            return 0o644, (st.st_uid, st.st_gid)
        except FileNotFoundError:
            continue
    return 0o644, (os.geteuid(), os.getegid())


def _dest(target: Target, rel: str) -> Path:
    """Where a file's bytes go: through an in-package symlink to the file it names, so the
    symlink itself survives (`Target.path` refuses one that points out of the package)."""
    path = target.path(rel)
    return Path(os.path.realpath(path)) if path.is_symlink() else path


def _sha_or_none(data: bytes | None) -> str | None:
    return None if data is None else sha256(data)


def commit(target: Target, writes: list[FileWrite], old: State | None, new: State | None,
           lost: dict[str, bytes] | None = None) -> tuple[str, ...]:
    """Write the plan; `lost` = {rel: bytes an overwrite loses}, kept under `.patchkit/overwritten/`.
    Returns the kept copies' paths, relative to the site folder."""
    site = target.site
    lost = lost or {}
    for write in writes:
        if target.read(write.rel) != write.before:
            raise StateError(f"{write.rel} changed while patchkit was planning; nothing was written, run the command again")
    from patchkit.store import writable  # here: a no-op apply writes nothing

    # Past the commit point every target is replaced; one this process cannot replace is found now.
    writable.check([_dest(target, w.rel) for w in writes if w.after is not None],
                   [_dest(target, w.rel) for w in writes if w.after is None])
    stamp = _fresh_stamp(site)
    kept = {rel: f"{OVERWRITTEN_DIR}/{stamp}/{rel}" for rel in sorted(lost)}
    journal = {
        "schema": JOURNAL_SCHEMA,
        "sglang_version": target.version,
        "state": new.to_dict() if new else None,
        "files": [{"rel": w.rel, "before": _sha_or_none(w.before), "after": _sha_or_none(w.after)} for w in writes],
        "kept": [{"rel": rel, "to": to, "sha256": sha256(lost[rel])} for rel, to in kept.items()],
    }
    tracked = set(old.files) if old else set()
    staged = state_mod.pending_dir(site)
    try:
        for write in writes:
            if write.pristine is not None and write.rel not in tracked:
                # Only files patchkit has not changed yet are backed up: a backup is never patched bytes.
                atomic_write(state_mod.backup_path(site, write.rel), write.pristine, *_metadata(_dest(target, write.rel)))
        for rel, data in lost.items():
            atomic_write(staged / OVERWRITTEN_DIR / rel, data, 0o644)
        for write in writes:
            if write.after is not None:
                atomic_write(staged / write.rel, write.after, *_metadata(_dest(target, write.rel)))
        atomic_write(state_mod.journal_path(site), json.dumps(journal).encode())
    except BaseException:
        # Before the commit point: not one target file was touched; drop what this run wrote
        # (should that fail too, the next run's `recover()` drops it).
        try:
            _discard(target, old)
        except BaseException:
            pass
        raise
    _complete(target, journal, False, f"{len(writes)} file(s) written")
    return tuple(f"{STATE_DIR}/{to}" for to in kept.values())


def _complete(target: Target, journal: dict[str, Any], force: bool, done: str) -> list[str]:
    """Roll the journal forward; past the commit point a run is finished, never undone. A
    failure is retried once here; if it repeats, the journal stays for the next run. A folder
    whose fsync failed twice does not stop the run (its files are in place): it is said after."""
    try:
        kept, unsynced = _roll_forward(target, journal, force)
    except (DriftError, StateError):
        raise  # found before anything was written
    except BaseException as first:
        try:
            kept, unsynced = _roll_forward(target, journal, force)
        except BaseException:
            raise _pending(first, target) from None
        if unsynced:
            raise _not_durable(unsynced, done)
        if isinstance(first, KeyboardInterrupt):
            raise Interrupted(f"interrupted after files had started to change; the run was finished first ({done}, "
                              "state recorded)") from None
        return kept  # an error that did not repeat: the second attempt wrote and synced every file
    if unsynced:
        raise _not_durable(unsynced, done)
    return kept


def replace(src: Path, dst: Path) -> None:
    """Move a file into place past the commit point; its folder is synced after the last move (`_sync`)."""
    os.replace(src, dst)


def _sync(folder: Path, unsynced: dict[Path, OSError]) -> None:
    """fsync a folder past the commit point, once more when that fails (an fsync error is not
    cleared by waiting); when the second fails too the folder goes into `unsynced`."""
    try:
        fsync_dir(folder)
    except OSError:
        try:
            fsync_dir(folder)
        except OSError as again:
            unsynced[folder] = again


def _not_durable(unsynced: dict[Path, OSError], done: str) -> EnvironmentFailure:
    folder, exc = next(iter(unsynced.items()))
    name = errno.errorcode.get(exc.errno or 0, str(exc.errno))
    others = f" (and {len(unsynced) - 1} other folder(s))" if len(unsynced) > 1 else ""
    return EnvironmentFailure(
        f"{folder}: fsync failed twice after its files were replaced: {exc.strerror or exc} ({name}){others}; the run "
        f"is finished ({done}, state recorded) and the files are in place, but that they survive a crash of the "
        f"machine is not proven: check the device (dmesg), then run `sync {folder}`")


def _pending(exc: BaseException, target: Target) -> BaseException:
    where = state_mod.journal_path(target.site)
    then = (f"the unfinished run is recorded in {where}; the next `{target.naming.command('apply')}` or "
            f"`{target.naming.command('revert')}` finishes it")
    if isinstance(exc, KeyboardInterrupt):
        return Interrupted(f"interrupted while files were being replaced; {then}")
    if is_environment_failure(exc):
        return environment_failure(exc, then)  # type: ignore[arg-type]
    if isinstance(exc, EnvironmentFailure):
        return EnvironmentFailure(f"{exc}; {then}")
    return exc


# --- finishing a run from its journal ----------------------------------------------------------


def _parse_journal(raw: bytes, where: Path) -> dict[str, Any]:
    inv = state_mod.Invalid
    try:
        try:
            data: dict[str, Any] = json.loads(raw)
        except (ValueError, RecursionError):
            raise inv("not JSON") from None
        state_mod.keys_of(data, "the journal", {"schema", "sglang_version", "state", "files", "kept"})
        state_mod.need(data["schema"] == JOURNAL_SCHEMA, f"schema {data['schema']!r} is not {JOURNAL_SCHEMA}")
        state_mod.need(isinstance(data["sglang_version"], str) and data["sglang_version"] != "", "sglang_version must be a string")
        state_mod.need(isinstance(data["files"], list) and isinstance(data["kept"], list), "files and kept must be lists")
        for entry in data["files"]:
            state_mod.keys_of(entry, "a files entry", {"rel", "before", "after"})
            state_mod.file_path(entry["rel"], "files[].rel")
            state_mod.sha_field(entry["before"], "files[].before", nullable=True)
            state_mod.sha_field(entry["after"], "files[].after", nullable=True)
        for entry in data["kept"]:
            state_mod.keys_of(entry, "a kept entry", {"rel", "to", "sha256"})
            rel = state_mod.file_path(entry["rel"], "kept[].rel")
            state_mod.need(isinstance(entry["to"], str) and entry["to"].startswith(f"{OVERWRITTEN_DIR}/")
                           and entry["to"].endswith("/" + rel) and ".." not in entry["to"].split("/"),
                           "kept[].to must be a path under overwritten/")
            state_mod.sha_field(entry["sha256"], "kept[].sha256")
    except inv as exc:
        raise StateError(f"{where} is not a valid patchkit journal ({exc}); nothing was written. Reinstall SGLang "
                         f"and remove {where.parent}") from None
    if data["state"] is not None:
        State.from_dict(data["state"], f"{where} (its state)")
    return data


def _roll_forward(target: Target, journal: dict[str, Any], force: bool = False) -> tuple[list[str], dict[Path, OSError]]:
    """Bring every file of the journal to its `after` bytes and record the new state. Checks
    everything first: a file that is neither `before` nor `after` stops it (exit 4) unless
    `force`, which keeps that file's bytes under `.patchkit/overwritten/`. Every folder a file
    was replaced in is synced before the state is written, that of a file already in place too
    (a run killed between its rename and that sync). Returns those copies and the folders whose
    sync failed twice."""
    site = target.site
    staged = state_mod.pending_dir(site)
    todo: list[dict[str, Any]] = []
    drifted: dict[str, bytes] = {}
    folders: dict[Path, None] = {}  # to sync, in order
    for entry in journal["files"]:
        current = target.read(entry["rel"])
        now = _sha_or_none(current)
        if now == entry["after"]:
            if entry["after"] is not None:
                folders[_dest(target, entry["rel"]).parent] = None
            continue
        if now != entry["before"]:
            if not force:
                raise DriftError(
                    f"{entry['rel']} changed while a patchkit run on it was unfinished (its bytes are neither those "
                    f"before nor after that run); nothing was written. Restore it, or finish with --force (which "
                    f"keeps a copy of its bytes)")
            drifted[entry["rel"]] = current  # type: ignore[assignment]
        if entry["after"] is not None:
            data = state_mod.read_private(staged / entry["rel"])
            if data is None or sha256(data) != entry["after"]:
                raise StateError(f"the staged copy of {entry['rel']} for the unfinished run is missing or corrupt; "
                                 f"nothing was written. Reinstall SGLang and remove {state_mod.state_dir(site)}")
        todo.append(entry)
    for entry in journal["kept"]:
        dest = state_mod.state_dir(site) / entry["to"]
        source = staged / OVERWRITTEN_DIR / entry["rel"]
        if state_mod.read_private(source) is not None:
            dest.parent.mkdir(parents=True, exist_ok=True)
            replace(source, dest)
            folders[dest.parent] = None
    kept = []
    stamp = _fresh_stamp(site)
    for rel, data in drifted.items():
        to = state_mod.overwritten_dir(site) / stamp / rel
        atomic_write(to, data, 0o644)
        kept.append(to.relative_to(site).as_posix())
    for entry in todo:
        path = _dest(target, entry["rel"])
        if entry["after"] is None:
            path.unlink(missing_ok=True)
            if is_runtime_file(entry["rel"]):
                _remove_runtime_folder(path.parent)
        else:
            if is_runtime_file(entry["rel"]):
                path.parent.mkdir(exist_ok=True)
            replace(staged / entry["rel"], path)
            folders[path.parent] = None
    unsynced: dict[Path, OSError] = {}
    for folder in folders:
        _sync(folder, unsynced)
    _finish(target, State.from_dict(journal["state"], "journal") if journal["state"] is not None else None,
            {entry["to"].split("/")[1] for entry in journal["kept"]} | ({stamp} if drifted else set()))
    return kept, unsynced


def _fresh_stamp(site: Path) -> str:
    """The name of a new folder under `.patchkit/overwritten/`: the UTC second, and a counter
    when a folder of that second exists already (two `--force` runs within one second must not
    overwrite the first one's copies). Runs are serialised by the lock, so checking is enough."""
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    taken = state_mod.overwritten_dir(site)
    name, n = stamp, 1
    while (taken / name).exists() or (taken / name).is_symlink():
        n += 1
        name = f"{stamp}-{n}"
    return name


def _ignore_in_checkout(target: Target) -> None:
    """In a git checkout, `git status` shows the patched files, not patchkit's own folder."""
    ignore = state_mod.state_dir(target.site) / ".gitignore"
    if target.checkout is not None and not ignore.exists():
        atomic_write(ignore, b"*\n", 0o644)


def _finish(target: Target, new: State | None, keep_stamps: set[str]) -> None:
    site = target.site
    root = state_mod.state_dir(site)
    if new is None:
        # Nothing patched any more: leave the folder as the release installed it. The state
        # goes first (nothing then refers to a backup), the journal last (a kill in between is
        # finished again by the next run). Copies kept by this very run stay.
        state_mod.state_path(site).unlink(missing_ok=True)
        keeps_copies = any(stamp and (state_mod.overwritten_dir(site) / stamp).is_dir() for stamp in keep_stamps)
        for entry in sorted(root.iterdir()):
            if entry.name in (LOCK_FILE, JOURNAL_FILE) or (entry.name == ".gitignore" and keeps_copies):
                continue
            if entry.name == OVERWRITTEN_DIR:
                for run in sorted(entry.iterdir()):
                    if run.name not in keep_stamps:
                        _remove(run)
                _remove_empty(entry)
                continue
            _remove(entry)
        if keeps_copies:
            _ignore_in_checkout(target)  # the kept copies stay out of `git status` too
        state_mod.journal_path(site).unlink(missing_ok=True)
        return
    state_mod.save(site, new)
    _ignore_in_checkout(target)
    _prune_backups(target, new, check=False)
    state_mod.journal_path(site).unlink(missing_ok=True)
    if state_mod.pending_dir(site).exists():
        _rmtree(state_mod.pending_dir(site))


def _rmtree(folder: Path) -> None:
    import shutil  # here: a no-op apply removes nothing (shutil brings bz2 and lzma)

    shutil.rmtree(folder)


def _remove_runtime_folder(folder: Path) -> None:
    """The runtime report's package or dist-info folder goes with its last file, and so do the
    bytecode caches Python wrote there for it (derived from patchkit's own module)."""
    cache = folder / "__pycache__"
    if cache.is_dir() and not cache.is_symlink() and all(p.suffix == ".pyc" for p in cache.iterdir()):
        if not any(p.suffix == ".py" for p in folder.iterdir()):
            _rmtree(cache)
    _remove_empty(folder)


def _remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        _rmtree(path)
    else:
        path.unlink(missing_ok=True)


def _remove_empty(folder: Path) -> None:
    if folder.is_dir() and not any(folder.iterdir()):
        folder.rmdir()


def _prune_backups(target: Target, state: State | None, check: bool) -> None:
    """Remove every backup that no record refers to, and empty folders. With `check`, a backup
    whose bytes differ from the file it backs up is the only copy of something: refuse."""
    site = target.site
    root = state_mod.state_dir(site) / BACKUPS_DIR
    if not root.is_dir():
        return
    referenced = {rel for rel, record in (state.files.items() if state else ()) if record.pristine is not None}
    for path in sorted(root.rglob("*"), reverse=True):
        rel = path.relative_to(root).as_posix()
        if path.is_file() and rel not in referenced:
            if check and not path.name.endswith(".tmp") and target.read(rel) != state_mod.read_private(path):
                raise StateError(f"{path} backs up {rel} but no record refers to it and the file differs from it; "
                                 "nothing was deleted. Reinstall SGLang and remove "
                                 f"{state_mod.state_dir(site)}, or restore {rel} from it")
            path.unlink()
        elif path.is_dir() and rel not in referenced and not any(path.iterdir()):
            # (A folder where a recorded backup should be is left for the read to refuse, exit 6:
            # removing it would make "nothing was written" untrue and the loss silent.)
            path.rmdir()
    _remove_empty(root)


def _discard(target: Target, old: State | None, check: bool = False) -> None:
    """Drop what an unfinished run wrote before its commit point (no journal): staging, temp
    files, backups no record refers to, empty folders. Target files are never touched here."""
    site = target.site
    root = state_mod.state_dir(site)
    if not root.is_dir():
        return
    if state_mod.journal_path(site).exists():  # (unlink fails on a read-only mount even when absent)
        state_mod.journal_path(site).unlink()
    if state_mod.pending_dir(site).exists():
        _rmtree(state_mod.pending_dir(site))
    for leftover in sorted(root.rglob(".*.tmp")):
        leftover.unlink(missing_ok=True)
    _prune_backups(target, old, check)
    overwritten = state_mod.overwritten_dir(site)
    if overwritten.is_dir():
        for folder in sorted(overwritten.rglob("*"), reverse=True):
            if folder.is_dir():
                _remove_empty(folder)
        _remove_empty(overwritten)


def stale_journal(target: Target) -> dict[str, Any] | None:
    """The journal of an unfinished run for another release than the one installed, if any."""
    raw = state_mod.read_private(state_mod.journal_path(target.site))
    if raw is None:
        return None
    journal = _parse_journal(raw, state_mod.journal_path(target.site))
    return journal if journal["sglang_version"] != target.version else None


def patched_in_place(target: Target, journal: dict[str, Any], old: State | None) -> list[str]:
    """Files an unfinished run (or the record before it) names that still hold bytes patchkit
    wrote: any of its before/after bytes or a recorded patched hash, but not the pristine ones."""
    pristine: dict[str, set[str | None]] = {}
    ours: dict[str, set[str | None]] = {}
    new = State.from_dict(journal["state"], "journal") if journal["state"] is not None else None
    for recorded in (old, new):
        for rel, record in (recorded.files.items() if recorded else ()):
            pristine.setdefault(rel, set()).add(record.pristine)
            ours.setdefault(rel, set()).add(record.patched)
    for entry in journal["files"]:
        ours.setdefault(entry["rel"], set()).update((entry["before"], entry["after"]))
    found = []
    for rel in sorted(ours):
        now = _sha_or_none(target.read(rel))
        if now is not None and now in ours[rel] and now not in pristine.get(rel, set()):
            found.append(rel)
    return found


def discard_stale_journal(target: Target, journal: dict[str, Any]) -> str:
    """Drop an unfinished run for another release (SGLang was reinstalled under it) with its
    staging, record and backups, writing nothing into the package; refused (exit 4, nothing
    removed) while a file it names still holds patchkit's bytes, whose pristine copy is a backup
    here. Returns the warning to print."""
    from patchkit.store import stale

    site = target.site
    try:
        old = state_mod.load(site)
    except StateError:
        old = None  # a corrupt record beside it: the journal's own hashes still say what is patchkit's
    stale.refuse_patched(target, patched_in_place(target, journal, old), journal["sglang_version"])
    for entry in sorted(state_mod.state_dir(site).iterdir()):
        if entry.name not in (LOCK_FILE, JOURNAL_FILE, OVERWRITTEN_DIR):
            _remove(entry)
    # The journal last: a kill before this line leaves it, and the next run discards again.
    state_mod.journal_path(site).unlink()
    return (f"an unfinished patchkit run for SGLang {journal['sglang_version']} was discarded without writing: "
            f"{target.version} is installed now")


def recover(target: Target, force: bool = False) -> Recovery:
    """Finish (or, before its commit point, discard) a run that was killed. Called under the lock."""
    site = target.site
    state_mod.check_state_dir(site)
    if not state_mod.state_dir(site).is_dir():
        return Recovery()
    journal_file = state_mod.journal_path(site)
    raw = state_mod.read_private(journal_file)
    if raw is None:
        _discard(target, state_mod.load(site), check=True)
        return Recovery()
    journal = _parse_journal(raw, journal_file)
    if journal["sglang_version"] != target.version:
        return Recovery(warnings=(discard_stale_journal(target, journal),))
    for leftover in sorted(state_mod.state_dir(site).rglob(".*.tmp")):
        leftover.unlink(missing_ok=True)
    kept = _complete(target, journal, force, "an unfinished earlier run")
    return Recovery(finished=True, kept=tuple(kept))
