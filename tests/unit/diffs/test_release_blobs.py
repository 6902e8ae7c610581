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


def test_the_base_is_named_on_any_machine_post_releases_fetched_nearest_first(patchkit_home, tmp_path):
    """A diff made for a post release (one of its files differs from the final's) on a home that
    holds only the final release: the index's releases are fetched nearest the partial match first,
    the post release before the final at the same distance, until one holds every pre-image."""
    other = "sglang/srt/z.py"
    post_z = b"z = 2  # the post release's fix\n"
    wheel(patchkit_home, "0.5.96", {REL: OLD, other: b"z = 1\n"})  # the final release: 1 of 2 files
    diff = unidiff.parse(git_diff({REL: OLD, other: post_z}, {REL: NEW, other: b"z = 3\n"}), "v0.5.96.post1-sglang.patch")
    assert [str(m) for m in release_blobs.made_for(diff)] == ["0.5.96 (1/2 files)"]
    shelf = tmp_path / "index"  # what the package index would serve
    shelf.mkdir()
    wheel(shelf, "0.5.96.post1", {REL: OLD, other: post_z})
    wheel(shelf, "0.5.97", {REL: NEW, other: b"z = 3\n"})
    wheel(shelf, "0.5.95", {REL: OLD, other: b"z = 0\n"})
    fetched: list[str] = []

    def fetch(version: str) -> None:
        fetched.append(version)
        if version == "0.5.90":
            raise release_blobs.PatchkitError("no such wheel")  # passed over
        name = f"sglang-{version}-py3-none-any.whl"
        os.link(shelf / "wheels" / name, patchkit_home / "wheels" / name)

    candidates = ["0.5.90", "0.5.95", "0.5.96", "0.5.96.post1", "0.5.97"]
    found = release_blobs.name_base(diff, candidates, fetch)
    assert [str(m) for m in found] == ["0.5.96.post1 (2/2 files)"]
    assert fetched == ["0.5.96.post1"]  # nothing further once every file is matched
    assert release_blobs.pre_image(diff.files[1]) == post_z


def test_a_base_older_than_the_target_is_looked_for_from_the_target_down(patchkit_home, tmp_path, monkeypatch):
    """attack on issue 30, finding 12: on an empty home, naming the base of a diff bumped to 0.5.16
    downloaded 0.5.23 down to 0.5.17 first (the search started at the newest release). Nothing
    cached matches: the search starts at the release the diff goes to, and with `last` (bump: V0
    is older than V) no newer release is fetched."""
    from patchkit.diffs import release_blobs as blobs

    other = "sglang/srt/other.py"
    listed = ["0.5.93", "0.5.94", "0.5.95", "0.5.95.post1", "0.5.96", "0.5.97", "0.5.98", "0.5.99"]
    bases = {REL: "0.5.95.post1", other: "0.5.93"}  # where each file's diff was made
    fetched = _listed_index(patchkit_home, monkeypatch, listed, lambda version: {
        rel: OLD if base == version else b"v = %r\n" % version for rel, base in bases.items()})
    diff = unidiff.parse(git_diff({REL: OLD}, {REL: NEW}), "fix.patch")
    found = blobs.find_base(diff, "0.5.96", lambda line: None)
    assert [str(m) for m in found] == ["0.5.95.post1 (1/1 files)"]
    assert fetched == ["0.5.96", "0.5.95.post1"]  # was 0.5.99, 0.5.98, 0.5.97, 0.5.96, 0.5.95.post1
    fetched.clear()
    older = unidiff.parse(git_diff({other: OLD}, {other: NEW}), "older.patch")
    found = blobs.find_base(older, "0.5.96", lambda line: None, last="0.5.96")
    assert [str(m) for m in found] == ["0.5.93 (1/1 files)"]
    assert fetched == ["0.5.95", "0.5.94", "0.5.93"]  # none newer than 0.5.96 (0.5.97 is as near as 0.5.95)


