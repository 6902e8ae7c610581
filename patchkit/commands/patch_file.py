"""Reading the PATCH file a command is given: a regular file, read whole, or one line and its
exit code (a missing file is a usage error; a FIFO, a folder or an unreadable file an
environment failure, exit 6; one larger than unidiff.FILE_LIMIT a usage error, read no further)
before anything else is done."""

from __future__ import annotations

import errno
import os
import stat

from patchkit.base.errors import EnvironmentFailure, UsageError, environment_failure
from patchkit.diffs import unidiff


def read_patch_file(value: str) -> bytes:
    try:
        # O_NONBLOCK: opening a FIFO must not wait for a writer; it is refused below.
        fd = os.open(value, os.O_RDONLY | os.O_NONBLOCK)
    except FileNotFoundError:
        raise UsageError(f"{value}: no such file (PATCH is a .patch / .diff file)") from None
    except OSError as exc:
        raise environment_failure(exc, "PATCH must be a readable file") from None
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            kind = "a folder" if stat.S_ISDIR(mode) else "a FIFO" if stat.S_ISFIFO(mode) else "not a regular file"
            raise EnvironmentFailure(f"{value}: {kind}, not a diff file ({errno.errorcode.get(errno.EINVAL)}); "
                                     "name a .patch / .diff file")
        if os.fstat(fd).st_size > unidiff.FILE_LIMIT:
            raise unidiff.too_large(value)
        chunks, size = [], 0
        while chunk := os.read(fd, min(1 << 20, unidiff.FILE_LIMIT + 1 - size)):
            chunks.append(chunk)
            size += len(chunk)
            if size > unidiff.FILE_LIMIT:  # it grew while being read, or its size said less
                raise unidiff.too_large(value)
        return b"".join(chunks)
    except OSError as exc:
        if exc.filename is None:
            exc.filename = value
        raise environment_failure(exc, "PATCH must be a readable file") from None
    finally:
        os.close(fd)
