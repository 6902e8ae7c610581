"""A folder's files reached without ever leaving it: every name is a plain relative path (no `..`,
no absolute path, no NUL or control character), and every component is opened relative to its
folder's descriptor with O_NOFOLLOW, so a symlink (or a file where a folder should be) anywhere
on the way is refused, never followed, on read, write, rename and delete alike.

`bump` keeps its folder (DIR) with these: a record read back from DIR names files in it, and DIR
is the user's, so neither a name nor a symlink there may take a write, a read or a delete outside.
"""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from patchkit.base.errors import EnvironmentFailure
from patchkit.base.lean_typing import NamedTuple
from patchkit.base.util import read_regular, write_all_synced

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


class NotPlain(EnvironmentFailure):
    """A symlink, or something other than a plain file or folder, where a confined path goes (exit 6)."""


def bad_name(rel: object) -> str | None:
    """Why `rel` is not a plain path inside a folder ('/'-separated, relative, no `.` or `..`
    component, no empty component, no NUL or control character); None when it is one."""
    if not isinstance(rel, str) or not rel:
        return "not a file name"
    if rel.startswith("/"):
        return "an absolute path"
    if any(ord(ch) < 32 or ord(ch) == 127 for ch in rel) or "\\" in rel:
        return "a control character or backslash in it"
    parts = rel.split("/")
    if any(part in ("", ".", "..") for part in parts):
        return "a '.', '..' or empty component in it"
    return None


def _refuse(root: Path, rel: str, what: str) -> NotPlain:
    return NotPlain(f"{root / rel}: {what}; patchkit does not follow it out of {root} (remove it, or name another "
                    "folder)")


@contextmanager
def folder(root: Path, rel: str = "", create: bool = False) -> Iterator[int]:
    """A descriptor of the folder `rel` under `root` (`root` itself for ""), each component opened
    without following a symlink; with `create`, missing folders are made. NotPlain where a
    component is a symlink or not a folder; FileNotFoundError where one is missing."""
    fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        done: list[str] = []
        for part in [p for p in rel.split("/") if p]:
            done.append(part)
            try:
                child = os.open(part, _DIR_FLAGS, dir_fd=fd)
            except FileNotFoundError:
                if not create:
                    raise
                try:
                    os.mkdir(part, 0o755, dir_fd=fd)
                except FileExistsError:
                    pass
                child = os.open(part, _DIR_FLAGS, dir_fd=fd)
            except OSError as exc:
                if exc.errno in (errno.ELOOP, errno.ENOTDIR):
                    raise _refuse(root, "/".join(done), _kind(fd, part)) from None
                raise
            os.close(fd)
            fd = child
        yield fd
    finally:
        os.close(fd)


def _kind(fd: int, name: str) -> str:
    try:
        mode = os.stat(name, dir_fd=fd, follow_symlinks=False).st_mode
    except OSError:
        return "not a folder"
    return "a symlink" if stat.S_ISLNK(mode) else "not a folder" if not stat.S_ISDIR(mode) else "a folder"


def _split(rel: str) -> tuple[str, str]:
    parent, _, name = rel.rpartition("/")
    return parent, name


def lstat(root: Path, rel: str) -> os.stat_result | None:
    """The entry `rel` itself (a symlink is not followed); None where it or a folder on its way is
    missing. NotPlain where a folder on its way is a symlink or a file."""
    parent, name = _split(rel)
    try:
        with folder(root, parent) as fd:
            return os.stat(name, dir_fd=fd, follow_symlinks=False)
    except FileNotFoundError:
        return None


def kind(root: Path, rel: str) -> str:
    """"file", "folder" or "missing"; NotPlain for a symlink or anything else, on the way or at `rel`."""
    info = lstat(root, rel)
    if info is None:
        return "missing"
    if stat.S_ISREG(info.st_mode):
        return "file"
    if stat.S_ISDIR(info.st_mode):
        return "folder"
    raise _refuse(root, rel, "a symlink" if stat.S_ISLNK(info.st_mode) else "not a plain file or folder")


def read(root: Path, rel: str, limit: int | None = None) -> bytes:
    """The bytes of the plain file `rel` (FileNotFoundError where missing; NotPlain for a symlink)."""
    parent, name = _split(rel)
    with folder(root, parent) as fd:
        try:
            return read_regular(root / rel, limit, flags=os.O_NOFOLLOW, dir_fd=fd)
        except OSError as exc:
            if exc.errno == errno.ELOOP:
                raise _refuse(root, rel, "a symlink") from None
            raise


