"""The PatchkitError tree; each error carries the exit code the CLI maps it to."""

from __future__ import annotations

import errno

from patchkit.base.lean_typing import TYPE_CHECKING
from patchkit.base import constants

if TYPE_CHECKING:
    from typing import Any


class PatchkitError(Exception):
    """An expected failure with a one-line, user-facing message."""

    exit_code = constants.EXIT_PLAN


class PlanError(PatchkitError):
    """A patch could not be planned or validated; nothing was written."""


class AnchorError(PlanError):
    """A transform's anchor is missing or ambiguous in the target file."""


class StateError(PatchkitError):
    """The state file is unreadable or corrupt."""


class TargetError(PatchkitError):
    """SGLang not found, version mismatch, no patch set, or an unsafe target path."""

    exit_code = constants.EXIT_TARGET


class NotFoundError(TargetError):
    """No SGLang where one was looked for; `searched` names the folders looked in (where a
    `.patchkit/` left by an uninstalled release may be)."""

    def __init__(self, message: str, searched: "tuple[Any, ...] | list[Any]" = ()) -> None:
        super().__init__(message)
        self.searched = tuple(searched)


class FetchError(TargetError):
    """A release could not be downloaded or installed."""


class DriftError(PatchkitError):
    """A file changed outside patchkit; the operation would lose that change."""

    exit_code = constants.EXIT_DRIFT


class UnsafeStateError(TargetError):
    """Something under `.patchkit/` is a symlink or not a plain file or folder: refused."""


class NotPlainStateFile(UnsafeStateError):
    """A FIFO, device or socket under `.patchkit/`: refused like a symlink, with the exit code of a
    wrong file type (6), never read (reading a FIFO would block)."""

    exit_code = constants.EXIT_ENVIRONMENT


class LockTimeout(PatchkitError):
    """Another patchkit run held the folder's lock longer than --lock-timeout."""

    exit_code = constants.EXIT_LOCKED


class EnvironmentFailure(PatchkitError):
    """Reading or writing a file failed for a reason of the environment (read-only, permission,
    no space, I/O error, wrong file type, undecodable bytes)."""

    exit_code = constants.EXIT_ENVIRONMENT


class Interrupted(PatchkitError):
    """Ctrl-C, with what was done about the files in the message."""

    exit_code = constants.EXIT_INTERRUPTED


# Ctrl-C before a command changed any file (the error handler's line; apply and revert say more).
INTERRUPTED_EARLY = "interrupted before any file was changed; every file was left as it was"


class UsageError(PatchkitError):
    exit_code = constants.EXIT_USAGE


class BuildError(PatchkitError):
    """No container builder answers, or building or pushing an image failed."""


# errno values that say "the environment", not "a bug in patchkit".
ENVIRONMENT_ERRNOS = frozenset({
    errno.EROFS, errno.EACCES, errno.EPERM, errno.ENOSPC, errno.EDQUOT, errno.EIO, errno.EISDIR,
    errno.ENOTDIR, errno.ELOOP, errno.EFBIG, errno.ENAMETOOLONG, errno.ETXTBSY, errno.EMLINK,
})


def is_environment_failure(exc: BaseException) -> bool:
    return isinstance(exc, OSError) and exc.errno in ENVIRONMENT_ERRNOS


def environment_failure(exc: OSError, after: str = "") -> EnvironmentFailure:
    """One line naming the file and the cause, e.g. `.../x.py: No space left on device (ENOSPC)`."""
    name = errno.errorcode.get(exc.errno or 0, str(exc.errno))
    where = f"{exc.filename}: " if exc.filename is not None else ""
    return EnvironmentFailure(f"{where}{exc.strerror or exc} ({name})" + (f"; {after}" if after else ""))


def undecodable(path: object, exc: UnicodeDecodeError) -> EnvironmentFailure:
    return EnvironmentFailure(f"{path}: undecodable bytes ({exc.encoding} cannot decode byte {exc.object[exc.start:exc.start + 1]!r} at offset {exc.start})")
