"""`bump`'s folder, DIR: checked before any work (`check_folder`), written as one step (`write`:
staged, a journal as the commit point, switched; `recover` finishes or undoes a run a kill
interrupted) and read back for `--continue` (`read`). Every path in DIR is reached without
following a symlink (base/confined); nothing of the user's is removed or overwritten.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from patchkit.base import confined
from patchkit.base.errors import Interrupted, UsageError, environment_failure, is_environment_failure
from patchkit.engine.bump_record import (JOURNAL, RECORD, RECORD_LIMIT as _RECORD_LIMIT, REPORT, SCHEMA, LaunchChange,
                                         PatchRow, _PROBE, _STAGING)
from patchkit.engine.bump_record import Damaged as _Damaged, own as _own, plain_file as _plain_file, shaped as _shaped
from patchkit.engine.bump_report import Bump


# What `write` keeps in DIR besides the outputs, all bump's own: the new set while it is written
# (`_STAGING`), the journal that makes the switch one step (`JOURNAL`, the commit point), and the
# probe file `check_folder` makes; a run that was killed leaves them, the next one finishes or undoes it.
_JOURNAL_LIMIT = 16 << 20


def check_folder(folder: Path, option: str = "-o") -> None:
    """DIR is new, empty, or a bump's own folder (written again): nothing of the user's is overwritten;
    and it can be made and written (checked by making it, and a file in it, then removing both).
    A bump's folder's record is read and checked now, before any work (damaged: exit 2), and a
    symlink where bump's own files or its outputs are is refused (exit 6), never followed."""
    import errno
    import os
    import tempfile

    from patchkit.base.errors import EnvironmentFailure

    if folder.exists():
        if not folder.is_dir():
            raise UsageError(f"-o {folder}: not a new or empty folder; name another (nothing of yours is overwritten)")
        names = [p.name for p in folder.iterdir()]
        for name in (RECORD, JOURNAL, _STAGING):
            if name in names:
                confined.kind(folder, name)  # a symlink there: exit 6, before any work
        if RECORD not in names and JOURNAL not in names and any(not _own(name) for name in names):
            raise UsageError(f"-o {folder}: not a new or empty folder; name another (nothing of yours is overwritten)")
        if JOURNAL not in names:  # (a journal is finished first, by `write`; the record is checked then)
            for rel in _earlier_outputs(folder, option):
                confined.kind(folder, rel)
    made = [parent for parent in (folder, *folder.parents) if not parent.exists()]
    try:
        folder.mkdir(parents=True, exist_ok=True)
        try:  # an unnamed file: a kill during the check leaves nothing in DIR
            os.close(os.open(folder, os.O_TMPFILE | os.O_WRONLY | os.O_CLOEXEC, 0o600))
        except OSError as exc:
            if exc.errno not in (errno.EOPNOTSUPP, errno.EISDIR, errno.EINVAL):
                raise
            handle, probe = tempfile.mkstemp(prefix=_PROBE, dir=folder)
            os.close(handle)
            os.unlink(probe)
    except OSError as exc:
        code = errno.errorcode.get(exc.errno or 0, str(exc.errno))
        why = (f"{option} {folder}: cannot make a folder there and write in it ({exc.strerror or exc}, {code}); "
               + ("name another" if option == "-o" else "make it writable and run again"))
        if exc.errno in (errno.EROFS, errno.EACCES, errno.EPERM, errno.ENOSPC, errno.EDQUOT, errno.EIO):
            raise EnvironmentFailure(why) from None
        raise UsageError(why) from None
    finally:
        for parent in made:  # the check leaves nothing behind: the folder is made by `write`
            try:
                parent.rmdir()
            except OSError:
                break


def outputs(bump: Bump) -> list[str]:
    """Every file of DIR the bump wrote (relative paths): the earlier run's, removed before a new plan
    is written into the same DIR, so nothing of a previous move stays beside this one's."""
    return sorted(bump.files)


# --- the record, read back: every name and type checked (a damaged record is exit 2 naming it) ---


def _record(folder: Path, option: str) -> dict[str, Any] | None:
    """DIR's record, checked (bump_record.load; None where there is none): exit 2 naming it where
    it is damaged, 6 where it is a symlink or not a plain file."""
    from patchkit.engine import bump_record

    try:
        return bump_record.load(folder)
    except IsADirectoryError:
        raise UsageError(f"{option} {folder}: {folder / RECORD} is a folder, not the record patchkit bump "
                         "writes; name another folder (nothing of yours is overwritten)") from None
    except _Damaged as exc:
        raise UsageError(f"{option} {folder}: {folder / RECORD} is damaged ({exc}); nothing written; run the bump "
                         "again into a new folder") from None


