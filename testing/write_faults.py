"""A few faults at the writes of a command that makes a folder whole or not at all (an image's
build context, a rebase tree): not a sweep (CI's time), the calls picked from one traced run.

- `reference`: the command once under `strace -y`, and the N (per system call) of each write,
  fsync or rename that touches a watched folder;
- `picks`: the first and the last of those of each system call, EIO and ENOSPC in turn;
- `faulted`: the command with that error injected at that call, its delivery checked as the sweep
  checks it (`sweep.delivery_problem`: the call marked `(INJECTED)` in the trial's own log);
- `each_write_fault`: all of that for one command writing one folder: every picked fault delivered, the
  command failed with one line and the folder as it was, then the next run writes it whole;
- `full_tmpfs` and `read_only`: a real file system that is full, and a folder that cannot be
  written (a read-only bind mount as root, where a mode does not stop a write; else its mode).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import textwrap
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from testing.releases import REPO, tree
from testing.sweep import delivery_problem, strace_argv

WRITES = ("write", "fsync", "rename", "renameat", "renameat2")
TRACED = (*WRITES, "openat", "mkdir", "mkdirat", "unlink", "unlinkat", "rmdir")
ERRORS = ("EIO", "ENOSPC")
TIMEOUT = 120

BOOT = textwrap.dedent("""
    import sys
    sys.argv = ["patchkit", *sys.argv[1:]]
    from patchkit.cli.app import main
    main()
