"""The only place that writes to stdout and stderr."""

import json
import sys
from typing import Any

from patchkit.base.control import escaped


def line(text: str = "") -> None:
    """One line for people: control characters escaped (a patch id or title from a diff file or a
    server's answer could otherwise forge lines or drive the terminal); raw output: `text`, `data`."""
    sys.stdout.write(one_line(text) + "\n")


def text(raw: str) -> None:
    sys.stdout.write(raw)


def data(raw: bytes) -> None:
    """Bytes as they are (a diff holds the files' own bytes: CRLF, a BOM, any encoding)."""
    sys.stdout.flush()
    sys.stdout.buffer.write(raw)


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
            if exc.filename is None:
                exc.filename = stream.name
            raise


def as_json(data: Any) -> None:
    sys.stdout.write(json.dumps(data, indent=2, sort_keys=False) + "\n")


def note(message: str) -> None:
    """Information beside the result (stderr, so that stdout stays the result alone)."""
    sys.stderr.write(f"note: {one_line(message)}\n")


def progress(raw: str) -> None:
    """A progress line on stderr (a download, a child tool's output such as a container build),
    flushed at once, terminal or not."""
    sys.stderr.write(raw + "\n")
    sys.stderr.flush()
