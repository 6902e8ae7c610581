"""A killed patchkit leaves no process of its own behind, and the next run does not hang.

patchkit starts no helper process for its work; these tests kill a real cold apply at
several moments (while it reads, renders and writes) and look for anything of its session
still alive, then run the next apply and revert under a deadline."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from testing.releases import pristine

pytestmark = pytest.mark.integration


def session_members(sid: int) -> list[str]:
    """Command lines of every live process in session `sid` (zombies excluded)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2:].split()
        if fields[0] != "Z" and int(fields[3]) == sid:  # state, ppid, pgrp, session
            found.append(f"{entry.name}: {cmdline}")
    return found


def alone_after(sid: int, grace: float) -> list[str]:
    """The members of session `sid` still alive `grace` seconds from now (none, at once, if it is empty)."""
    deadline = time.monotonic() + grace
    while (members := session_members(sid)) and time.monotonic() < deadline:
        time.sleep(0.05)
    return members


def patchkit(*args: str | Path, **kwargs) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "patchkit", *map(str, args)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, start_new_session=True, **kwargs)


def finish(*args: str | Path) -> subprocess.CompletedProcess:
    proc = patchkit(*args)
    try:
        out, err = proc.communicate(timeout=180)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        raise AssertionError(f"patchkit {' '.join(map(str, args))} hung") from None
    assert session_members(proc.pid) == []
    return subprocess.CompletedProcess(args, proc.returncode, out, err)


@pytest.mark.parametrize("version", ["0.5.14", "0.5.19"])
def test_sigkilled_apply_leaves_no_process_and_the_next_run_does_not_hang(release, version):
    from patchkit.releases.manifest import load

    targets = sorted(load(version).files)
    clean = {rel: (pristine(version) / rel).read_bytes() for rel in targets}
    site = release(version)
    for delay in (0.2, 0.4, 0.6, 0.8, 1.0, 1.5, 2.5):
        proc = patchkit("apply", "--site-packages", site)
        time.sleep(delay)
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
        assert alone_after(proc.pid, 0.5) == [], f"processes outlived apply killed after {delay}s"
        proc.communicate(timeout=5)  # its pipes are closed: no other process holds them
        reverted = finish("revert", "--site-packages", site)
        assert reverted.returncode == 0, reverted.stderr
        assert not (site / ".patchkit").exists(), f"killed after {delay}s"
        assert {rel: (site / rel).read_bytes() for rel in targets} == clean
    applied = finish("apply", "--site-packages", site)
    assert applied.returncode == 0, applied.stderr
    assert finish("revert", "--site-packages", site).returncode == 0
    assert {rel: (site / rel).read_bytes() for rel in targets} == clean


def test_a_sigkilled_fetch_leaves_no_pip_behind(tmp_path):
    """The pip child of `--fetch` dies with patchkit (it outlived a SIGKILL by ~0.2 s)."""
    from testing.releases import HOME

    pristine("0.5.17")  # the wheel is cached: the child is `pip install --target DIR wheel`
    proc = patchkit("apply", "--target", "0.5.17", "--fetch", tmp_path / "fetched",
                    env={**os.environ, "PATCHKIT_HOME": str(HOME)})
    deadline = time.monotonic() + 60
    while not any(" pip install " in member for member in session_members(proc.pid)):
        assert proc.poll() is None and time.monotonic() < deadline, "pip never started"
        time.sleep(0.01)
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=30)
    assert alone_after(proc.pid, 0.05) == [], "pip outlived patchkit"
    proc.communicate(timeout=5)
