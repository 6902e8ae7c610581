"""The only place that writes to stdout and stderr."""

import json
import sys
from typing import Any


def line(text: str = "") -> None:
    sys.stdout.write(text + "\n")


def text(raw: str) -> None:
    sys.stdout.write(raw)


def data(raw: bytes) -> None:
    """Bytes as they are (a diff holds the files' own bytes: CRLF, a BOM, any encoding)."""
    sys.stdout.flush()
    sys.stdout.buffer.write(raw)


# Control characters (C0 but tab, DEL, C1): a newline in a path would split a one-line
# message, an ESC would drive the terminal. Written as Python escapes (\n, \x1b).
_CONTROL = {c: ascii(chr(c))[1:-1] for c in (*range(0x00, 0x09), *range(0x0a, 0x20), *range(0x7f, 0xa0))}


def one_line(message: str) -> str:
    """`message` with every control character escaped: it stays one line and inert on a terminal."""
    return message.translate(_CONTROL)


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
