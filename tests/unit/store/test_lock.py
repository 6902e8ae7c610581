"""The lock on a target folder (`.patchkit/lock`): two holders, --lock-timeout 0 and > 0,
exit 5, the waiting message naming the holder's PID, and the lock folder removed under a waiter.
On a synthetic tree, with holders in threads of this process and in a child process."""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from patchkit.store import lock as lock_mod
from patchkit.base.errors import LockTimeout
from testing import synthetic as syn
from testing.releases import snapshot
from testing.synthetic import Synthetic

# A child that holds the lock until its stdin closes; its `-c` code spans several lines.
HOLDER = """
import sys
from pathlib import Path
from patchkit.store import lock
with lock.locked(Path(sys.argv[1])):
    print("held", flush=True)
    sys.stdin.read()
"""


@pytest.fixture
def tree(scratch, tmp_path) -> Synthetic:
    return Synthetic(syn.make_tree(scratch / "site"), syn.write_patches(tmp_path / "patches"))


@pytest.fixture
def child_holder(tree):
    proc = subprocess.Popen([sys.executable, "-c", HOLDER, str(tree.site)], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True, cwd=Path(__file__).resolve().parents[3])
    assert proc.stdout.readline().strip() == "held"
    yield proc
    proc.stdin.close()
    proc.wait(timeout=30)


def test_a_second_holder_gives_up_at_once_with_timeout_0(tree):
    with lock_mod.locked(tree.site):
        started = time.monotonic()
        with pytest.raises(LockTimeout, match=r"gave up after 0s \(--lock-timeout 0\)"):
            with lock_mod.locked(tree.site, timeout=0):
                pytest.fail("two holders at once")
        assert time.monotonic() - started < 1
    with lock_mod.locked(tree.site, timeout=0):  # free again
        pass
    assert not (tree.site / ".patchkit").exists()  # a run leaves no lock (nor folder) behind


def test_a_waiter_gets_the_lock_when_the_holder_releases_it(tree):
    order: list[str] = []
    said: list[str] = []
    holding = threading.Event()

    def first():
        with lock_mod.locked(tree.site):
            holding.set()
            time.sleep(0.5)
            order.append("first done")

    thread = threading.Thread(target=first)
    thread.start()
    holding.wait(5)
    with lock_mod.locked(tree.site, timeout=30, on_wait=said.append):
        order.append("second in")
    thread.join()
    assert order == ["first done", "second in"]
    [message] = said  # said once, at the first attempt
    assert message.startswith("waiting up to 30s for the lock on") and f"PID {_pid()}" in message


def _pid() -> int:
    import os

    return os.getpid()


def test_a_waiter_gives_up_after_the_timeout(tree):
    said: list[str] = []
    with lock_mod.locked(tree.site):
        started = time.monotonic()
        with pytest.raises(LockTimeout) as refused:
            with lock_mod.locked(tree.site, timeout=0.6, on_wait=said.append):
                pytest.fail("two holders at once")
        waited = time.monotonic() - started
    assert 0.6 <= waited < 5
    assert f"PID {_pid()}" in str(refused.value) and "(--lock-timeout 0.6)" in str(refused.value)
    assert len(said) == 1


@pytest.mark.parametrize("command", ["apply", "revert", "clean"])
def test_cli_exits_5_naming_the_holder_and_changes_nothing(tree, child_holder, command):
    before = snapshot(tree.site)
    result = tree.run(command, "--lock-timeout", "0")
    assert result.exit_code == 5
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr  # one line, though its -c has newlines
    assert f"PID {child_holder.pid}: " in lines[0] and "python" in lines[0] and "--lock-timeout 0" in lines[0]
    assert snapshot(tree.site) == before


def test_cli_waits_says_who_it_waits_for_then_gives_up(tree, child_holder):
    started = time.monotonic()
    result = tree.run("apply", "--lock-timeout", "0.5")
    waited = time.monotonic() - started
    assert result.exit_code == 5 and 0.5 <= waited < 10
    warning, error = result.stderr.strip().splitlines()
    assert "waiting up to 0.5s for the lock" in warning and f"PID {child_holder.pid}" in warning
    assert error.startswith("error: ") and "gave up" in error
    assert tree.recorded() is None


@pytest.mark.parametrize("command", ["apply", "clean"])
def test_cli_waits_says_who_it_waits_for_then_gives_up_citing_its_timeout(tree, child_holder, command):
    """clean too (issue 18.4: it waited 60 s in silence, then cited --lock-timeout 60)."""
    started = time.monotonic()
    result = tree.run(command, "--lock-timeout", "0.7")
    waited = time.monotonic() - started
    assert result.exit_code == 5 and 0.7 <= waited < 10, result.stderr
    warning, error = result.stderr.strip().splitlines()
    assert "waiting up to 0.7s for the lock" in warning and f"PID {child_holder.pid}" in warning
    assert error.startswith("error: ") and "gave up" in error and "(--lock-timeout 0.7)" in error


def test_cli_runs_once_the_holder_is_gone(tree, child_holder):
    releaser = threading.Timer(1.5, child_holder.stdin.close)  # long after the run started waiting
    releaser.start()
    result = tree.run("apply", "--lock-timeout", "30")
    releaser.join()
    assert result.exit_code == 0, result.stderr
    assert f"held by PID {child_holder.pid}" in result.stderr
    assert tree.recorded() == [syn.FIX, syn.STACK_A, syn.STACK_B]


