"""Where the doctor reads a release's source from: an installed `sglang/` folder, or the release's
wheel (a zip) straight from the cache, inflating only the files it asks for (`doctor --version V`
never unpacks 85-100 MB of a release on disk). Paths are relative to `sglang/` ("srt/server_args.py")."""

from __future__ import annotations

from pathlib import Path
from typing import Protocol

from patchkit.releases.pristine import WheelSource

PACKAGE = "sglang"


class ReleaseFiles(Protocol):
    def read(self, rel: str) -> bytes | None:
        """A file's bytes, or None when the release has no such file."""

    def python_files(self, folder: str, recursive: bool = False) -> list[str]:
        """The `.py` files under `folder` (sorted)."""

    def identity(self, rel: str) -> str:
        """A cheap identity of a file's bytes, for caches ("absent" when there is none)."""

    @property
    def label(self) -> str:
        """Where the files come from, for the report."""


class FolderFiles:
    """An installed (or unpacked) `sglang/` folder."""

    def __init__(self, package_dir: Path) -> None:
        self.package_dir = Path(package_dir)

    @property
    def label(self) -> str:
        return str(self.package_dir.parent)

    def read(self, rel: str) -> bytes | None:
        try:
            return (self.package_dir / rel).read_bytes()
        except OSError:  # absent, a folder, unreadable: the release does not have that file for us
            return None

    def python_files(self, folder: str, recursive: bool = False) -> list[str]:
        base = self.package_dir / folder
        found = base.rglob("*.py") if recursive else base.glob("*.py")
        return sorted(path.relative_to(self.package_dir).as_posix() for path in found if path.is_file())

    def identity(self, rel: str) -> str:
        try:
            stat = (self.package_dir / rel).stat()
        except OSError:
            return "absent"
        return f"{self.package_dir / rel}:{stat.st_mtime_ns}:{stat.st_size}"


class WheelFiles:
    """A release's cached wheel, read member by member."""

    def __init__(self, source: WheelSource) -> None:
        self.source = source
        self._names = source.python_files()

    @property
    def label(self) -> str:
        return str(self.source.wheel)

    def read(self, rel: str) -> bytes | None:
        return self.source.read(f"{PACKAGE}/{rel}")

    def python_files(self, folder: str, recursive: bool = False) -> list[str]:
        prefix = f"{PACKAGE}/{folder.rstrip('/')}/"
        found = [name[len(PACKAGE) + 1:] for name in self._names if name.startswith(prefix)]
        return sorted(rel for rel in found if recursive or "/" not in rel[len(folder.rstrip("/")) + 1:])

    def identity(self, rel: str) -> str:
        return f"{self.source.wheel}:{self.source.fingerprint(f'{PACKAGE}/{rel}')}"
