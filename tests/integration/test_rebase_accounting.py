"""`rebase` accounts for every change, by construction, on real releases: the field's diffs
(testing.field_diffs: upstream's changes to 30 files re-based onto 0.5.15.post1, a diff stacked on
it, a `.cuh` kernel source, a change to code upstream moved within its file) rebased onto every
release 0.5.10-0.5.23 and the post releases.

For each: every `+` line of the input is in the rebased diff (as an added or context line, or
inside a conflict block) or already in the target release; every file of the input that is not
proved upstream has a section (or its units were written in other files); conflicts and blocks
agree (none without the other). Once a conflicting unit's change vanished: `rebase --to 0.5.16`
of such a diff wrote 17 of 27 file sections, and a unit the release no longer has was left out
while being counted as "written with conflict markers".
"""

from __future__ import annotations

import functools

import pytest

from patchkit.diffs import rebase, unidiff, unit_merge
from patchkit.releases import pristine as releases
from patchkit.base.errors import PlanError
from testing.field_diffs import FieldDiff, cuh_diff, field_diff, moved_code_diff, releases_after, stacked_diff
from testing.releases import HOME, pristine

pytestmark = [pytest.mark.integration, pytest.mark.slow]

RELEASES = releases_after("0.5.15.post1")


@pytest.fixture(scope="module", autouse=True)
def test_cache_home():
    """The pre-images are found among the test cache's wheels (post releases included)."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("PATCHKIT_HOME", str(HOME))
        for version in RELEASES:
            pristine(version)  # fetched into the test cache once (the post releases on first use)
        yield


@functools.cache
def _package_lines(version: str) -> frozenset[bytes]:
    root = pristine(version)
    return frozenset(line for path in (root / "sglang").rglob("*") if path.is_file() and path.suffix in (".py", ".cuh")
                     for line in path.read_bytes().splitlines())


def _rebased_lines(data: bytes) -> set[bytes]:
    found = set()
    for line in data.splitlines():
        if line[:1] in (b"+", b" ") and not line.startswith(b"+++ "):
            found.add(line[1:])
            if line[:1] == b"+" and line[1:2] in (b"+", b" ", b"-"):
                found.add(line[2:])  # a line of a hunk carried in a conflict block
    return found


def _check(field: FieldDiff, version: str) -> None:
    diff = unidiff.parse(field.text, field.name)
    source = releases.WheelSource(version)
    try:
        made = rebase.rebase(diff, field.text, version, source.read, python_files=source.python_files,
                             package_files=source.package_files)
    except PlanError as exc:  # the release already has the whole change: proved per file
        assert "already has the change" in str(exc)
        resolution = unit_merge.resolve(diff, source.read, python_files=source.python_files,
                                       package_files=source.package_files)
        assert all(f.upstream for f in resolution.files), [f.rel for f in resolution.files if not f.upstream]
        return
    sections = {line.split(b" b/python/", 1)[1].decode() for line in made.data.splitlines()
                if line.startswith(b"diff --git ")}
    written = _rebased_lines(made.data)
    missing: list[str] = []
    for file in diff.files:
        resolved = next((f for f in made.resolution.files if f.rel == file.path), None) or next(
            f for f in made.resolution.files if any(f"has {file.path} (its folder moved)" in n for n in f.notes))
        if not resolved.upstream and not resolved.elsewhere:
            assert resolved.rel in sections, f"{file.path} ({resolved.how}) has no section on {version}"
        target = source.read(resolved.rel) or b""
        here = set(target.splitlines())
        for hunk in file.hunks:
            for line in hunk.lines:
                if line[:1] == b"+" and line[1:].strip():
                    text = line[1:].rstrip(b"\r\n")
                    if text not in written and text not in here and text not in _package_lines(version):
                        missing.append(f"{file.path}: {text.decode(errors='replace')}")
    assert not missing, f"{len(missing)} added line(s) dropped on {version}: {missing[:5]}"
    blocks = made.data.count(b"\n+<<<<<<< ")
    assert (blocks == 0) == (not made.conflicts), (version, blocks, [u.unit for u in made.conflicts])
    marked = {f.rel for f in made.resolution.files if f.conflicts}
    for rel in marked:
        assert rel in sections, f"{rel} conflicts on {version} with no section"


@pytest.mark.parametrize("version", RELEASES)
def test_every_added_line_is_written_or_already_there(version):
    for field in (field_diff("0.5.15.post1"), stacked_diff("0.5.15.post1"), cuh_diff(), moved_code_diff()):
        _check(field, version)
