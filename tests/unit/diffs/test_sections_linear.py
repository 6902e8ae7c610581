"""Loading and judging a diff is linear in its number of file sections (issue 29 item 9), told by
counting work, not by timing: the Python calls (sys.setprofile's 'call' events: every function,
method, property and generator step) that `status` makes for a diff of N sections, per section,
stay flat from N to 4N. A step that looks each section up by scanning all of them (what made
`status` of a 16,000-section diff take 49 s) makes the count per section grow with N.
The timings are bench/diff_sections.py's.
"""

from __future__ import annotations

import sys
from pathlib import Path

from testing import synthetic as syn
from testing.cli import run
from testing.diffs import many_sections


def calls_of_status(site: Path, diff: Path) -> int:
    count = 0

    def profile(frame, event, arg) -> None:
        nonlocal count
        if event == "call":
            count += 1

    sys.setprofile(profile)
    try:
        result = run("--patches", diff, "status", "--site-packages", site, "--json")
    finally:
        sys.setprofile(None)
    assert result.exit_code == 0, result.stderr
    states = {p["id"]: p["state"] for p in result.json()["patches"]}
    assert states["many-sections"] == "pending"
    return count


def test_status_work_per_section_is_flat(scratch: Path, monkeypatch) -> None:
    site = syn.make_tree(scratch / "site")
    sizes = (100, 200, 400)
    for n in sizes:
        (scratch / f"s{n}.patch").write_bytes(many_sections(n, "many-sections"))
    calls_of_status(site, scratch / "s100.patch")  # imports and first-use caches out of the count
    counts = {}
    for n in sizes:
        monkeypatch.setenv("PATCHKIT_HOME", str(scratch / f"home-{n}"))  # no verdict cached by another run
        counts[n] = calls_of_status(site, scratch / f"s{n}.patch")
    # The calls each added section costs (the fixed costs, the CLI and the built-in patches, drop out):
    # from 100 to 200 sections, and from 200 to 400.
    first = (counts[200] - counts[100]) / 100
    second = (counts[400] - counts[200]) / 200
    assert second <= first * 1.1, (counts, first, second)
