"""Hashing, atomic writes and subprocess calls: the only low-level IO helpers."""

from __future__ import annotations

import errno
import os
import stat
import sys
from pathlib import Path

from patchkit.base.lean_typing import TYPE_CHECKING
from patchkit.base.errors import EnvironmentFailure, PatchkitError

if TYPE_CHECKING:
    from typing import Any, Callable, Sequence
    import subprocess

try:  # OpenSSL's sha256, which hashlib.sha256 is wherever OpenSSL is there, without importing hashlib:
    # it makes every other algorithm's constructor at import (1.5% of a `status`'s instructions)
    from _hashlib import openssl_sha256 as _sha256
except ImportError:  # a Python built without OpenSSL: hashlib's own
    from hashlib import sha256 as _sha256


def sha256(data: bytes) -> str:
    return _sha256(data).hexdigest()


def sha256_file(path: Path) -> str | None:
    try:
        return sha256(read_regular(path))
    except FileNotFoundError:
        return None


_KINDS = {stat.S_IFIFO: "a FIFO", stat.S_IFCHR: "a character device", stat.S_IFBLK: "a block device",
          stat.S_IFSOCK: "a socket"}


class TooLarge(EnvironmentFailure):
    """A file larger than its reader's bound (a config or cache file, not a multi-GB blob)."""


def read_regular(path: Path, limit: int | None = None, flags: int = 0, dir_fd: int | None = None) -> bytes:
    """The bytes of a regular file, read without ever blocking: opened with O_NONBLOCK (a FIFO
    opens at once instead of waiting for a writer), then anything but a regular file is refused
    (EnvironmentFailure, exit 6, naming it; a folder stays IsADirectoryError). With `limit`, a
    larger file is refused before it is read (TooLarge), and one that says it is smaller (a file of
    /proc, one growing) is read no further than `limit` + 1 bytes. FileNotFoundError passes through.
    With `dir_fd`, `path`'s last component is opened in that folder (`path` names it in messages)."""
    fd = os.open(path if dir_fd is None else path.name, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC | flags,
                 dir_fd=dir_fd)
    try:
        info = os.fstat(fd)
        if stat.S_ISDIR(info.st_mode):
            raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR), str(path))
        if not stat.S_ISREG(info.st_mode):
            kind = _KINDS.get(stat.S_IFMT(info.st_mode), "not a regular file")
            raise EnvironmentFailure(f"{path}: not a regular file ({kind}); patchkit refuses to read it")
        if limit is not None and info.st_size > limit:
            raise TooLarge(f"{path}: {info.st_size:,} bytes, more than the {limit:,} patchkit reads from such a "
                           "file; refused")
        os.set_blocking(fd, True)
        chunks, size = [], 0
        while chunk := os.read(fd, 1 << 20 if limit is None else min(1 << 20, limit + 1 - size)):
            chunks.append(chunk)
            size += len(chunk)
            if limit is not None and size > limit:  # it grew while being read, or its size said less
                raise TooLarge(f"{path}: more than the {limit:,} bytes patchkit reads from such a file; refused")
        return b"".join(chunks)
    finally:
        os.close(fd)


def _named(exc: OSError, path: Path) -> OSError:
    """The same error, naming the file (a write or fsync on a descriptor names none)."""
    if exc.filename is None:
        return type(exc)(exc.errno, exc.strerror, str(path))
    return exc


def fsync_dir(directory: Path) -> None:
    """fsync a folder: the renames and creations in it are on disk (an error names the folder)."""
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    except OSError as exc:
        raise _named(exc, directory) from None
    finally:
        os.close(fd)


def write_temp_beside(path: Path, data: bytes, mode: int | None = None, owner: tuple[int, int] | None = None) -> Path:
    """Write data to a synced temp file in path's folder, ready for os.replace; `owner` =
    (uid, gid) it is given (kept as far as this process may give it, as `cp -p` does)."""
    if not path.parent.is_dir():
        path.parent.mkdir(parents=True, exist_ok=True)
    import tempfile  # here, as subprocess below: a read-only status needs neither

    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    except OSError as exc:  # it names the temporary file it tried; the folder is what refused it
        raise type(exc)(exc.errno, exc.strerror, str(path.parent)) from None
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        if owner is not None:
            _chown(tmp, *owner)
        if mode is not None:
            os.chmod(tmp, mode)  # after chown, which clears set-id bits
    except OSError as exc:
        os.unlink(tmp)
        raise _named(exc, path) from None
    except BaseException:
        os.unlink(tmp)
        raise
    return Path(tmp)