def write(root: Path, rel: str, data: bytes, mode: int = 0o644) -> None:
    """`rel` replaced by `data` (a temp file beside it, synced, renamed over it, its folder synced);
    the folders on its way are made."""
    parent, name = _split(rel)
    with folder(root, parent, create=True) as fd:
        tmp = f".{name}.{os.getpid()}.tmp"
        handle = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, mode, dir_fd=fd)
        try:
            try:
                write_all_synced(handle, data, mode)
            except OSError as exc:  # a write or fsync on a descriptor names no file: name it
                raise OSError(exc.errno, exc.strerror, str(root / rel)) from None
            finally:
                os.close(handle)
            try:
                os.rename(tmp, name, src_dir_fd=fd, dst_dir_fd=fd)
            except OSError as exc:
                raise OSError(exc.errno, exc.strerror, str(root / rel)) from None
        except BaseException:
            try:
                os.unlink(tmp, dir_fd=fd)
            except OSError:
                pass
            raise
        try:
            os.fsync(fd)
        except OSError as exc:
            raise OSError(exc.errno, exc.strerror, str(root / parent) if parent else str(root)) from None


def rename(root: Path, src: str, dst: str) -> None:
    """Move `src` to `dst` within `root` (the folders on `dst`'s way made); `dst` is replaced."""
    src_parent, src_name = _split(src)
    dst_parent, dst_name = _split(dst)
    with folder(root, src_parent) as src_fd, folder(root, dst_parent, create=True) as dst_fd:
        try:
            os.rename(src_name, dst_name, src_dir_fd=src_fd, dst_dir_fd=dst_fd)
        except OSError as exc:  # named by the whole paths (it held only the names in their folders)
            raise OSError(exc.errno, exc.strerror, f"{root / src} -> {root / dst}") from None


def unlink(root: Path, rel: str) -> bool:
    """Remove the plain file `rel` (a symlink there is refused, never followed); False where missing."""
    parent, name = _split(rel)
    try:
        with folder(root, parent) as fd:
            info = os.stat(name, dir_fd=fd, follow_symlinks=False)
            if not stat.S_ISREG(info.st_mode):
                raise _refuse(root, rel, "a symlink" if stat.S_ISLNK(info.st_mode) else "not a plain file")
            os.unlink(name, dir_fd=fd)
            return True
    except FileNotFoundError:
        return False


def rmdir_empty(root: Path, rel: str) -> None:
    """Remove the folder `rel` and each folder above it (below `root`) that is left empty; one
    already gone is passed over (a run killed half-way through this left the ones above it)."""
    while rel:
        parent, name = _split(rel)
        try:
            with folder(root, parent) as fd:
                os.rmdir(name, dir_fd=fd)
        except FileNotFoundError:
            pass
        except OSError as exc:
            if exc.errno in (errno.ENOTEMPTY, errno.EEXIST, errno.ENOTDIR):
                return
            raise
        rel = parent


def remove_tree(root: Path, rel: str) -> None:
    """Remove the folder `rel` and everything in it, never following a symlink (one in it is
    removed as a link); nothing where it is missing."""
    parent, name = _split(rel)
    try:
        with folder(root, parent) as fd:
            info = os.stat(name, dir_fd=fd, follow_symlinks=False)
            if not stat.S_ISDIR(info.st_mode):
                raise _refuse(root, rel, "not a folder")
            _remove_folder(fd, name)
    except FileNotFoundError:
        pass


def _remove_folder(fd: int, name: str) -> None:
    """Remove the folder `name` of the folder open as `fd` and everything in it, depth first,
    each entry by its descriptor (a symlink is unlinked, never followed)."""
    child = os.open(name, _DIR_FLAGS, dir_fd=fd)
    try:
        for entry in os.listdir(child):
            if stat.S_ISDIR(os.stat(entry, dir_fd=child, follow_symlinks=False).st_mode):
                _remove_folder(child, entry)
            else:
                os.unlink(entry, dir_fd=child)
    finally:
        os.close(child)
    os.rmdir(name, dir_fd=fd)


def files(root: Path, rel: str = "") -> list[str]:
    """Every plain file under the folder `rel` ('/'-separated, relative to `root`), sorted; NotPlain
    for a symlink or anything but a plain file or folder in it."""
    found: list[str] = []

    def walk(fd: int, prefix: str) -> None:
        for entry in sorted(os.listdir(fd)):
            here = f"{prefix}{entry}"
            info = os.stat(entry, dir_fd=fd, follow_symlinks=False)
            if stat.S_ISREG(info.st_mode):
                found.append(here)
            elif stat.S_ISDIR(info.st_mode):
                child = os.open(entry, _DIR_FLAGS, dir_fd=fd)
                try:
                    walk(child, here + "/")
                finally:
                    os.close(child)
            else:
                raise _refuse(root, here, "a symlink" if stat.S_ISLNK(info.st_mode) else "not a plain file or folder")

    with folder(root, rel) as top:
        walk(top, f"{rel}/" if rel else "")
    return found


def sync(root: Path, rel: str = "") -> None:
    """fsync the folder `rel`: the renames and removals in it are on disk (an error names it)."""
    with folder(root, rel) as fd:
        try:
            os.fsync(fd)
        except OSError as exc:
            raise OSError(exc.errno, exc.strerror, str(root / rel) if rel else str(root)) from None


class Checked(NamedTuple):
    """One entry `plain_tree` checked: a folder, or the plain file it found there (for a symlink to a
    file inside the root, that file), known by its device and inode to the copy that follows."""
    rel: str  # '/'-separated, relative to the root
    folder: bool
    dev: int
    ino: int
    via_link: bool = False  # a symlink to a file inside the root: opened through it, its target checked


