"""All-or-nothing writes: injected failures, Ctrl-C, SIGKILL at every step, and the lock."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import time

import pytest

from patchkit.store import lock as lock_mod
from patchkit.store import state as state_mod
from patchkit.store import transaction
from patchkit.base.errors import Interrupted, PatchkitError
from patchkit.store.state import FileRecord, State
from patchkit.store.target import find_in
from patchkit.store.transaction import FileWrite
from patchkit.base.util import sha256
from testing.cli import fully_applied, run, states
from testing.releases import MODEL_CONFIG, pristine, snapshot

pytestmark = pytest.mark.integration

LOAD_CONFIG = "sglang/srt/configs/load_config.py"


def two_file_plan(site):
    target = find_in(site)
    writes, files = [], {}
    for rel in (MODEL_CONFIG, LOAD_CONFIG):
        before = (site / rel).read_bytes()
        after = before + b"\n# patched\n"
        writes.append(FileWrite(rel=rel, before=before, after=after, pristine=before))
        files[rel] = FileRecord(pristine=sha256(before), patched=sha256(after), patches=["test"])
    return target, writes, State(sglang_version=target.version, patches=["test"], files=files)


def test_multi_file_commit(release):
    site = release("0.5.17", extra=(LOAD_CONFIG,))
    target, writes, new = two_file_plan(site)
    with lock_mod.locked(site):
        transaction.commit(target, writes, None, new)
    assert all((site / w.rel).read_bytes() == w.after for w in writes)
    assert state_mod.load(site) == new


@pytest.mark.parametrize("exc", [OSError(5, "Input/output error"), KeyboardInterrupt()])
def test_a_failure_past_the_commit_point_finishes_the_run(release, monkeypatch, exc):
    """Once the journal is written a run is finished, never half-undone: a failure that does
    not repeat is retried at once; a Ctrl-C says the run was finished first."""
    site = release("0.5.17", extra=(LOAD_CONFIG,))
    target, writes, new = two_file_plan(site)
    real_replace, calls = transaction.replace, []

    def replace_then_fail(src, dst):
        calls.append(dst)
        real_replace(src, dst)
        if len(calls) == 1:  # the first file is in place when the failure comes
            raise exc

    monkeypatch.setattr(transaction, "replace", replace_then_fail)
    with lock_mod.locked(site):
        if isinstance(exc, KeyboardInterrupt):
            with pytest.raises(Interrupted, match="the run was finished first"):
                transaction.commit(target, writes, None, new)
        else:
            transaction.commit(target, writes, None, new)
    assert all((site / w.rel).read_bytes() == w.after for w in writes)
    assert state_mod.load(site) == new and not state_mod.journal_path(site).exists()


@pytest.mark.parametrize("exc", [OSError(5, "Input/output error"), KeyboardInterrupt()])
def test_a_repeating_failure_past_the_commit_point_leaves_the_run_to_the_next_one(release, monkeypatch, exc):
    site = release("0.5.17", extra=(LOAD_CONFIG,))
    target, writes, new = two_file_plan(site)
    real_replace = transaction.replace

    def moved_then_fail(src, dst):
        if dst == site / LOAD_CONFIG:
            raise exc
        real_replace(src, dst)

    monkeypatch.setattr(transaction, "replace", moved_then_fail)
    with pytest.raises(PatchkitError, match=r"the next `patchkit apply [^`]+` or `patchkit revert [^`]+` finishes it"):
        with lock_mod.locked(site):
            transaction.commit(target, writes, None, new)
    assert (site / MODEL_CONFIG).read_bytes() == writes[0].after and (site / LOAD_CONFIG).read_bytes() == writes[1].before
    assert state_mod.journal_path(site).exists()
    monkeypatch.setattr(transaction, "replace", real_replace)
    with lock_mod.locked(site):
        assert transaction.recover(target).finished
    assert all((site / w.rel).read_bytes() == w.after for w in writes)
    assert state_mod.load(site) == new and not state_mod.journal_path(site).exists()


def test_ctrl_c_during_apply_exits_130_and_says_what_happened(release, monkeypatch):
    site = release("0.5.17")
    before = snapshot(site)
    real_replace = transaction.replace

    def interrupted(src, dst):
        raise KeyboardInterrupt

    monkeypatch.setattr(transaction, "replace", interrupted)
    result = run("apply", "--site-packages", site)
    assert result.exit_code == 130
    assert "interrupted while files were being replaced" in result.stderr and "finishes it" in result.stderr
    assert {k: v for k, v in snapshot(site).items() if not k.startswith(".patchkit")} == {
        k: v for k, v in before.items() if not k.startswith(".patchkit")}
    monkeypatch.setattr(transaction, "replace", real_replace)
    assert run("apply", "--site-packages", site).exit_code == 0
    assert states(site) == fully_applied("0.5.17")


KILLER = textwrap.dedent("""
    import os, signal, sys
    kill_at = int(sys.argv[1])
    calls = 0
    real = os.replace
    def replace(src, dst):
        global calls
        calls += 1
        if calls == kill_at:
            os.kill(os.getpid(), signal.SIGKILL)
        real(src, dst)
    os.replace = replace
    sys.argv = ["patchkit", *sys.argv[2:]]
    from patchkit.cli.app import main
    main()
