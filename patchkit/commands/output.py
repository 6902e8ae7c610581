"""The only place that writes to stdout and stderr."""

from __future__ import annotations

import contextlib
import json
import os
import sys

from patchkit.base.lean_typing import TYPE_CHECKING
from patchkit.base.control import escaped

if TYPE_CHECKING:
    from typing import Any


STDOUT = "<stdout>"  # the file name an OSError of a write to stdout carries (the error line names it)
CLOSED_STDOUT = "stdout is closed; nothing was done (to discard the output: > /dev/null)"


def line(text: str = "") -> None:
    """One line for people: control characters escaped (a patch id or title from a diff file or a
    server's answer could otherwise forge lines or drive the terminal); raw output: `text`, `data`."""
    _write(one_line(text) + "\n")


def text(raw: str) -> None:
    _write(raw)


def data(raw: bytes) -> None:
    """Bytes as they are (a diff holds the files' own bytes: CRLF, a BOM, any encoding)."""
    try:
        sys.stdout.flush()
        sys.stdout.buffer.write(raw)
    except OSError as exc:
        raise stdout_failed(exc) from None


def _write(raw: str) -> None:
    try:
        sys.stdout.write(raw)
    except OSError as exc:
        raise stdout_failed(exc) from None


def stdout_failed(exc: OSError) -> OSError:
    """`exc`, raised by a write to stdout (a full disk, an I/O error), naming stdout; what is left
    to write goes nowhere from now on: stdout's file descriptor is moved onto the null device, so
    that neither the error handler's output nor Python's own last flush of what stdout still
    buffers fails again (which would print a traceback and exit 120)."""
    if exc.filename is None:
        exc.filename = STDOUT
    with contextlib.suppress(OSError, ValueError):  # not a real file (tests capture stdout in memory)
        _onto_null(sys.stdout.fileno())
    return exc


def _onto_null(fd: int) -> None:
    null = os.open(os.devnull, os.O_WRONLY)
    if null != fd:
        os.dup2(null, fd)
        os.close(null)


def closed_streams() -> list[str]:
    """The standard output streams this process was started without (`patchkit list >&-`: Python
    then sets sys.stdout to None), by name; each is now the null device, on its own file descriptor
    so that no file patchkit opens takes that number (a child process would write into it)."""
    closed = []
    for fd, name in ((1, "stdout"), (2, "stderr")):
        if getattr(sys, name) is None:
            _onto_null(fd)
            setattr(sys, name, open(fd, "w", errors="backslashreplace", closefd=False))
            closed.append(name)
    return closed


def one_line(message: str) -> str:
    """`message` with every control character escaped (patchkit/base/control.py): it stays one
    line and inert on a terminal."""
    return escaped(message)


def warn(message: str) -> None:
    sys.stderr.write(f"warning: {one_line(message)}\n")


def error(message: str) -> None:
    sys.stderr.write(f"error: {one_line(message)}\n")


def flush() -> None:
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except OSError as exc:
            if stream is sys.stdout:
                raise stdout_failed(exc) from None
            if exc.filename is None:
                exc.filename = stream.name
            raise


def as_json(data: Any) -> None:
    _write(json.dumps(data, indent=2, sort_keys=False) + "\n")


def note(message: str) -> None:
    """Information beside the result (stderr, so that stdout stays the result alone)."""
    sys.stderr.write(f"note: {one_line(message)}\n")


def progress(raw: str) -> None:
    """A progress line on stderr (a download, a child tool's output such as a container build),
    flushed at once, terminal or not."""
    sys.stderr.write(raw + "\n")
    sys.stderr.flush()