def test_the_lock_folder_removed_under_a_waiter(tree):
    """The holder's run ends by removing `.patchkit/` with the lock file in it (a revert). The
    waiter wakes up holding a lock on the removed file: it must notice and lock the new one,
    so that a third run cannot get in beside it."""
    waiting, inside, leave = threading.Event(), threading.Event(), threading.Event()
    errors: list[BaseException] = []

    def waiter():
        try:
            with lock_mod.locked(tree.site, timeout=30, on_wait=lambda _: waiting.set()):
                inside.set()
                leave.wait(10)
        except BaseException as exc:  # noqa: BLE001 - reported by the main thread
            errors.append(exc)
            inside.set()

    with lock_mod.locked(tree.site):
        thread = threading.Thread(target=waiter)
        thread.start()
        assert waiting.wait(10), "the second run did not wait"
        lock = tree.site / ".patchkit" / "lock"
    # Released: the lock file and the empty `.patchkit/` are gone.
    assert inside.wait(10) and not errors, errors
    try:
        assert lock.exists()  # the waiter locked a file that is there, not the removed one
        with pytest.raises(LockTimeout):
            with lock_mod.locked(tree.site, timeout=0):
                pytest.fail("a third run got the lock beside the waiter")
    finally:
        leave.set()
        thread.join()
    assert not (tree.site / ".patchkit").exists()


def test_a_symlinked_lock_file_is_refused(tree, tmp_path):
    (tree.site / ".patchkit").mkdir()
    outside = tmp_path / "outside"
    outside.write_text("not patchkit's\n")
    (tree.site / ".patchkit" / "lock").symlink_to(outside)
    result = tree.run("apply", "--lock-timeout", "0")
    assert result.exit_code == 3 and "symlink" in result.stderr
    assert outside.read_text() == "not patchkit's\n"


def _interrupted_after_unlinking_the_lock(monkeypatch, site: Path) -> None:
    """A KeyboardInterrupt (as the fault harness's interrupt-after raises it) in os.unlink of the
    lock file, once it did its work."""
    import os

    real, lock_file = os.unlink, site / ".patchkit" / "lock"

    def interrupted(path, *args, **kwargs):
        real(path, *args, **kwargs)
        if Path(path) == lock_file:
            raise KeyboardInterrupt

    monkeypatch.setattr(os, "unlink", interrupted)


def test_a_keyboard_interrupt_while_the_lock_is_released_leaves_no_patchkit_folder(tree, monkeypatch):
    """The lock file gone, a KeyboardInterrupt then stopped the release before its empty
    `.patchkit/` was removed: the tree kept a folder of patchkit's that nothing had written to."""
    before = snapshot(tree.site)
    _interrupted_after_unlinking_the_lock(monkeypatch, tree.site)
    with pytest.raises(KeyboardInterrupt):
        with lock_mod.locked(tree.site):
            assert (tree.site / ".patchkit" / "lock").is_file()
    assert not (tree.site / ".patchkit").exists()
    assert snapshot(tree.site) == before


# A patchkit command's one thread, Ctrl-C'd (a process-wide SIGINT, as a terminal sends it) in the
# release: in os.unlink of the lock file once it did its work, or in os.rmdir of `.patchkit/` before.
# In a child process: in the test's own (an xdist worker has execnet's threads) the kernel may hand
# the signal to a thread that does not hold it back, so the harness, not patchkit, would decide.
CTRL_C_IN_RELEASE = """
import os, signal, sys
from pathlib import Path
from patchkit.store import lock
# As a terminal's command has it: a Python started in a shell's background (`cmd &`) inherits
# SIGINT ignored and never raises KeyboardInterrupt (testing/sweep.py says the same of the sweep).
signal.signal(signal.SIGINT, signal.default_int_handler)
site, call = Path(sys.argv[1]), sys.argv[2]
where = site / ".patchkit" / ("lock" if call == "unlink" else "")
real = getattr(os, call)
def interrupted(path, *args, **kwargs):
    if call == "rmdir" and Path(path) == where:
        os.kill(os.getpid(), signal.SIGINT)
    result = real(path, *args, **kwargs)
    if call == "unlink" and Path(path) == where:
        os.kill(os.getpid(), signal.SIGINT)
    return result
setattr(os, call, interrupted)
try:
    with lock.locked(site):
        assert (site / ".patchkit" / "lock").is_file()
except KeyboardInterrupt:
    print("interrupted")
"""


@pytest.mark.parametrize("call", ["unlink", "rmdir"],
                         ids=["SIGINT after the lock file's unlink", "SIGINT as .patchkit is removed"])
def test_a_ctrl_c_while_the_lock_is_released_leaves_no_patchkit_folder(tree, call):
    """Release finishes first (a real SIGINT is held until then), and the interrupt still reaches
    the command."""
    before = snapshot(tree.site)
    child = subprocess.run([sys.executable, "-c", CTRL_C_IN_RELEASE, str(tree.site), call], capture_output=True,
                           text=True, timeout=60, cwd=Path(__file__).resolve().parents[3])
    assert child.stdout == "interrupted\n", child.stdout + child.stderr
    assert not (tree.site / ".patchkit").exists()
    assert snapshot(tree.site) == before