def _earlier_outputs(folder: Path, option: str) -> dict[str, str | None]:
    """{file: its sha256 as the bump wrote it} of every output the record in DIR names (None: a
    record from before digests were kept), REPORT.md and the record left out."""
    data = _record(folder, option)
    if data is None:
        return {}
    digests = data.get("digests", {})
    return {name: digests.get(name) for name in data.get("outputs", ())}


def _theirs(folder: Path, rel: str, digest: str | None, option: str) -> None:
    """Refuse to remove or replace `rel` unless it holds the bytes the bump wrote there (exit 2)."""
    from patchkit.base.util import sha256

    if digest is not None and sha256(confined.read(folder, rel, _RECORD_LIMIT)) == digest:
        return
    why = "changed since the bump wrote it" if digest is not None else "not a file the record shows the bump wrote"
    raise UsageError(f"{option} {folder}: {folder / rel} is {why}; nothing written (move it out of the folder, or "
                     "name another folder)")


def write(bump: Bump, fresh: bool = True) -> list[str]:
    """DIR: each diff re-made for V, each module patch of a folder copied, each conflicting diff's tree,
    the record and REPORT.md. DIR must be new or empty, or a bump's own folder (nothing of yours
    overwritten). A new plan (`fresh`) replaces the files the earlier record names, each only where
    it still holds the bytes the bump wrote (the record keeps their sha256); `--continue` adds to them.

    Every path is checked before anything is written (a symlink on the way: exit 6; a file of the
    user's where the bump would write or remove one: exit 2). Then the new files are written into
    DIR/.patchkit-bump-new/, the journal naming what to move in and remove is written (the commit
    point), the switch is made and the journal removed. A run killed before the commit point leaves
    DIR as it was (the next run removes the half-written folder); after it, the next run finishes
    the switch (`recover`): DIR holds the earlier set or the new one, never a mix."""
    from patchkit.base.util import sha256

    folder = bump.folder
    option = "-o" if fresh else "--continue"
    check_folder(folder, option)
    folder.mkdir(parents=True, exist_ok=True)
    recover(folder)
    earlier = _earlier_outputs(folder, option)
    kept = {} if fresh else {rel: bump.digests.get(rel, digest) for rel, digest in earlier.items()}
    digests = {**kept, **{rel: sha256(data) for rel, data in bump.files.items()}}
    record = {"schema": SCHEMA, **bump.to_dict(), "python": bump.python, "outputs": sorted(digests),
              "digests": {rel: digests[rel] for rel in sorted(digests) if digests[rel] is not None},
              "inputs": {pid: {"name": name, "data": base64.b64encode(data).decode()}
                         for pid, (name, data) in bump.inputs.items()}}
    new = {**bump.files, RECORD: json.dumps(record, indent=1).encode(), REPORT: bump.markdown().encode()}
    remove = {rel: digest for rel, digest in earlier.items() if rel not in new} if fresh else {}
    for rel, digest in remove.items():  # check first: every file to remove is the bump's own, in DIR
        if confined.kind(folder, rel) == "file":
            _theirs(folder, rel, digest, option)
    for rel in new:  # ... and every file to write goes where nothing of the user's is
        found = confined.kind(folder, rel)
        if found == "folder":
            raise UsageError(f"{option} {folder}: {folder / rel} is a folder where the bump writes a file; nothing "
                             "written (move it out of the folder, or name another folder)")
        if found == "file" and rel not in (RECORD, REPORT):  # (--continue: a tree's file as it read it, re-written)
            _theirs(folder, rel, earlier.get(rel) if fresh else bump.digests.get(rel, earlier.get(rel)), option)
    try:
        for rel, data in new.items():
            confined.write(folder, f"{_STAGING}/{rel}", data)
        confined.write(folder, f"{_STAGING}/{JOURNAL}", json.dumps(
            {"schema": SCHEMA, "add": sorted(new, key=lambda rel: rel == RECORD), "remove": remove}).encode())
    except BaseException:
        confined.remove_tree(folder, _STAGING)
        raise
    try:
        with _interrupts_held():  # from the commit point on, a Ctrl-C waits for the switch to be made
            confined.rename(folder, f"{_STAGING}/{JOURNAL}", JOURNAL)  # the commit point
            confined.sync(folder)
            _switch(folder, _journal(folder))
    except KeyboardInterrupt:
        raise Interrupted(f"interrupted while {folder} was written; its new set had been committed and was put in "
                          "place first: DIR holds it") from None
    except OSError as exc:
        if not is_environment_failure(exc):
            raise
        if confined.kind(folder, JOURNAL) == "file":
            raise environment_failure(exc, f"{folder}'s new set was committed ({JOURNAL}): the next `patchkit bump` "
                                           "on it puts it in place") from None
        if confined.kind(folder, f"{_STAGING}/{JOURNAL}") == "file":  # the commit point not reached: DIR as it was
            confined.remove_tree(folder, _STAGING)
            raise
        # The switch was made (the journal gone): only a sync after it failed.
        raise environment_failure(exc, f"{folder}'s new set is in place, but that it is on disk is not proven (run "
                                       f"`sync {folder}`)") from None
    return outputs(bump)


