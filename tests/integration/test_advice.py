"""Each piece of advice patchkit prints on a real release names a command that succeeds in that
situation: the test runs the command the message names."""

from __future__ import annotations

import re
import shlex

import pytest

from testing.cli import run
from testing.releases import MODEL_CONFIG, snapshot

pytestmark = pytest.mark.integration


def suggested(text: str) -> list[list[str]]:
    """The `patchkit ...` commands a message names, as argument lists (without `patchkit`)."""
    return [shlex.split(command)[1:] for command in re.findall(r"`(patchkit [^`]+)`", text)]


@pytest.fixture
def drifted(release):
    site = release("0.5.17")
    assert run("apply", "--site-packages", site).exit_code == 0
    with open(site / MODEL_CONFIG, "a") as handle:
        handle.write("# a local edit\n")
    return site


def test_verify_on_a_drifted_file_names_commands_that_work(drifted):
    result = run("verify", "--site-packages", drifted)
    line = next(line for line in result.stdout.splitlines() if "mtp-layer-detection is drifted" in line)
    assert "run `patchkit apply`" not in line  # apply refuses a drifted file (exit 4) without --force
    steps = suggested(line)
    assert [step[0] for step in steps] == ["diff", "apply"], line
    for step in steps:
        done = run(*step)
        assert done.exit_code == 0, (step, done.stdout, done.stderr)
    again = run("verify", "--site-packages", drifted, "--json").json()
    assert "mtp-layer-detection" not in again["not_applied"], again


def test_a_second_revert_says_it_removed_the_kept_copies(drifted):
    assert run("revert", "--site-packages", drifted, "--force").exit_code == 0
    kept = sorted(p.relative_to(drifted).as_posix() for p in (drifted / ".patchkit" / "overwritten").rglob("*")
                  if p.is_file())
    assert kept, "revert --force keeps a copy of the outside edit"
    result = run("revert", "--site-packages", drifted)
    assert result.exit_code == 0
    assert not (drifted / ".patchkit").exists()
    assert "removed the 1 copy(ies) of outside edits" in result.stdout and kept[0] in result.stdout, result.stdout
    assert "nothing to revert" in result.stdout  # no file of the release changed


def test_a_second_revert_with_json_lists_the_removed_copies(drifted):
    assert run("revert", "--site-packages", drifted, "--force").exit_code == 0
    before = snapshot(drifted)
    data = run("revert", "--site-packages", drifted, "--json").json()
    assert data["reverted"] == [] and len(data["removed_kept_copies"]) == 1
    assert data["removed_kept_copies"][0] in before
