"""The running patchkit's wheel, written from its installed files: what the build context of an
image carries when patchkit runs from an installed copy (the README's `pip install .`), not from a
checkout (issue 37.4). The dist-info RECORD pip wrote lists every file of the install; the wheel
holds those under site-packages (not the console script pip made in bin/, nor pip's own
INSTALLER, REQUESTED and direct_url.json), their bytes as installed, and a RECORD of their hashes.
pip makes the script again from entry_points.txt. The same install gives the same bytes: the zip
dates are fixed, so an image build cache keyed on the context holds."""

from __future__ import annotations

import base64
import csv
import hashlib
import io
import zipfile
from pathlib import Path

from patchkit import __version__
from patchkit.base.errors import UsageError
from patchkit.base.util import atomic_write

DIST_INFO = f"sglang_patchkit-{__version__}.dist-info"
TAG = "py3-none-any"
NAME = f"sglang_patchkit-{__version__}-{TAG}.whl"
_INSTALLER_FILES = ("INSTALLER", "REQUESTED", "direct_url.json", "RECORD")  # written by pip, not the wheel's
_DATE = (1980, 1, 1, 0, 0, 0)  # the oldest date a zip holds: the same for every build


def installed_copy() -> Path | None:
    """The dist-info of the running patchkit when pip installed it from a wheel (its RECORD beside
    the package lists the running package's `__init__.py`), else None."""
    import patchkit

    package = Path(patchkit.__file__).resolve().parent
    info = package.parent / DIST_INFO
    try:
        rows = _rows(info)
    except OSError:
        return None
    return info if f"{package.name}/__init__.py" in rows else None


def _rows(info: Path) -> list[str]:
    text = (info / "RECORD").read_text(encoding="utf-8")
    return [row[0] for row in csv.reader(io.StringIO(text)) if row]


def _kept(name: str) -> bool:
    parts = name.split("/")
    if name.startswith("/") or ".." in parts or "__pycache__" in parts or name.endswith(".pyc"):
        return False  # outside site-packages (bin/patchkit), or bytecode pip compiled
    return not (parts[0] == DIST_INFO and parts[-1] in _INSTALLER_FILES)


def _hash(data: bytes) -> str:
    return "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


def wheel_bytes(info: Path) -> bytes:
    """The wheel of the install whose dist-info is `info`; UsageError (exit 2) naming the file when
    the install is not whole (a file its RECORD lists is gone) or not a pure-Python wheel's."""
    site = info.parent
    names = sorted({name for name in _rows(info) if _kept(name)})
    wheel_file = f"{DIST_INFO}/WHEEL"
    if wheel_file not in names or f"Tag: {TAG}" not in (site / wheel_file).read_text(encoding="utf-8"):
        raise UsageError(f"{info}: not the install of a {TAG} wheel; give patchkit's wheel with --wheel FILE")
    out = io.BytesIO()
    record = []
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as archive:
        for name in names:
            try:
                data = (site / name).read_bytes()
            except FileNotFoundError:
                raise UsageError(f"{site / name}: listed in {info / 'RECORD'} but gone; reinstall patchkit, or give "
                                 "its wheel with --wheel FILE") from None
            _add(archive, name, data)
            record.append((name, _hash(data), str(len(data))))
        record.append((f"{DIST_INFO}/RECORD", "", ""))
        text = io.StringIO()
        csv.writer(text, lineterminator="\n").writerows(record)
        _add(archive, f"{DIST_INFO}/RECORD", text.getvalue().encode())
    return out.getvalue()


def _add(archive: zipfile.ZipFile, name: str, data: bytes) -> None:
    entry = zipfile.ZipInfo(name, _DATE)
    entry.external_attr = 0o644 << 16
    entry.compress_type = zipfile.ZIP_DEFLATED
    archive.writestr(entry, data)


def write(info: Path, dest: Path) -> None:
    atomic_write(dest, wheel_bytes(info), 0o644)
