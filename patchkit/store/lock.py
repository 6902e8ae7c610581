"""The lock that serialises patchkit runs on one folder: an flock on `<site>/.patchkit/lock`,
and who holds it (read from /proc/locks on Linux), for the message of a run that waits."""

from __future__ import annotations

import contextlib
import errno
import fcntl
import math
import os
import stat
import time
from pathlib import Path

from patchkit.base.lean_typing import TYPE_CHECKING
from patchkit.base.constants import DEFAULT_LOCK_TIMEOUT, LOCK_FILE, MAX_LOCK_TIMEOUT
from patchkit.base.errors import LockTimeout, NotPlainStateFile, UnsafeStateError, UsageError, environment_failure
from patchkit.store.state import check_state_dir, state_dir

if TYPE_CHECKING:
    from typing import Callable, Iterator


_HOLDER_WIDTH = 200  # characters of the holder's command line that a message names


def lock_holder(site: Path) -> str | None:
    """'PID n: command line' of the process holding the folder's lock, if one does (Linux)."""
    try:
        ino = os.lstat(state_dir(site) / LOCK_FILE).st_ino
        locks = Path("/proc/locks").read_text()
    except OSError:
        return None
    for line in locks.splitlines():
        fields = line.split()
        if len(fields) >= 6 and fields[1] == "FLOCK" and fields[5].rsplit(":", 1)[-1] == str(ino):
            pid = fields[4]
            try:
                # One line, whatever the arguments hold (`python -c` code has newlines).
                cmd = " ".join(Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace").replace("\0", " ").split())
            except OSError:
                cmd = "?"
            if len(cmd) > _HOLDER_WIDTH:
                cmd = cmd[:_HOLDER_WIDTH] + "..."
            return f"PID {pid}: {cmd}"
    return None


@contextlib.contextmanager
def locked(site: Path, timeout: float = DEFAULT_LOCK_TIMEOUT,
           on_wait: Callable[[str], None] | None = None) -> Iterator[None]:
    """Serialize patchkit runs on one folder (flock on `.patchkit/lock`).

    A run that finds the lock taken calls `on_wait` at once with who holds it, and gives up
    with LockTimeout after `timeout` seconds (0: at once). `revert` removes `.patchkit/` with
    the lock file in it; a waiter that then gets the lock on the removed file retries on the
    new one, so two runs never hold the lock at once. On a read-only file system, or a folder
    this process may not write (EACCES, EPERM) with no lock file in it, this run can change
    nothing, so it is not locked out: it goes on and fails only if it must write.
    """
    if not (math.isfinite(timeout) and 0 <= timeout <= MAX_LOCK_TIMEOUT):
        raise UsageError(f"--lock-timeout {timeout:g}: expected a number of seconds from 0 to {MAX_LOCK_TIMEOUT:g}")
    check_state_dir(site)
    path = state_dir(site) / LOCK_FILE
    started = time.monotonic()
    told = False
    while True:
        try:
            path.parent.mkdir(exist_ok=True)
            # O_NONBLOCK: a FIFO put there in a race is opened at once (and refused below), not waited on.
            fd = os.open(path, os.O_RDONLY | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK, 0o644)
        except (FileNotFoundError, FileExistsError) as exc:
            # A finishing run removed `.patchkit/` between the two calls, or inside mkdir (which
            # found it there, then raises EEXIST when it is gone by the time it checks is_dir).
            # The folder itself gone is no race to wait out; neither is one past the timeout.
            if not site.is_dir():
                raise environment_failure(FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT), str(site))) from None
            if time.monotonic() - started > timeout + 1:
                raise environment_failure(exc) from None
            continue
        except OSError as exc:
            if exc.errno == errno.EROFS or (exc.errno in (errno.EACCES, errno.EPERM) and not os.path.lexists(path)):
                # Read-only to this process (a read-only mount, or a tree it may not write, where
                # no lock file exists: nobody holds one): it can change nothing here, and a write
                # fails with exit 6 (before the commit point, see patchkit.store.writable).
                yield
                return
            if exc.errno == errno.ELOOP:
                raise UnsafeStateError(f"{path} is a symlink; patchkit refuses to use it (nothing was written)") from None
            raise environment_failure(exc) from None
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            os.close(fd)
            raise NotPlainStateFile(f"{path} is not a plain file; patchkit refuses to use it (nothing was written)")
        try:
            while True:
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    break
                except BlockingIOError:
                    holder = lock_holder(site) or "another patchkit run"
                    waited = time.monotonic() - started
                    if waited >= timeout:
                        raise LockTimeout(f"{holder} holds the lock on {site}; gave up after {waited:.0f}s "
                                          f"(--lock-timeout {timeout:g})") from None
                    if not told and on_wait is not None:
                        on_wait(f"waiting up to {timeout:g}s for the lock on {site}, held by {holder}")
                        told = True
                    time.sleep(min(0.1, max(0.0, timeout - waited)))
            try:
                same = os.lstat(path).st_ino == os.fstat(fd).st_ino
            except FileNotFoundError:
                same = False
        except BaseException:
            os.close(fd)
            raise
        if same:
            break
        os.close(fd)
    try:
        yield
    finally:
        _release(site, path, fd)


def _release(site: Path, path: Path, fd: int) -> None:
    """Drop the lock and its file: a run leaves no lock behind, and a waiter that got the lock
    on the unlinked file notices (inode check above) and retries on a fresh one. A Ctrl-C
    while it runs waits until it is done (else the lock file gone, an empty `.patchkit/` was
    left in the tree), then reaches the caller as before."""
    with _interrupts_held():
        try:
            with contextlib.suppress(OSError):
                path.unlink()
        finally:
            try:
                os.close(fd)
            finally:
                with contextlib.suppress(OSError):
                    state_dir(site).rmdir()  # only when empty: nothing patched here


@contextlib.contextmanager
def _interrupts_held() -> Iterator[None]:
    """SIGINT and SIGTERM held back (blocked, then delivered) while the body runs."""
    # _signal: the functions the signal module re-exports, loaded with the interpreter; not the
    # enum classes signal makes at import (1% of a no-op apply, which takes the lock).
    import _signal

    if not hasattr(_signal, "pthread_sigmask"):
        yield
        return
    held = _signal.pthread_sigmask(_signal.SIG_BLOCK, {_signal.SIGINT, _signal.SIGTERM})
    try:
        yield
    finally:
        _signal.pthread_sigmask(_signal.SIG_SETMASK, held)