""")


def killed(kill_at: int, *args) -> int:
    return subprocess.run([sys.executable, "-c", KILLER, str(kill_at), *map(str, args)], capture_output=True).returncode


# Two patches over three files: 3 backups + 3 staged files + journal + 3 moves + state = 11
# os.replace calls in an apply; every one of them is a kill point.
SUBSET = ("--only", "mtp-layer-detection", "--only", "symm-mem-kill-switch")
FILES = (
    MODEL_CONFIG,
    "sglang/srt/distributed/device_communicators/triton_symm_mem_ag.py",
    "sglang/srt/distributed/device_communicators/torch_symm_mem.py",
)


def contents(site) -> dict[str, bytes]:
    return {rel: (site / rel).read_bytes() for rel in FILES}


@pytest.fixture(scope="module")
def patched_files(tmp_path_factory) -> dict[str, bytes]:
    """What an uninterrupted apply of SUBSET makes of 0.5.17's files."""
    from testing.releases import copy_minimal

    site = copy_minimal("0.5.17", tmp_path_factory.mktemp("reference") / "site")
    assert run("apply", "--site-packages", site, *SUBSET).exit_code == 0
    return contents(site)


def assert_whole(site, clean: dict[str, bytes], patched: dict[str, bytes]) -> None:
    for rel, data in contents(site).items():
        assert data in (clean[rel], patched[rel]), f"{rel} was left half-written"


@pytest.mark.parametrize("kill_at", range(1, 12))
def test_sigkill_during_apply_then_next_run_finishes(release, kill_at, patched_files):
    site = release("0.5.17")
    clean = contents(pristine("0.5.17"))
    assert killed(kill_at, "apply", "--site-packages", site, *SUBSET) == -9
    assert_whole(site, clean, patched_files)
    assert run("apply", "--site-packages", site, *SUBSET).exit_code == 0
    assert contents(site) == patched_files
    assert states(site)["symm-mem-kill-switch"] == states(site)["mtp-layer-detection"] == "applied"
    assert sorted(p.name for p in (site / ".patchkit").iterdir()) == ["backups", "state.json"]
    assert run("revert", "--site-packages", site).exit_code == 0
    assert contents(site) == clean and not (site / ".patchkit").exists()


# A revert of the same: 3 staged files + journal + 3 moves = 7 os.replace calls.
@pytest.mark.parametrize("kill_at", range(1, 8))
def test_sigkill_during_revert_then_next_run_finishes(release, kill_at, patched_files):
    site = release("0.5.17")
    clean = contents(pristine("0.5.17"))
    assert run("apply", "--site-packages", site, *SUBSET).exit_code == 0
    assert killed(kill_at, "revert", "--site-packages", site) == -9
    assert_whole(site, clean, patched_files)
    assert run("revert", "--site-packages", site).exit_code == 0
    assert contents(site) == clean and not (site / ".patchkit").exists()


def test_two_concurrent_applies_serialize(release):
    site = release("0.5.17")
    procs = [subprocess.Popen([sys.executable, "-m", "patchkit", "apply", "--site-packages", str(site)],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for _ in range(2)]
    outputs = [p.communicate(timeout=120) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], outputs
    assert sorted("nothing to do" in out for out, _ in outputs) == [False, True]
    assert states(site) == fully_applied("0.5.17")
    assert run("revert", "--site-packages", site).exit_code == 0
    assert (site / MODEL_CONFIG).read_bytes() == (pristine("0.5.17") / MODEL_CONFIG).read_bytes()


def test_apply_waits_for_the_lock(release):
    site = release("0.5.17")
    with lock_mod.locked(site):
        proc = subprocess.Popen([sys.executable, "-m", "patchkit", "apply", "--site-packages", str(site)],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        time.sleep(3)
        assert proc.poll() is None, "apply did not wait for the lock"
        assert not state_mod.state_path(site).exists()
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err
    assert state_mod.state_path(site).exists()


PROBE = """
import sys
sys.argv = ["patchkit", *sys.argv[1:]]
from patchkit.cli.app import main
try:
    main()
except SystemExit as exit:
    assert exit.code == 0, exit.code
print("LIBCST" if "libcst" in sys.modules else "NO-LIBCST")
"""


def imports_libcst(*args) -> bool:
    proc = subprocess.run([sys.executable, "-c", PROBE, *map(str, args)], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.strip().splitlines()[-1] == "LIBCST"


def test_status_and_noop_apply_do_not_import_libcst(release):
    site = release("0.5.17")
    assert imports_libcst("status", "--site-packages", site) is False  # decided by the manifest's hashes
    assert imports_libcst("apply", "--site-packages", site) is True  # a real apply parses
    assert imports_libcst("status", "--site-packages", site) is False
    assert imports_libcst("apply", "--site-packages", site) is False
