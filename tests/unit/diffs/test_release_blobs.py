"""patchkit.diffs.release_blobs on synthetic wheels in a test home: which cached release a diff's index
hashes name, the pre-image bytes, and the blob index kept in the home (rebuilt for a new wheel)."""

from __future__ import annotations

import os
import zipfile

from patchkit.diffs import release_blobs, unidiff
from testing.diffs import git_diff

REL = "sglang/srt/x.py"
OLD = b"def f():\n    return 1\n"
NEW = b"def f():\n    return 2\n"


def wheel(home, version: str, files: dict[str, bytes]) -> None:
    folder = home / "wheels"
    folder.mkdir(exist_ok=True)
    with zipfile.ZipFile(folder / f"sglang-{version}-py3-none-any.whl", "w") as archive:
        for rel, data in files.items():
            archive.writestr(rel, data)


def test_made_for_names_the_releases_whose_files_have_the_hashes(patchkit_home):
    wheel(patchkit_home, "0.5.98", {REL: OLD, "sglang/y.py": b"y = 1\n"})
    wheel(patchkit_home, "0.5.99", {REL: NEW})
    diff = unidiff.parse(git_diff({REL: OLD, "sglang/y.py": b"y = 1\n"}, {REL: NEW, "sglang/y.py": b"y = 2\n"}), "d.patch")
    assert [str(m) for m in release_blobs.made_for(diff)] == ["0.5.98 (2/2 files)"]
    assert release_blobs.pre_image(diff.files[0]) == OLD
    index = patchkit_home / "blobs" / "sglang-0.5.98-py3-none-any.whl.json"
    assert index.is_file()
    # A new wheel of the same name (re-downloaded, other bytes): its index is made again.
    wheel_path = patchkit_home / "wheels" / "sglang-0.5.98-py3-none-any.whl"
    wheel_path.unlink()
    wheel(patchkit_home, "0.5.98", {REL: b"other = 1\n"})
    os.utime(wheel_path, ns=(1, 1))
    assert release_blobs.made_for(diff) == []
    assert release_blobs.pre_image(diff.files[0]) is None


def test_no_hashes_no_release(patchkit_home):
    wheel(patchkit_home, "0.5.98", {REL: OLD})
    text = b"".join(line for line in git_diff({REL: OLD}, {REL: NEW}).splitlines(keepends=True)
                    if not line.startswith(b"index "))
    assert release_blobs.made_for(unidiff.parse(text, "d.patch")) == []