@contextmanager
def _interrupts_held() -> Iterator[None]:
    """A SIGINT that comes while the body runs is noted, not raised, and raised (KeyboardInterrupt)
    once it is done. Python runs a signal's handler in the main thread whichever thread the signal
    reached, so the handler is swapped there (elsewhere nothing is held)."""
    import signal
    import threading

    if threading.current_thread() is not threading.main_thread():
        yield
        return
    came: list[int] = []
    previous = signal.signal(signal.SIGINT, lambda signum, frame: came.append(signum))
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)
    if came and previous is signal.default_int_handler:
        raise KeyboardInterrupt
    if came and callable(previous):
        previous(signal.SIGINT, None)


def _journal(folder: Path) -> dict[str, Any]:
    try:
        data = json.loads(confined.read(folder, JOURNAL, _JOURNAL_LIMIT))
        if not isinstance(data, dict) or data.get("schema") != SCHEMA:
            raise _Damaged("not a journal patchkit bump wrote")
        _shaped(data.get("add"), "tuple[str, ...]", "add")
        _shaped(data.get("remove"), "dict[str, str | None]", "remove")
        for i, rel in enumerate([*data["add"], *data["remove"]]):
            _plain_file(rel, f"file {i}", nested=True) if rel not in (RECORD, REPORT) else None
    except (ValueError, RecursionError) as exc:
        raise UsageError(f"{folder}: {folder / JOURNAL} is damaged ({exc}); nothing changed; move the folder "
                         "away and run the bump again into a new one") from None
    return data


def _switch(folder: Path, journal: dict[str, Any]) -> None:
    """Roll the journal forward: each new file moved in from the staging folder (the record last),
    each earlier output that still holds the bytes the bump wrote removed, then the journal and the
    staging folder; each step done once however often it is run (a kill in the middle: run again)."""
    from patchkit.base.util import sha256

    touched = {""}
    for rel in journal["add"]:
        if confined.kind(folder, f"{_STAGING}/{rel}") == "file":
            confined.rename(folder, f"{_STAGING}/{rel}", rel)
        touched.add(rel.rpartition("/")[0])
    for rel, digest in journal["remove"].items():
        if confined.kind(folder, rel) == "file" and digest is not None and \
                sha256(confined.read(folder, rel, _RECORD_LIMIT)) == digest:
            confined.unlink(folder, rel)
    for parent in sorted(touched, key=len, reverse=True):
        confined.sync(folder, parent)
    for rel in journal["remove"]:  # the folders of an earlier tree, now empty
        if "/" in rel:
            confined.rmdir_empty(folder, rel.rpartition("/")[0])
    confined.unlink(folder, JOURNAL)
    confined.remove_tree(folder, _STAGING)
    confined.sync(folder)


def recover(folder: Path) -> bool:
    """A `write` into `folder` that was killed: finished where its journal was written (True), else
    its half-written new set removed (DIR is the earlier set); leftovers of `check_folder` removed."""
    if not folder.is_dir():
        return False
    for entry in folder.iterdir():
        if entry.name.startswith(_PROBE):
            confined.unlink(folder, entry.name)
    if confined.kind(folder, JOURNAL) == "file":
        try:
            with _interrupts_held():
                _switch(folder, _journal(folder))
        except KeyboardInterrupt:
            raise Interrupted(f"interrupted; {folder}'s write that an earlier run left unfinished was finished first "
                              "(DIR holds that run's new set); nothing else was done") from None
        return True
    confined.remove_tree(folder, _STAGING)
    return False


def read(folder: Path) -> Bump:
    """The bump a folder holds (`bump --continue DIR`), every part of its record checked: a damaged
    record (a key missing, a value of the wrong type, a name that is not a plain file in DIR) is
    exit 2 naming it; a write of DIR a kill interrupted is finished first."""
    if not folder.is_dir():
        raise UsageError(f"--continue {folder}: no {RECORD} there (write it with `patchkit bump --to V -o DIR`)")
    recover(folder)
    data = _record(folder, "--continue")
    if data is None:
        raise UsageError(f"--continue {folder}: no {RECORD} there (write it with `patchkit bump --to V -o DIR`)")
    rows = tuple(PatchRow.from_dict(row) for row in data["patches"])
    launches = tuple(LaunchChange.from_dict(launch) for launch in data["launches"])
    inputs = {pid: (item["name"], base64.b64decode(item["data"])) for pid, item in data.get("inputs", {}).items()}
    return Bump(str(data["from"]), str(data["to"]), folder, rows, launches, tuple(data.get("notes", ())),
                tuple(data.get("left_out", ())), inputs=inputs, digests=dict(data.get("digests", {})),
                python=data.get("python"), tree=tuple(data.get("tree", ())))
