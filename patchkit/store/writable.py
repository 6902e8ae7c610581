"""Whether this process can replace the files a plan writes, found before the commit point.

A commit moves each staged file over its target (a rename into the target's folder) only after
the journal is written; a target that cannot be replaced then (an immutable file, a folder this
user may not write) leaves a half-finished run that the journal rolls forward later. So before
anything is written, each target file is opened for writing and each folder that receives a file
is probed, without changing either:
- a file: `open(O_WRONLY)` without O_TRUNC or O_CREAT, closed at once (not a byte written, no
  time stamp changed; an inotify watcher sees a close-after-write event). `os.access` is not
  enough: root passes it for an immutable file, which refuses the open (EPERM). A file whose
  mode alone denies this user writing (0444) is replaced by a rename all the same, which needs
  only its folder: it passes, unless the folder is sticky and neither it nor the file is ours
  (then the rename is refused too); an immutable or append-only file (EPERM) never passes;
- a folder: an unnamed file in it (`O_TMPFILE`), which never gets a name, so a kill during the
  check leaves nothing in the tree; where the file system has no O_TMPFILE, `os.access`.
"""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path

from patchkit.base.errors import environment_failure, is_environment_failure

_NO_TMPFILE = (errno.EOPNOTSUPP, errno.EISDIR, errno.EINVAL)  # the file system lacks O_TMPFILE
_AFTER = "nothing was written (patchkit checks that it can replace every file before it changes any)"


def check(files: list[Path], removed: list[Path] = ()) -> None:  # type: ignore[assignment]
    """Raise EnvironmentFailure (exit 6) naming the first of `files` (to be replaced or added)
    or `removed` that this process cannot write, or whose folder it cannot write."""
    folders: dict[Path, None] = {}
    for path in [*files, *removed]:
        if os.path.lexists(path):
            _check_file(path)
        folders[_existing_folder(path.parent)] = None
    for folder in folders:
        _check_folder(folder)


def _existing_folder(folder: Path) -> Path:
    """The folder itself, or the nearest one above it that exists (a file added in a new folder)."""
    while not folder.is_dir() and folder != folder.parent:
        folder = folder.parent
    return folder


def _check_file(path: Path) -> None:
    try:
        fd = os.open(path, os.O_WRONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError as exc:
        if exc.errno == errno.EACCES and _renamed_over(path):
            return  # its folder is checked next: the rename needs that, not the file
        if not is_environment_failure(exc):
            raise
        raise environment_failure(exc, _AFTER) from None
    os.close(fd)


def _renamed_over(path: Path) -> bool:
    """Whether a file this user may not open for writing can still be replaced by a rename in
    its folder: its mode bits explain the refusal (not an ACL or a security module), and a
    sticky folder (as /tmp) lets only the file's or the folder's owner rename over it."""
    try:
        info, folder = os.lstat(path), os.stat(path.parent)
    except OSError:
        return False
    if not stat.S_ISREG(info.st_mode) or not _mode_denies_write(info):
        return False
    uid = os.geteuid()
    return not folder.st_mode & stat.S_ISVTX or uid in (info.st_uid, folder.st_uid)


def _mode_denies_write(info: os.stat_result) -> bool:
    """The write bit of the class (owner, group, others) this process falls in is off."""
    if os.geteuid() == info.st_uid:
        return not info.st_mode & stat.S_IWUSR
    if info.st_gid == os.getegid() or info.st_gid in os.getgroups():
        return not info.st_mode & stat.S_IWGRP
    return not info.st_mode & stat.S_IWOTH


def _check_folder(folder: Path) -> None:
    try:
        fd = os.open(folder, os.O_WRONLY | os.O_TMPFILE, 0o600)
    except OSError as exc:
        if exc.errno in _NO_TMPFILE:
            if not os.access(folder, os.W_OK | os.X_OK):
                raise environment_failure(OSError(errno.EACCES, os.strerror(errno.EACCES), str(folder)), _AFTER) from None
            return
        if not is_environment_failure(exc):
            raise
        raise environment_failure(exc, _AFTER) from None
    os.close(fd)