""")


def env(home: Path) -> dict[str, str]:
    found = {**os.environ, "PATCHKIT_HOME": str(home), "PYTHONPATH": str(REPO)}
    found.pop("PATCHKIT_PATCHES", None)
    return found


def command(args: tuple[str, ...]) -> list[str]:
    return [sys.executable, "-c", BOOT, *args]


def reference(strace: str, args: tuple[str, ...], cwd: Path, home: Path, watched: list[Path],
              log: Path) -> tuple[subprocess.CompletedProcess, dict[str, list[int]]]:
    """(the uninterrupted run, {system call: [N of each call that touches a watched folder]})."""
    argv = strace_argv(strace, log, None, None, 0, TRACED, show_paths=True)
    proc = subprocess.run([*argv, "--", *command(args)], cwd=cwd, env=env(home), capture_output=True, text=True,
                          timeout=TIMEOUT)
    index: Counter = Counter()
    found: dict[str, list[int]] = {}
    places = [str(p.resolve()) for p in watched]
    for line in log.read_text(errors="replace").splitlines():
        match = re.match(r"\d+\s+(\w+)\((.*)", line)
        if not match or match.group(1) not in TRACED:
            continue
        name, rest = match.groups()
        index[name] += 1
        if name in WRITES and any(f"{place}/" in rest or f"{place}>" in rest or f'{place}"' in rest
                                  for place in places):
            found.setdefault(name, []).append(index[name])
    log.unlink()
    return proc, found


def picks(found: dict[str, list[int]]) -> list[tuple[str, int, str]]:
    """(system call, N, error): the first and the last call of each system call, EIO and ENOSPC in turn."""
    chosen: list[tuple[str, int, str]] = []
    for name in WRITES:
        calls = found.get(name, [])
        for n in sorted({calls[0], calls[-1]} if calls else ()):
            chosen.append((name, n, ERRORS[len(chosen) % 2]))
    return chosen


def faulted(strace: str, args: tuple[str, ...], cwd: Path, home: Path, syscall: str, n: int, error: str,
            log: Path) -> tuple[subprocess.CompletedProcess, str | None]:
    """(the run with `error` injected at the `n`-th `syscall`, why that was not delivered or None)."""
    fault = f"error={error}"
    argv = strace_argv(strace, log, syscall, fault, n, ())
    proc = subprocess.run([*argv, "--", *command(args)], cwd=cwd, env=env(home), capture_output=True, text=True,
                          timeout=TIMEOUT)
    text = log.read_text(errors="replace") if log.exists() else ""
    log.unlink(missing_ok=True)
    return proc, delivery_problem(syscall, fault, False, proc.returncode, text)


def failed_as_it_was(proc: subprocess.CompletedProcess, folder: Path, before: dict, cause: str) -> None:
    """The command refused with exit 6 and one line naming the error, `folder` as it was (`before`)."""
    assert proc.returncode == 6, (proc.returncode, proc.stderr)
    [line] = proc.stderr.strip().splitlines()
    assert line.startswith("error: ") and f"({cause})" in line, line
    assert tree(folder) == before


def each_write_fault(strace: str, args: tuple[str, ...], cwd: Path, home: Path, folder: Path, kept: Path,
                     logs: Path) -> None:
    """`args` run once as it is (it must change `folder`), then with each of `picks`' faults injected,
    `folder` put back from `kept` (its starting state) before each: every fault delivered, each run
    `failed_as_it_was`; a last plain run writes `folder` as the first did."""
    before = tree(folder)
    done, found = reference(strace, args, cwd, home, [folder], logs / "reference.strace")
    assert done.returncode == 0, done.stderr
    after = tree(folder)
    assert after != before
    chosen = picks(found)
    assert {name for name, _, _ in chosen} >= {"write", "fsync", "rename"}, found
    for syscall, n, error in chosen:
        shutil.rmtree(folder)
        shutil.copytree(kept, folder, symlinks=True)
        proc, undelivered = faulted(strace, args, cwd, home, syscall, n, error, logs / "trial.strace")
        assert undelivered is None, (syscall, n, error, undelivered)
        failed_as_it_was(proc, folder, before, error)
    again = run(args, cwd, home)
    assert again.returncode == 0 and tree(folder) == after, again.stderr


def run(args: tuple[str, ...], cwd: Path, home: Path) -> subprocess.CompletedProcess:
    return subprocess.run(command(args), cwd=cwd, env=env(home), capture_output=True, text=True, timeout=TIMEOUT)


def cannot_mount() -> str | None:
    """Why a tmpfs or a bind mount cannot be made here (None: it can)."""
    if os.geteuid() != 0:
        return "not root: mounting a tmpfs needs root"
    if shutil.which("mount") is None or shutil.which("umount") is None:
        return "no mount/umount here"
    return None


@contextmanager
def full_tmpfs(where: Path, room: int, start: Callable[[Path], None]) -> Iterator[Path]:
    """A small tmpfs mounted at `where`, `start(where)` put on it, then filled until about `room`
    bytes are left."""
    where.mkdir(parents=True, exist_ok=True)
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m,mode=0755", "tmpfs", str(where)], check=True,
                   capture_output=True)
    try:
        start(where)
        stats = os.statvfs(where)
        filler = stats.f_bavail * stats.f_frsize - room
        with open(where / "filler", "wb") as handle:
            handle.write(b"\0" * max(0, filler))
        yield where
    finally:
        subprocess.run(["umount", "-l", str(where)], check=True, capture_output=True)


def free_bytes(where: Path) -> int:
    stats = os.statvfs(where)
    return stats.f_bavail * stats.f_frsize


@contextmanager
def read_only(folder: Path) -> Iterator[str]:
    """`folder` that cannot be written: a read-only bind mount of itself as root (a mode does not
    stop root), else its mode (read and enter only); yields which of the two."""
    if cannot_mount() is None:
        subprocess.run(["mount", "--bind", str(folder), str(folder)], check=True, capture_output=True)
        try:
            subprocess.run(["mount", "-o", "remount,bind,ro", str(folder)], check=True, capture_output=True)
            yield "a read-only bind mount"
        finally:
            subprocess.run(["umount", "-l", str(folder)], check=True, capture_output=True)
    else:
        mode = folder.stat().st_mode & 0o7777
        folder.chmod(0o555)
        try:
            yield "a read-only folder (mode 0555)"
        finally:
            folder.chmod(mode)
