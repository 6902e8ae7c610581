"""patchkit.releases.index: the package index's releases, post releases included, kept a day."""

from __future__ import annotations

import json
import time

from patchkit.releases import index

PIP_SAYS = """WARNING: pip index is currently an experimental command.
sglang (0.5.16)
Available versions: 0.5.16, 0.5.15.post1, 0.5.15, 0.5.13.post1, 0.5.13, 0.5.12.post1, 0.5.12, 0.4.10.post2
"""


def test_pips_line_is_read_oldest_first():
    assert index._parse(PIP_SAYS) == ["0.4.10.post2", "0.5.12", "0.5.12.post1", "0.5.13", "0.5.13.post1", "0.5.15",
                                      "0.5.15.post1", "0.5.16"]
    assert index._parse("nothing here\n") == []


def test_the_saved_list_is_used_for_a_day_and_the_range_holds_post_releases(patchkit_home, monkeypatch):
    asked: list[int] = []
    monkeypatch.setattr(index, "_asked", lambda: asked.append(1) or index._parse(PIP_SAYS))
    (patchkit_home / "index-versions.json").write_text(json.dumps({"at": time.time(), "versions": ["0.5.12", "0.5.12.post1"]}))
    assert index.versions() == ["0.5.12", "0.5.12.post1"] and not asked
    (patchkit_home / "index-versions.json").write_text(json.dumps({"at": time.time() - 2 * index.KEPT_FOR,
                                                                    "versions": ["0.5.12"]}))
    assert index.in_range("0.5.12.post1", "0.5.15") == ["0.5.12.post1", "0.5.13", "0.5.13.post1", "0.5.15", "0.5.15.post1"]
    assert asked == [1]  # asked once, then saved
    assert json.loads((patchkit_home / "index-versions.json").read_text())["versions"][-1] == "0.5.16"


def test_a_failed_cache_write_leaves_no_temporary_file(patchkit_home, monkeypatch):
    """issue 44, item 6: the day's list is written by base.util.atomic_write; a disk that fills at the
    rename leaves no `.index-versions.json.*` behind, and the answer is still the index's."""
    import errno
    import os

    monkeypatch.setattr(index, "_asked", lambda: index._parse(PIP_SAYS))

    def full(*args, **kwargs):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(os, "replace", full)
    assert index.versions()[-1] == "0.5.16"
    assert sorted(p.name for p in patchkit_home.iterdir() if "index-versions" in p.name) == []
