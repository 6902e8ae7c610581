"""The transaction on a synthetic tree: its commit point is the journal. A failure before it
leaves every file as it was; past it the run is finished (at once, or by the next run); a file
that is neither the journal's `before` nor its `after` stops the next run (exit 4). Failures
are injected with monkeypatch: os.replace / os.fsync raising OSError(EIO / ENOSPC), Ctrl-C."""

from __future__ import annotations

import errno
import json
import os
import shlex
import shutil
from pathlib import Path

import pytest

from patchkit.store import lock as lock_mod
from patchkit.store import transaction
from patchkit.store.target import find_in
from testing import synthetic as syn
from testing.releases import snapshot
from testing.synthetic import ALPHA, ALPHA_EXT, GAMMA, Synthetic

JOURNAL = ".patchkit/journal.json"


@pytest.fixture(scope="module")
def patches(tmp_path_factory) -> Path:
    return syn.write_patches(tmp_path_factory.mktemp("patches") / "set")


@pytest.fixture
def fresh(scratch, patches):
    count = iter(range(1000))

    def make() -> Synthetic:
        return Synthetic(syn.make_tree(scratch / f"site{next(count)}"), patches)

    return make


@pytest.fixture
def reference(fresh):
    """What an unfaulted apply makes of a fresh tree, and the os.replace destinations it used,
    in order (the journal is the commit point)."""
    t = fresh()
    pristine = snapshot(t.site)
    calls: list[str] = []
    real = os.replace

    def record(src, dst, *args, **kwargs):
        if Path(dst).is_relative_to(t.site):  # (not PATCHKIT_HOME's caches, written when cold)
            calls.append(Path(dst).relative_to(t.site).as_posix())
        return real(src, dst, *args, **kwargs)

    os.replace = record
    try:
        assert t.run("apply").exit_code == 0
    finally:
        os.replace = real
    return {"pristine": pristine, "applied": snapshot(t.site), "replaces": calls, "commit": calls.index(JOURNAL) + 1}


def fault(monkeypatch, name: str, at: int, exc: BaseException, repeat: bool = False) -> list[str]:
    """Make the `at`-th call of os.<name> (and, with `repeat`, every later one) raise `exc`
    instead of doing its work. Returns the paths of the calls, in order."""
    real = getattr(os, name)
    calls: list[str] = []

    def faulted(*args, **kwargs):
        calls.append(str(args[-1]) if args else "")
        if len(calls) == at or (repeat and len(calls) > at):
            if isinstance(exc, OSError) and name == "replace":
                raise OSError(exc.errno, exc.strerror, args[0], None, args[1])
            raise exc
        return real(*args, **kwargs)

    monkeypatch.setattr(os, name, faulted)
    return calls


EIO = OSError(errno.EIO, os.strerror(errno.EIO))
ENOSPC = OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))


def one_error_line(result, code: int) -> str:
    assert result.exit_code == code, (result.stdout, result.stderr)
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    return lines[0]


def test_the_journal_is_the_commit_point(reference):
    """A full apply of three files: 3 backups, 3 staged copies, the journal, 3 moves, the state."""
    replaces = reference["replaces"]
    assert reference["commit"] == 7 and len(replaces) == 11
    assert all(r.startswith(".patchkit/backups/") for r in replaces[:3])
    assert all(r.startswith(".patchkit/pending/") for r in replaces[3:6])
    assert sorted(replaces[7:10]) == sorted([ALPHA, ALPHA_EXT, GAMMA]) and replaces[10] == ".patchkit/state.json"


# --- before the commit point: every file as it was -----------------------------------------------


@pytest.mark.parametrize("exc", [EIO, ENOSPC], ids=["EIO", "ENOSPC"])
def test_a_replace_failing_before_the_commit_point_changes_nothing(fresh, reference, monkeypatch, exc):
    for at in range(1, reference["commit"] + 1):
        t = fresh()
        fault(monkeypatch, "replace", at, exc)
        line = one_error_line(t.run("apply"), 6)
        monkeypatch.undo()
        assert f"({errno.errorcode[exc.errno]})" in line and str(t.site) in line, line
        assert snapshot(t.site) == reference["pristine"], f"os.replace #{at}"