def _chown(path: str, uid: int, gid: int) -> None:
    st = os.stat(path)
    if (st.st_uid, st.st_gid) == (uid, gid):
        return
    try:
        os.chown(path, uid, gid)
    except PermissionError:
        # Not root: only a group this user belongs to can be given; the owner stays ours.
        try:
            os.chown(path, -1, gid)
        except PermissionError:
            pass


def atomic_write(path: Path, data: bytes, mode: int | None = None, owner: tuple[int, int] | None = None) -> None:
    """Replace path with data so that a reader (or a crash) sees old or new bytes, never half."""
    tmp = write_temp_beside(path, data, mode, owner)
    try:
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    fsync_dir(path.parent)


def replace_or_keep(path: Path, data: bytes, mode: int | None = None) -> None:
    """A file the user named (`-o FILE`) replaced by `data` as `atomic_write` does, or, on any
    failure, the sync of its folder after the rename included, left as it was: the earlier file
    (hard-linked aside first) put back, or the new one removed where there was none. Not for a
    commit point (the store's journal): there a rename that happened is kept."""
    tmp = write_temp_beside(path, data, mode)
    aside: Path | None = None
    replaced = False
    try:
        if os.path.lexists(path):
            aside = tmp.with_name(tmp.name + ".earlier")
            os.link(path, aside, follow_symlinks=False)
        os.replace(tmp, path)
        replaced = True
        fsync_dir(path.parent)
    except BaseException:
        if not replaced:
            tmp.unlink(missing_ok=True)
        elif aside is not None:
            os.replace(aside, path)
            aside = None
        else:
            path.unlink(missing_ok=True)
        raise
    finally:
        if aside is not None:
            aside.unlink(missing_ok=True)


def write_new_folder(folder: Path, files: dict[str, bytes], mode: int = 0o644) -> None:
    """`folder` (absent, or an empty folder) made to hold `files` ({'/'-separated path: bytes}),
    whole or not at all: written and synced in a staging folder beside it (`.NAME.patchkit-new-*`),
    then renamed onto it (a rename replaces an empty folder), its parent synced. On any failure,
    that sync included, the staging folder is removed and `folder` is as it was (absent, or empty
    with its mode); the error names the file or folder it was about. An empty `folder` whose
    parent cannot be written is filled from a staging folder inside it (`_fill_in_place`)."""
    import shutil
    import tempfile

    parent = folder.parent
    if not parent.is_dir():
        parent.mkdir(parents=True, exist_ok=True)
    earlier = os.stat(folder).st_mode & 0o7777 if folder.is_dir() else None
    try:
        staged = Path(tempfile.mkdtemp(prefix=f".{folder.name}.patchkit-new-", dir=parent))
    except OSError as exc:
        if earlier is not None and exc.errno in (errno.EACCES, errno.EPERM, errno.EROFS) and \
                os.access(folder, os.W_OK | os.X_OK):
            return _fill_in_place(folder, files, mode)
        raise type(exc)(exc.errno, exc.strerror, str(parent)) from None
    renamed = False
    try:
        _stage(staged, files, mode)
        os.chmod(staged, 0o755 if earlier is None else earlier)
        try:
            os.rename(staged, folder)
        except OSError as exc:
            raise type(exc)(exc.errno, exc.strerror, str(folder)) from None
        renamed = True
        fsync_dir(parent)
    except BaseException:
        if renamed:  # the parent's sync failed: the folder taken back out, the empty one it replaced made again
            os.rename(folder, staged)
            if earlier is not None:
                os.mkdir(folder)
                os.chmod(folder, earlier)
        shutil.rmtree(staged, ignore_errors=True)
        raise


def _fill_in_place(folder: Path, files: dict[str, bytes], mode: int) -> None:
    """The empty, writable `folder` filled from a staging folder inside it, each of its entries
    then moved up; on any failure every entry moved up is removed again (it was empty)."""
    import shutil
    import tempfile

    staged = Path(tempfile.mkdtemp(prefix=".patchkit-new-", dir=folder))
    moved: list[Path] = []
    try:
        _stage(staged, files, mode)
        for name in sorted(os.listdir(staged)):
            os.rename(staged / name, folder / name)
            moved.append(folder / name)
        os.rmdir(staged)
        fsync_dir(folder)
    except BaseException:
        for path in moved:
            if path.is_dir() and not path.is_symlink():
                shutil.rmtree(path)
            else:
                path.unlink()
        shutil.rmtree(staged, ignore_errors=True)
        raise


