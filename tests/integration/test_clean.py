"""`clean` is crash-safe (issue 18.4): the state file goes last, so a SIGKILL or a Ctrl-C while
`.patchkit/` is being removed leaves a record naming what is left, the next `clean` removes the
rest, and `apply`/`revert` work after it; a Ctrl-C says what was removed."""

from __future__ import annotations

import pytest

from testing.cli import run
from testing.faults import run_faulted
from testing.releases import tree_bytes

pytestmark = pytest.mark.integration

VERSION = "0.5.14"


def stale_record(site) -> dict[str, bytes]:
    """A tree whose `.patchkit/` was left by SGLang 0.5.14 and whose files were reinstalled
    (0.5.14.post1: the same files, another version). Returns the release's bytes."""
    pristine = tree_bytes(site / "sglang")
    assert run("apply", "--site-packages", site).exit_code == 0
    for rel, data in pristine.items():
        path = site / "sglang" / rel
        if path.read_bytes() != data:
            path.unlink()
            path.write_bytes(data)
    metadata = site / f"sglang-{VERSION}.dist-info" / "METADATA"
    text = metadata.read_text().replace(f"Version: {VERSION}\n", f"Version: {VERSION}.post1\n")
    metadata.unlink()
    metadata.write_text(text)
    return pristine


def _unlinks(site) -> int:
    """os.unlink calls of one clean of a stale record (counted in a copy: a kill at N+1 is a completed run)."""
    return len([p for p in (site / ".patchkit").rglob("*") if p.is_file()])


@pytest.mark.parametrize("when", ["kill-before", "interrupt-after"])
def test_a_clean_killed_or_interrupted_at_any_unlink_leaves_no_unnamed_backup(release, tmp_path, when):
    site = release(VERSION)
    pristine = stale_record(site)
    import shutil

    seed = tmp_path / "seed"
    shutil.copytree(site, seed, symlinks=True)
    for n in range(1, _unlinks(site) + 1):
        trial = tmp_path / f"{when}-{n}"
        shutil.copytree(seed, trial, symlinks=True)
        faulted = run_faulted("unlink", n, when, "clean", "--site-packages", trial)
        left = trial / ".patchkit"
        backups = [p for p in (left / "backups").rglob("*") if p.is_file()] if left.exists() else []
        assert not backups or (left / "state.json").is_file(), (n, faulted.stderr)  # every backup named
        if when == "kill-before":
            assert faulted.returncode == -9, (n, faulted.stderr)
        else:
            assert faulted.returncode == 130, (n, faulted.stderr)
            said = faulted.stderr.strip().splitlines()[-1]
            if (left / "state.json").exists():
                assert f"was being removed; its record is removed last, so `patchkit clean --site-packages {trial}` again removes the rest" in said
            else:
                assert "interrupted after removing" in said, said
            assert "every file was left as it was" not in said
        again = run("clean", "--site-packages", trial)
        assert again.exit_code == 0, (n, again.stderr)
        assert not left.exists() or not any(p.name != "lock" for p in left.iterdir()), n
        assert tree_bytes(trial / "sglang") == pristine
    applied = run("apply", "--site-packages", trial)
    assert applied.exit_code == 0, applied.stderr
    assert run("revert", "--site-packages", trial).exit_code == 0
    assert tree_bytes(trial / "sglang") == pristine