def plain_tree(root: Path, skip: Callable[[str, list[str]], set[str]] | None = None) -> list[Checked]:
    """Every entry of the folder `root` (what `skip(folder, names)` leaves out is not looked at, as
    `shutil.copytree`'s ignore) is a plain file, a folder, or a symlink to a plain file inside
    `root`: NotPlain (exit 6) naming the first that is not (a symlink out of `root`, to nothing, to
    a folder, even one inside: a copy that follows it may never end; a FIFO, socket or device).
    Returns what it checked, folders before what they hold (`copy_checked` copies exactly that)."""
    top = os.path.realpath(root)
    checked: list[Checked] = []
    for here, folders, names in os.walk(root):
        left_out = skip(here, [*folders, *names]) if skip else set()
        folders[:] = sorted(name for name in folders if name not in left_out)
        for name in sorted({*folders, *names} - left_out):
            path = os.path.join(here, name)
            rel = os.path.relpath(path, root).replace(os.sep, "/")
            info = os.lstat(path)
            mode = info.st_mode
            if stat.S_ISREG(mode) or stat.S_ISDIR(mode):
                checked.append(Checked(rel, stat.S_ISDIR(mode), info.st_dev, info.st_ino))
                continue
            if not stat.S_ISLNK(mode):
                raise NotPlain(f"{path}: not a plain file or folder (a FIFO, socket or device); patchkit does not "
                               "read it (remove it)")
            target = os.path.realpath(path)
            if not os.path.exists(target):
                raise NotPlain(f"{path}: a symlink to {target}, which does not exist; patchkit cannot read it "
                               "(remove it, or put back what it points to)")
            if not target.startswith(top + os.sep):
                raise _refuse(root, rel, f"a symlink to {target}, outside it")
            if os.path.isdir(target):
                raise NotPlain(f"{path}: a symlink to the folder {target}; patchkit follows a symlink only to a "
                               "file of its folder (copy the folder there instead)")
            if not os.path.isfile(target):
                raise NotPlain(f"{path}: a symlink to {target}, not a plain file (a FIFO, socket or device); "
                               "patchkit does not read it (remove it)")
            reached = os.stat(target)
            checked.append(Checked(rel, False, reached.st_dev, reached.st_ino, via_link=True))
    return checked


def copy_checked(root: Path, checked: list[Checked], dest: Path) -> None:
    """Copy what `plain_tree` checked of `root` into the new folder `dest`, and nothing else: each
    folder on the way opened without following a symlink, each file opened without following one
    (through the link for a link `plain_tree` let through), and refused (NotPlain, exit 6) unless
    the file opened is the one checked (its device and inode): an entry swapped for a symlink, or
    for another file, since the check is never followed or copied. Each copy is synced."""
    os.mkdir(dest)
    for entry in checked:
        if entry.folder:
            os.mkdir(dest / entry.rel)
            continue
        parent, name = _split(entry.rel)
        with folder(root, parent) as fd:
            flags = os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC | (0 if entry.via_link else os.O_NOFOLLOW)
            try:
                source = os.open(name, flags, dir_fd=fd)
            except OSError as exc:
                if exc.errno == errno.ELOOP:
                    raise _refuse(root, entry.rel, "a symlink since it was checked") from None
                raise
        try:
            info = os.fstat(source)
            if not stat.S_ISREG(info.st_mode) or (info.st_dev, info.st_ino) != (entry.dev, entry.ino):
                raise _refuse(root, entry.rel, "another file than the one checked (it was swapped since)")
            _copy_fd(source, dest / entry.rel, stat.S_IMODE(info.st_mode))
        finally:
            os.close(source)


def copy_file(source: Path, dest: Path, checked: Checked | None = None) -> None:
    """`source`'s bytes (and mode) into the new file `dest`, synced; with `checked`, refused
    (NotPlain) unless the file opened is that one (its device and inode)."""
    fd = os.open(source, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise NotPlain(f"{source}: not a plain file; patchkit does not copy it")
        if checked is not None and (info.st_dev, info.st_ino) != (checked.dev, checked.ino):
            raise NotPlain(f"{source}: another file than the one checked (it was swapped since); patchkit does not "
                           "copy it (run again)")
        _copy_fd(fd, dest, stat.S_IMODE(info.st_mode))
    finally:
        os.close(fd)


def _copy_fd(source: int, dest: Path, mode: int) -> None:
    os.set_blocking(source, True)
    out = os.open(dest, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    try:
        while chunk := os.read(source, 1 << 20):
            view = memoryview(chunk)
            while view:
                view = view[os.write(out, view):]
        os.fchmod(out, mode)
        os.fsync(out)
    except OSError as exc:
        if exc.filename is None:  # a failed write or fsync: name the file in the one-line error
            raise OSError(exc.errno, exc.strerror, str(dest)) from None
        raise
    finally:
        os.close(out)
