"""patchkit.diffs.unidiff.parse reads every kind of diff the tests build as the parser before it
did (the record tests/fixtures/parsed_diffs.json, made by `python -m testing.parsed_diffs --releases`
on that parser: each reading's digest, its counts, its error), and as `git apply --numstat`, an
independent parser, reads it where git takes the diff: the same lines added and removed per file.
The synthetic cases (the edge cases: no final newline, created and deleted files, renames, binary
changes, CRLF, blank context lines, refused diffs) are in the fast tier; the diffs made from real
releases (testing.field_diffs', upstream's own changes between releases) are slow."""

from __future__ import annotations

import json
from collections import Counter

import pytest

from testing import parsed_diffs

RECORDED = json.loads(parsed_diffs.RECORD.read_text())


def _as_recorded(name: str, data: bytes) -> str | None:
    """Why the parser's reading of `data` is not the one recorded for `name`, else None."""
    if name not in RECORDED:
        return f"{name}: not in the record (record it with `python -m testing.parsed_diffs` on the parser before yours)"
    recorded, found = RECORDED[name], parsed_diffs.summary(data)
    if found["diff"] != recorded["diff"]:
        return f"{name}: the diff is not the one recorded (git made other bytes): re-record it on the old parser"
    if found != recorded:
        return f"{name}: read otherwise than recorded: {found} != {recorded}"
    return None


def _as_git_reads(data: bytes) -> bool | None:
    """Whether every file section the parser keeps adds and removes as many lines as `git apply
    --numstat` says (each section of theirs matched once; sections left out, outside the package or
    mode-only, aside); None where git refuses the diff or the parser does."""
    theirs = parsed_diffs.numstat(data)
    found = parsed_diffs.reading(data)
    if theirs is None or "error" in found:
        return None
    ours = Counter((sum(line.startswith("+") for _, _, _, _, lines in f["hunks"] for line in lines),
                    sum(line.startswith("-") for _, _, _, _, lines in f["hunks"] for line in lines))
                   for f in found["files"])
    left = Counter((added, deleted) for added, deleted, _ in theirs)
    left.subtract(ours)
    if any(n < 0 for n in left.values()):
        return False
    # A section git counts and the parser dropped must be one it says it left out.
    dropped = sum(n for (added, deleted), n in left.items() if n and (added or deleted))
    return dropped <= len(found["outside"])


@pytest.mark.parametrize("name", sorted(parsed_diffs.SYNTHETIC))
def test_each_synthetic_diff_is_read_as_recorded_and_as_git_counts_it(name):
    data = parsed_diffs.SYNTHETIC[name]()
    assert _as_recorded(f"synthetic/{name}", data) is None
    assert _as_git_reads(data) is not False


def test_git_reads_most_synthetic_diffs():
    # So that the comparison with git is not vacuous: git takes all but the damaged ones.
    compared = [name for name, make in parsed_diffs.SYNTHETIC.items() if _as_git_reads(make()) is True]
    assert len(compared) >= 30, compared


@pytest.mark.integration
def test_each_diff_made_from_releases_is_read_as_recorded_and_as_git_counts_it():
    wrong, compared = [], 0
    for name, data in parsed_diffs.from_releases():
        why = _as_recorded(f"releases/{name}", data)
        if why:
            wrong.append(why)
        agrees = _as_git_reads(data)
        if agrees is False:
            wrong.append(f"releases/{name}: not as `git apply --numstat` counts it")
        compared += agrees is True
    assert not wrong, "\n".join(wrong)
    assert compared >= 20