def test_an_fsync_failing_before_the_commit_point_changes_nothing(fresh, reference, monkeypatch):
    t = fresh()
    calls = fault(monkeypatch, "fsync", 10**6, ENOSPC)  # count only
    assert t.run("apply").exit_code == 0
    monkeypatch.undo()
    # Each atomic write syncs its file and then its folder: the journal's folder sync is the
    # last one before the commit point.
    before_commit = 2 * reference["commit"]
    assert len(calls) > before_commit
    for at in range(1, before_commit + 1):
        t = fresh()
        fault(monkeypatch, "fsync", at, ENOSPC)
        line = one_error_line(t.run("apply"), 6)
        monkeypatch.undo()
        assert "No space left on device (ENOSPC)" in line, line
        assert snapshot(t.site) == reference["pristine"], f"os.fsync #{at}"


def test_a_failure_before_the_commit_point_keeps_an_earlier_apply(fresh, monkeypatch):
    t = fresh()
    assert t.run("apply", "--only", syn.STACK_B).exit_code == 0
    before = snapshot(t.site)
    for at in range(1, 6):  # 2 backups (alpha, alpha_ext), 3 staged copies (gamma is re-rendered)
        fault(monkeypatch, "replace", at, EIO)
        one_error_line(t.run("apply"), 6)
        monkeypatch.undo()
        assert snapshot(t.site) == before, f"os.replace #{at}"


def test_ctrl_c_before_the_commit_point_changes_nothing(fresh, reference, monkeypatch):
    for at in (1, reference["commit"]):
        t = fresh()
        fault(monkeypatch, "replace", at, KeyboardInterrupt())
        line = one_error_line(t.run("apply"), 130)
        monkeypatch.undo()
        assert "before any file was changed" in line
        assert snapshot(t.site) == reference["pristine"]


# --- past the commit point: the run is finished ----------------------------------------------------


def test_a_failure_past_the_commit_point_that_does_not_repeat_is_retried(fresh, reference, monkeypatch):
    for at in range(reference["commit"] + 1, len(reference["replaces"]) + 1):
        t = fresh()
        fault(monkeypatch, "replace", at, EIO)
        result = t.run("apply")
        monkeypatch.undo()
        assert result.exit_code == 0, (at, result.stderr)
        assert snapshot(t.site) == reference["applied"], f"os.replace #{at}"


def test_ctrl_c_past_the_commit_point_finishes_the_run_first(fresh, reference, monkeypatch):
    t = fresh()
    fault(monkeypatch, "replace", reference["commit"] + 1, KeyboardInterrupt())
    line = one_error_line(t.run("apply"), 130)
    monkeypatch.undo()
    assert "the run was finished first" in line
    assert snapshot(t.site) == reference["applied"]


def leave_pending(t: Synthetic, reference, monkeypatch, moved: int = 1) -> None:
    """An apply whose every os.replace fails after `moved` files were moved into place: the
    journal stays for the next run."""
    fault(monkeypatch, "replace", reference["commit"] + moved + 1, EIO, repeat=True)
    line = one_error_line(t.run("apply"), 6)
    monkeypatch.undo()
    apply, revert = (shlex.join(("patchkit", "--patches", str(t.patches), verb, "--site-packages", str(t.site)))
                     for verb in ("apply", "revert"))  # this run's tree
    assert f"the next `{apply}` or `{revert}` finishes it" in line
    assert (t.site / JOURNAL).exists()


@pytest.mark.parametrize("moved", [0, 1, 2, 3])
def test_a_repeating_failure_past_the_commit_point_is_finished_by_the_next_apply(fresh, reference, monkeypatch, moved):
    t = fresh()
    leave_pending(t, reference, monkeypatch, moved)
    now = snapshot(t.site)
    for rel in (ALPHA, ALPHA_EXT, GAMMA):  # each file whole: its bytes before or after, never half
        assert now[rel] in (reference["pristine"][rel], reference["applied"][rel])
    assert sum(now[rel] == reference["applied"][rel] for rel in (ALPHA, ALPHA_EXT, GAMMA)) == moved
    status = t.run("status")
    assert "an interrupted patchkit run is pending" in status.stderr
    assert t.run("apply").exit_code == 0
    assert snapshot(t.site) == reference["applied"]


