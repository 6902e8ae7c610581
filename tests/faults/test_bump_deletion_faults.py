"""Faults at `bump --continue DIR`'s writes for a tree whose record carries a deletion (the record's
`deleted` key, 67a5c56): the offload diff of tests/faults/test_bump_sweep.py (0.5.17 -> real
0.5.23, a conflict written as a tree) with a deletion of a file both releases hold alike, resolved
as a user would. EIO or ENOSPC injected by strace at the first and the last write, fsync and
rename(at) of DIR (each seen delivered), a full tmpfs and a read-only DIR: each run exits 6 with
one line, and DIR is byte for byte as it was, or, where the fault came past the journal's commit
point, holds the journal, the line says so, and the next run puts the new set in place
(bump_writer.write; docs/faults.md)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from testing import write_faults
from testing.releases import tree
from tests.faults.test_bump_sweep import OFFLOADER, V, V0, _resolve

pytestmark = [pytest.mark.faults, pytest.mark.slow, pytest.mark.integration]

DELETED = "sglang/kernels/ops/attention/dsv4/utils.py"  # the same 62 bytes in 0.5.17 and 0.5.23
JOURNAL = ".patchkit-bump-journal.json"
COMMAND = ("bump", "--continue", "out")


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    """(home, a folder `seed` whose `out` is the resolved tree to finish, the end set of `out`)."""
    from testing.checkout import wheel_home
    from testing.diffs import git_diff
    from testing.releases import pristine

    root = tmp_path_factory.mktemp("bump-deletion-faults")
    home = wheel_home(root / "home", (V0, V))
    before = (pristine(V0) / OFFLOADER).read_bytes()
    after = before.replace(b"int(server_args.cpu_offload_gb * 1024**3)", b"int(server_args.cpu_offload_gb * (1 << 30))")
    gone = (pristine(V0) / DELETED).read_bytes()
    assert after != before and gone == (pristine(V) / DELETED).read_bytes()
    (root / "set").mkdir()
    (root / "set" / "offload-bytes.patch").write_bytes(git_diff(
        {OFFLOADER: before, DELETED: gone}, {OFFLOADER: after, DELETED: None},
        header="Subject: [PATCH] offload bytes\n\n---\n"))
    seed = root / "seed"
    seed.mkdir()
    made = write_faults.run(("--patches", str(root / "set"), "bump", "--from", V0, "--to", V, "-o", "out"), seed, home)
    assert made.returncode == 1, made.stderr
    assert DELETED in (seed / "out" / "offload-bytes.tree" / ".patchkit-rebase.json").read_text()
    _resolve(seed / "out")
    (seed / "out" / "MYNOTES.txt").write_text("the user's own file in DIR\n")
    end = root / "end"
    shutil.copytree(seed, end, symlinks=True)
    done = write_faults.run(COMMAND, end, home)
    assert done.returncode == 0, done.stderr
    assert f"diff --git a/{DELETED} b/{DELETED}\ndeleted file mode" in (end / "out" / "offload-bytes.patch").read_text()
    return home, seed, tree(end / "out")


def _trial_folder(seed: Path, where: Path) -> Path:
    shutil.copytree(seed, where, symlinks=True)
    return where


def _failed(proc: subprocess.CompletedProcess, work: Path, home: Path, start: dict, end: dict, cause: str) -> str:
    """'as it was', 'in place' (the switch made, only a sync after it failed, said so) or 'committed'
    (the journal there, said, and put in place by the next run)."""
    assert proc.returncode == 6, (proc.returncode, proc.stderr)
    # One line of error, last, after the progress lines (`ID: finished from NAME.tree`); it names
    # the file or folder (before, a failed write in DIR said only `Input/output error (EIO)`).
    [line] = [line for line in proc.stderr.strip().splitlines() if not line.endswith(".tree")]
    assert line == proc.stderr.strip().splitlines()[-1] and line.startswith("error: "), line
    assert f"({cause})" in line or f", {cause})" in line, line
    assert "out" in line.split(":")[1], line  # DIR as the user named it (`out`)
    now = tree(work / "out")
    if now == start:
        return "as it was"
    if now == end:  # the switch made, a sync after it failed: said so (before: only `out: ... (ENOSPC)`)
        assert "new set is in place" in line and "sync" in line, line
        return "in place"
    assert JOURNAL in now and "was committed" in line, line
    again = write_faults.run(COMMAND, work, home)
    assert again.returncode == 0 and tree(work / "out") == end, again.stderr
    return "committed"


def test_an_injected_error_at_a_write_of_dir_leaves_it_as_it_was_or_committed(strace, world, tmp_path):
    home, seed, end = world
    start = tree(seed / "out")
    work = _trial_folder(seed, tmp_path / "reference")
    done, found = write_faults.reference(strace, COMMAND, work, home, [work / "out"], tmp_path / "reference.strace")
    assert done.returncode == 0 and tree(work / "out") == end, done.stderr
    chosen = write_faults.picks(found)
    assert {name for name, _, _ in chosen} >= {"write", "fsync"} and {"rename", "renameat", "renameat2"} & {
        name for name, _, _ in chosen}, found
    outcomes = []
    for i, (syscall, n, error) in enumerate(chosen):
        work = _trial_folder(seed, tmp_path / f"trial{i}")
        proc, undelivered = write_faults.faulted(strace, COMMAND, work, home, syscall, n, error,
                                                 tmp_path / "trial.strace")
        assert undelivered is None, (syscall, n, error, undelivered)
        try:
            outcomes.append(_failed(proc, work, home, start, end, error))
        except AssertionError as exc:
            raise AssertionError(f"{syscall}:error={error}:when={n}: {exc}") from None
        shutil.rmtree(work)
    assert "as it was" in outcomes, outcomes


def test_a_full_file_system_leaves_dir_as_it_was(world, tmp_path):
    why = write_faults.cannot_mount()
    if why:
        pytest.skip(f"a full tmpfs cannot be mounted: {why}")
    home, seed, end = world
    with write_faults.full_tmpfs(tmp_path / "small", 0, lambda small: _trial_folder(seed, small / "w")) as small:
        assert _failed(write_faults.run(COMMAND, small / "w", home), small / "w", home, tree(seed / "out"), end,
                       "ENOSPC") == "as it was"


def test_a_read_only_dir_is_left_as_it_was(world, tmp_path):
    home, seed, end = world
    work = _trial_folder(seed, tmp_path / "w")
    with write_faults.read_only(work / "out") as how:
        proc = write_faults.run(COMMAND, work, home)
        assert _failed(proc, work, home, tree(seed / "out"), end, "EROFS" if "mount" in how else "EACCES") == \
            "as it was"
    # Before: `-o out: ... (Read-only file system); name another`, for a --continue run.
    assert proc.stderr.strip().endswith(f"error: --continue out: cannot make a folder there and write in it "
                                        f"(Read-only file system, EROFS); make it writable and run again") or \
        "mount" not in how, proc.stderr
