"""The RECORD of the installed release (what capture and a hand-applied diff are judged by):
only the dist-info of the version installed, also where an upgrade left the old one beside it."""

from __future__ import annotations

import base64
import hashlib

from patchkit.releases.dist_record import release_hashes


def _info(site, version: str, data: bytes) -> str:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    info = site / f"sglang-{version}.dist-info"
    info.mkdir()
    (info / "RECORD").write_text(f"sglang/x.py,sha256={digest},{len(data)}\nsglang-{version}.dist-info/METADATA,,\n")
    return hashlib.sha256(data).hexdigest()


def test_the_installed_releases_record_only(tmp_path):
    old = _info(tmp_path, "0.5.16", b"old\n")
    new = _info(tmp_path, "0.5.17", b"new\n")
    assert release_hashes(tmp_path, "0.5.17") == {"sglang/x.py": (new, 4)}
    assert release_hashes(tmp_path, "0.5.16") == {"sglang/x.py": (old, 4)}
    assert release_hashes(tmp_path, "0.5.18") is None  # two others: cannot tell which
    assert release_hashes(tmp_path / "nothing", "0.5.17") is None
