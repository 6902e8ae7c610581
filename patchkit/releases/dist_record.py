"""The dist-info RECORD beside an installed `sglang/`: the release's sha256 and size of each of
its files, as pip wrote them at install time (what tells a hand edit from the release's bytes
without reading the wheel)."""

from __future__ import annotations

import base64
import csv
from pathlib import Path

from patchkit.base.constants import PACKAGE


def release_hashes(site: Path, version: str) -> dict[str, tuple[str, int]] | None:
    """{path under sglang/: (sha256 hex, size)} from the RECORD of release `version`'s dist-info
    in `site`; None when there is none (an editable install's RECORD lists no package file, a
    source tree has none). Only that release's: `pip install --target --upgrade` leaves the old
    release's dist-info beside the new one."""
    infos = sorted(site.glob(f"{PACKAGE}-*.dist-info"))
    named = [info for info in infos if info.name == f"{PACKAGE}-{version}.dist-info"]
    if named:
        infos = named
    elif len(infos) != 1:
        return None
    rows: dict[str, tuple[str, int]] = {}
    try:
        text = (infos[0] / "RECORD").read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return None
    for row in csv.reader(text.splitlines()):
        if len(row) >= 3 and row[0].startswith(PACKAGE + "/") and row[1].startswith("sha256=") and row[2].isdigit():
            digest = base64.urlsafe_b64decode(row[1][len("sha256="):] + "==").hex()
            rows[row[0]] = (digest, int(row[2]))
    return rows or None