def _stage(staged: Path, files: dict[str, bytes], mode: int) -> None:
    """`files` written into the new folder `staged`, each file and folder synced."""
    made = {staged}
    for rel, data in files.items():
        path = staged / rel
        if path.parent not in made:
            path.parent.mkdir(parents=True, exist_ok=True)
            made.update(p for p in (path.parent, *path.parent.parents) if p == staged or staged in p.parents)
        write_new_synced(path, data, mode)
    for here in sorted(made, key=lambda p: -len(p.parts)):
        fsync_dir(here)


def write_new_synced(path: Path, data: bytes, mode: int) -> None:
    """`path`, which must not exist yet, made holding `data` with `mode`, synced (an error names it)."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, mode)
        try:
            write_all_synced(fd, data, mode)
        finally:
            os.close(fd)
    except OSError as exc:
        raise _named(exc, path) from None


def write_all_synced(fd: int, data: bytes, mode: int) -> None:
    """All of `data` written to `fd` (one os.write may take less), its mode set, synced."""
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]
    os.fchmod(fd, mode)
    os.fsync(fd)


def dies_with_parent() -> Callable[[], None] | None:
    """A `preexec_fn` that makes the child die with this process (Linux PR_SET_PDEATHSIG: the
    kernel sends it SIGKILL when patchkit exits, a SIGKILL of patchkit included), so that no
    pip outlives the run that started it. None where the platform has no such call."""
    if not sys.platform.startswith("linux"):
        return None
    import ctypes  # here: only a run that starts pip pays for it (and for signal's enums)
    import signal

    try:
        prctl = ctypes.CDLL(None, use_errno=True).prctl  # looked up here, not in the forked child
    except (OSError, AttributeError):
        return None
    parent = os.getpid()

    def arm() -> None:
        prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
        if os.getppid() != parent:  # the parent died before the call: nobody will signal us
            os._exit(1)

    return arm


_PR_SET_PDEATHSIG = 1


def run(argv: Sequence[str], what: str) -> subprocess.CompletedProcess[str]:
    """Run a command that dies with patchkit; a failure becomes one PatchkitError line naming `what`."""
    try:
        import subprocess

        proc = subprocess.run(list(argv), capture_output=True, text=True, check=False, preexec_fn=dies_with_parent())
    except OSError as exc:
        raise PatchkitError(f"{what}: {exc}") from exc
    if proc.returncode != 0:
        tail = (proc.stderr or proc.stdout).strip().splitlines()
        reason = tail[-1] if tail else f"exit code {proc.returncode}"
        raise PatchkitError(f"{what}: {reason}")
    return proc


class BadJson(ValueError):
    """JSON patchkit was given cannot be used: `kind` says why (`NESTED_TOO_DEEP`: Python's parser
    gave up on the nesting; `NOT_JSON`: not JSON at all, `detail` says where; `NOT_AN_OBJECT`:
    JSON, but not the object the caller reads). Each caller words its own one-line message."""

    NESTED_TOO_DEEP, NOT_JSON, NOT_AN_OBJECT = "nested too deep", "not JSON", "not an object"

    def __init__(self, kind: str, detail: str = "") -> None:
        super().__init__(f"{kind} ({detail})" if detail else kind)
        self.kind, self.detail = kind, detail


def parse_json(data: bytes | str, want_object: bool = True) -> Any:
    """`json.loads(data)`, its ways of failing as one `BadJson` (a RecursionError for hostile
    nesting, a ValueError for bytes that are not JSON or not UTF-8 (JSON's own encoding, RFC
    8259), a value that is not a dict where `want_object`)."""
    import json

    try:
        found = json.loads(data.decode("utf-8") if isinstance(data, bytes) else data)
    except RecursionError:
        raise BadJson(BadJson.NESTED_TOO_DEEP) from None
    except json.JSONDecodeError as exc:
        raise BadJson(BadJson.NOT_JSON, f"{exc.msg}, line {exc.lineno}") from None
    except ValueError as exc:  # bytes that are not UTF-8 (UnicodeDecodeError)
        raise BadJson(BadJson.NOT_JSON, str(exc)) from None
    if want_object and not isinstance(found, dict):
        raise BadJson(BadJson.NOT_AN_OBJECT)
    return found
