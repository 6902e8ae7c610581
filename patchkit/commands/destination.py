"""Where a command writes the file it makes (`-o FILE`, `--out DIR`): checked before any work,
so that a bad path is one line and exit 2, with nothing downloaded or written."""

from __future__ import annotations

from pathlib import Path

from patchkit.base.errors import UsageError


def output_file(option: str, value: str) -> Path:
    path = Path(value)
    if path.is_dir():
        raise UsageError(f"{option} {value}: is a folder; name the file to write, e.g. {path / 'fix.patch'}")
    if path.exists() and not path.is_file():
        raise UsageError(f"{option} {value}: exists and is not a regular file; name another path")
    parent = path.parent
    if not parent.is_dir():
        raise UsageError(f"{option} {value}: the folder {parent} does not exist; create it first (mkdir -p {parent}) "
                         "or name another path")
    return path


def output_folder(option: str, value: str) -> Path:
    path = Path(value)
    if path.exists() and not path.is_dir():
        raise UsageError(f"{option} {value}: not a folder; name a folder (it is created when its parent exists)")
    if not path.exists() and not path.parent.is_dir():
        raise UsageError(f"{option} {value}: the folder {path.parent} does not exist; create it first "
                         f"(mkdir -p {path}) or name another folder")
    return path