def test_a_pending_run_is_finished_by_revert_then_reverted(fresh, reference, monkeypatch):
    t = fresh()
    leave_pending(t, reference, monkeypatch)
    result = t.run("revert")
    assert result.exit_code == 0, result.stderr
    assert snapshot(t.site) == reference["pristine"]


def test_recover_finishes_the_run_under_the_lock(fresh, reference, monkeypatch):
    t = fresh()
    leave_pending(t, reference, monkeypatch)
    target = find_in(t.site)
    with lock_mod.locked(t.site):
        assert transaction.recover(target).finished
        assert not transaction.recover(target).finished  # nothing left to finish
    assert snapshot(t.site) == reference["applied"]


# --- neither before nor after: exit 4 --------------------------------------------------------------


def test_a_file_changed_under_a_pending_journal_stops_the_next_run(fresh, reference, monkeypatch):
    t = fresh()
    leave_pending(t, reference, monkeypatch, moved=1)
    journal = json.loads((t.site / JOURNAL).read_text())
    waiting = journal["files"][-1]["rel"]  # not moved yet: still its `before` bytes
    with open(t.site / waiting, "a") as handle:
        handle.write("# the user's edit\n")
    edited = (t.site / waiting).read_bytes()
    before = snapshot(t.site)
    for command in ("apply", "revert"):
        line = one_error_line(t.run(command), 4)
        assert waiting in line and "neither those before nor after" in line and "nothing was written" in line
        assert snapshot(t.site) == before
    result = t.run("apply", "--force", "--json")
    assert result.exit_code == 0, result.stderr
    [kept] = result.json()["overwritten"]
    assert kept["file"] == waiting and (t.site / kept["kept"]).read_bytes() == edited
    assert {rel: v for rel, v in snapshot(t.site).items() if not rel.startswith(".patchkit/overwritten")} == \
        reference["applied"]


def test_a_corrupt_journal_is_exit_1_and_nothing_is_written(fresh, reference, monkeypatch):
    t = fresh()
    leave_pending(t, reference, monkeypatch)
    journal = json.loads((t.site / JOURNAL).read_text())
    journal["files"][0]["rel"] = "../outside.py"
    (t.site / JOURNAL).write_text(json.dumps(journal))
    before = snapshot(t.site)
    for command in ("apply", "revert"):
        line = one_error_line(t.run(command), 1)
        assert "not a valid patchkit journal" in line
        assert snapshot(t.site) == before


def test_a_missing_staged_copy_is_exit_1_and_nothing_is_written(fresh, reference, monkeypatch):
    t = fresh()
    leave_pending(t, reference, monkeypatch, moved=1)
    shutil.rmtree(t.site / ".patchkit" / "pending")
    before = snapshot(t.site)
    line = one_error_line(t.run("apply"), 1)
    assert "staged copy" in line and "missing or corrupt" in line
    assert snapshot(t.site) == before


def test_a_journal_of_another_release_is_discarded_without_writing(fresh, reference, monkeypatch):
    t = fresh()
    leave_pending(t, reference, monkeypatch, moved=1)
    syn.reinstall(t.site, "0.9.1")
    package = {rel: v for rel, v in snapshot(t.site).items() if not rel.startswith(".patchkit")}
    result = t.run("revert")
    assert result.exit_code == 0, result.stderr
    assert "for SGLang 0.9.0 was discarded without writing: 0.9.1 is installed now" in result.stderr
    assert snapshot(t.site) == package  # 0.9.1 as installed, `.patchkit/` gone


# --- revert has the same commit point ----------------------------------------------------------------


def test_a_revert_failing_before_its_commit_point_keeps_the_patches(fresh, reference, monkeypatch):
    # A full revert: 3 staged copies, then the journal.
    for at in range(1, 5):
        t = fresh()
        assert t.run("apply").exit_code == 0
        fault(monkeypatch, "replace", at, ENOSPC)
        one_error_line(t.run("revert"), 6)
        monkeypatch.undo()
        assert snapshot(t.site) == reference["applied"], f"os.replace #{at}"
