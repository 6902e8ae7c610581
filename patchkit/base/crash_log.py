"""The crash log: one file per unexpected error, with what a bug report needs (patchkit's,
SGLang's and Python's versions, the platform, argv) above the traceback; old logs are pruned."""

from __future__ import annotations

import os
import sys

from patchkit import __version__
from patchkit.base.home import home

# How many crash logs are kept; older ones are removed when a new one is written.
KEEP_LOGS = 20
LOG_PREFIX = "patchkit-"
LOG_SUFFIX = ".log"

# The SGLang version of the target this run resolved, when it got that far (target._make notes it).
_sglang_version: str | None = None


def note_sglang_version(version: str | None) -> None:
    global _sglang_version
    _sglang_version = version


def log_dir() -> str:
    return str(home() / "logs")


def header() -> str:
    """The facts above the traceback, one `name: value` line each."""
    import platform  # only when a crash is logged: target imports this module on the fast path

    from patchkit.base.redact import redacted
    return "".join(f"{name}: {value}\n" for name, value in (
        ("patchkit", __version__),
        ("sglang", _sglang_version or "unknown (no target resolved)"),
        ("python", f"{platform.python_version()} ({sys.executable})"),
        ("platform", platform.platform()),
        ("argv", redacted(" ".join(sys.argv))),  # a --url's credentials stay out of the log
    ))


def prune(directory: str, keep: int = KEEP_LOGS) -> None:
    """Remove all but the newest `keep` crash logs (names sort by their time stamp)."""
    logs = sorted(name for name in os.listdir(directory) if name.startswith(LOG_PREFIX) and name.endswith(LOG_SUFFIX))
    for name in logs[:max(0, len(logs) - keep)]:
        try:
            os.remove(os.path.join(directory, name))
        except OSError:
            pass  # a log that cannot be removed does not stop the report of the crash


def write(report: str) -> str:
    """Write a crash log holding `report` after the header; its path."""
    import datetime
    from pathlib import Path

    from patchkit.base.util import atomic_write

    directory = log_dir()
    os.makedirs(directory, exist_ok=True)
    stamp = datetime.datetime.now().strftime("%Y%m%d-%H%M%S-%f")
    path = os.path.join(directory, f"{LOG_PREFIX}{stamp}{LOG_SUFFIX}")
    atomic_write(Path(path), (header() + "\n" + report).encode("utf-8"))
    prune(directory)
    return path


def log_traceback() -> str:
    """Write the exception being handled to a log file; its path (or why there is none)."""
    import traceback

    try:
        return write(traceback.format_exc())
    except OSError:
        return "(no log could be written)"
