"""A journal left by a killed run for another release (issue 18.3): SGLang's version changed under
it (a version-only bump: pyproject/dist-info, an editable install moved by one commit). While a
file it names still holds patchkit's bytes its backups are the only pristine copy: apply, revert
and clean refuse (exit 4) and change nothing; once the files are the new release's own it is
discarded."""

from __future__ import annotations

import hashlib
import json

import pytest

from testing.cli import run
from testing.faults import run_faulted, warm_home
from testing.releases import snapshot, tree_bytes

pytestmark = pytest.mark.integration

VERSION = "0.5.14"


def bump_version(site, to: str) -> None:
    """What a version-only reinstall changes: the version the metadata gives (same files)."""
    metadata = site / f"sglang-{VERSION}.dist-info" / "METADATA"
    text = metadata.read_text().replace(f"Version: {VERSION}\n", f"Version: {to}\n")
    metadata.unlink()  # the release's copy may be a hard link to the shared cache
    metadata.write_text(text)


def killed_after_the_journal(site) -> list[str]:
    """A first apply SIGKILLed after its journal, with two target files already moved into place;
    returns the files the journal names."""
    files = run("apply", "--site-packages", site, "--dry-run", "--json").json()["files"]
    # os.replace: a backup, then a staged copy of each file, then the journal, then the moves.
    warm_home(site)
    killed = run_faulted("replace", 2 * len(files) + 3, "kill-after", "apply", "--site-packages", site)
    assert killed.returncode == -9, killed.stderr
    journal = json.loads((site / ".patchkit/journal.json").read_text())
    patched = [e["rel"] for e in journal["files"] if (site / e["rel"]).exists()
               and hashlib.sha256((site / e["rel"]).read_bytes()).hexdigest() == e["after"]]
    assert len(patched) == 2, patched
    return [e["rel"] for e in journal["files"]]


def test_stale_journal_with_patched_files_is_refused_and_keeps_the_backups(release):
    site = release(VERSION)
    pristine = tree_bytes(site / "sglang")
    files = killed_after_the_journal(site)
    bump_version(site, f"{VERSION}.post1")
    (site / ".patchkit/lock").unlink()  # left by the kill; each run drops its own
    before = snapshot(site)
    for command in ("apply", "revert", "clean"):
        result = run(command, "--site-packages", site)
        assert result.exit_code == 4, (command, result.stdout, result.stderr)
        assert f"still holds what patchkit wrote for SGLang {VERSION}, but {VERSION}.post1 is installed" in result.stderr
        assert snapshot(site) == before, command  # nothing written, no backup removed
    # Every file the journal names still has its pristine bytes here: in place or backed up.
    for rel in files:
        own = pristine[rel.removeprefix("sglang/")]
        assert own in ((site / rel).read_bytes(), (site / ".patchkit/backups" / rel).read_bytes()), rel


def test_stale_journal_over_the_new_releases_own_files_is_discarded(release):
    site = release(VERSION)
    pristine = tree_bytes(site / "sglang")
    files = killed_after_the_journal(site)
    for rel in files:  # what a reinstall does: every file the release's own again
        path = site / rel
        path.unlink()
        path.write_bytes(pristine[rel.removeprefix("sglang/")])
    bump_version(site, f"{VERSION}.post1")
    result = run("clean", "--site-packages", site)
    assert result.exit_code == 0, result.stderr
    assert f"an unfinished patchkit run for SGLang {VERSION} was discarded" in result.stderr
    assert f"(an unfinished run for SGLang {VERSION})" in result.stdout
    assert not (site / ".patchkit").exists()
    assert tree_bytes(site / "sglang") == pristine
