"""The one rule for a path a patch names, relative to the folder it patches: the diff parser
applies it to every path a diff names when the diff is loaded (so that no command, `bump` writing
its folder included, ever sees a path that leads out), and `Target.path` to every file a patch
reads or writes. A path leads out when it is absolute or has a `..` component; a NUL byte or
another control character (C0, DEL) names no file of a package. `.` and empty components are
dropped (`sglang/./srt//x.py` is `sglang/srt/x.py`), as the OS reads them."""

from __future__ import annotations

import re

_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


def problem(path: str) -> str | None:
    """Why `path` (`/` separated, as a diff names it) cannot be a file inside the folder it is
    relative to, or None."""
    found = _CONTROL.search(path)
    if found:
        return f"holds a control character ({found.group()!r})"
    if path.startswith("/"):
        return "is absolute"
    if ".." in path.split("/"):
        return "has a '..' component"
    return None


def normalised(path: str) -> str:
    """`path` without `.` and empty components (for a path `problem` lets through)."""
    return "/".join(part for part in path.split("/") if part not in ("", "."))