def _listed_index(patchkit_home, monkeypatch, listed: list[str], files_of) -> list[str]:
    """A package index listing `listed`, whose download of a release writes `files_of(version)` as
    its wheel; the releases downloaded, in order."""
    from packaging.version import Version

    from patchkit.diffs import release_blobs as blobs
    from patchkit.releases import index, manifest

    monkeypatch.setattr(manifest, "available", lambda: listed)
    monkeypatch.setattr(index, "in_range", lambda first, last: [v for v in listed
                                                                if Version(first) <= Version(v) <= Version(last)])
    fetched: list[str] = []

    def download(version: str, progress) -> None:
        fetched.append(version)
        wheel(patchkit_home, version, files_of(version))

    monkeypatch.setattr(blobs.releases, "download", download)
    return fetched


COLD = ["0.5.93", "0.5.94", "0.5.95", "0.5.95.post1", "0.5.96", "0.5.97", "0.5.98"]
OTHER = "sglang/srt/other.py"


def _release_files(version: str) -> dict[str, bytes]:
    """0.5.95.post1 holds OLD in REL and b"o = 1" in OTHER; every other release its own bytes."""
    if version == "0.5.95.post1":
        return {REL: OLD, OTHER: b"o = 1\n"}
    return {REL: b"v = %r\n" % version, OTHER: b"o = %r\n" % version}


def test_a_cold_search_of_a_stack_fetches_the_two_releases_it_needs(patchkit_home, monkeypatch):
    """issue 40 item 10: with a diff stacked on another (its pre-image is the lower's post-image,
    no release's), the base search fetched every release up to V looking for the upper's files.
    A stacked file is left out of the search: V, then the lower's base."""
    from patchkit.diffs import release_blobs as blobs

    fetched = _listed_index(patchkit_home, monkeypatch, COLD, _release_files)
    lower = unidiff.parse(git_diff({REL: OLD, OTHER: b"o = 1\n"}, {REL: NEW, OTHER: b"o = 2\n"}), "b-lower.patch")
    upper = unidiff.parse(git_diff({REL: NEW}, {REL: b"def f():\n    return 3\n"}), "a-upper.patch")
    blobs.find_bases([upper, lower], "0.5.96", lambda line: None, last="0.5.96")
    assert fetched == ["0.5.96", "0.5.95.post1"]  # was 0.5.96, 0.5.95.post1, 0.5.95, 0.5.94, 0.5.93
    assert [str(m) for m in blobs.made_for(lower)] == ["0.5.95.post1 (2/2 files)"]


def test_a_cold_search_stops_at_the_best_match_where_a_file_is_no_releases(patchkit_home, monkeypatch):
    """issue 40 item 10: a diff one of whose files holds a local edit (its pre-image is in no
    release) fetched every release up to V. The search stops where the best match is the best
    around it: the releases either side tried, none matching more, and never past V."""
    from patchkit.diffs import release_blobs as blobs

    fetched = _listed_index(patchkit_home, monkeypatch, COLD, _release_files)
    edited = unidiff.parse(git_diff({REL: OLD, OTHER: b"o = 'mine'\n"}, {REL: NEW, OTHER: b"o = 2\n"}), "fix.patch")
    found = blobs.find_base(edited, "0.5.96", lambda line: None, last="0.5.96")
    assert [str(m) for m in found] == ["0.5.95.post1 (1/2 files)"]
    assert fetched == ["0.5.96", "0.5.95.post1", "0.5.95"]  # was every release from 0.5.96 down to 0.5.93


def test_a_failed_blob_index_write_leaves_no_temporary_file(patchkit_home, monkeypatch):
    """issue 44, item 6: the blob index is written by base.util.atomic_write; a disk that fills at
    the rename leaves nothing but the folder behind, and the release is still named."""
    import errno

    wheel(patchkit_home, "0.5.98", {REL: OLD})
    diff = unidiff.parse(git_diff({REL: OLD}, {REL: NEW}), "d.patch")

    def full(*args, **kwargs):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(os, "replace", full)
    assert [str(m) for m in release_blobs.made_for(diff)] == ["0.5.98 (1/1 files)"]
    assert sorted(p.name for p in (patchkit_home / "blobs").iterdir()) == []
