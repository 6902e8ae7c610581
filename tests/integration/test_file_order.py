"""`apply` and `status` list a patch's files in one order (text and --json, pending and applied):
mamba-slot-graceful and symm-mem-kill-switch declare theirs in another order than the state file's."""

from __future__ import annotations

import pytest

from testing.cli import run

pytestmark = pytest.mark.integration

TWO_FILES = ("mamba-slot-graceful", "symm-mem-kill-switch")


def text_files(stdout: str) -> dict[str, str]:
    found = {}
    for line in stdout.splitlines():
        words = line.split(None, 2)
        if len(words) == 3 and words[1] in TWO_FILES:
            found[words[1]] = words[2]
    return found


def json_files(result) -> dict[str, list[str]]:
    return {p["id"]: p["files"] for p in result.json()["patches"] if p["id"] in TWO_FILES}


def test_one_order_everywhere(release):
    site = release("0.5.17")
    pending = run("status", "--site-packages", site)
    pending_json = run("status", "--site-packages", site, "--json")
    applied = run("apply", "--site-packages", site)
    status = run("status", "--site-packages", site)
    status_json = run("status", "--site-packages", site, "--json")
    assert run("revert", "--site-packages", site).exit_code == 0
    applied_json = run("apply", "--site-packages", site, "--json")
    texts = [text_files(r.stdout) for r in (pending, applied, status)]
    jsons = [json_files(r) for r in (pending_json, status_json, applied_json)]
    assert all(set(t) == set(TWO_FILES) for t in texts) and all(set(j) == set(TWO_FILES) for j in jsons)
    for pid in TWO_FILES:
        assert len({t[pid] for t in texts}) == 1, [t[pid] for t in texts]
        assert len({tuple(j[pid]) for j in jsons}) == 1, [j[pid] for j in jsons]
        assert texts[0][pid] == ", ".join(jsons[0][pid])
