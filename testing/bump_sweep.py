"""The fault sweep (testing/sweep.py) over `bump`'s folder: the real CLI under strace, a fault
injected at the N-th call of a system call (SIGKILL, SIGINT, EIO, ENOSPC), each trial's fault
proved delivered (`sweep.delivery_problem`). A trial starts from a DIR an earlier bump wrote (a
file of the user's in it, a folder `outside` beside it that must not change) and checks:

- DIR reads as the start set or the end set (every file byte for byte one or the other, none
  torn, no mix), a half-written `.patchkit-bump-new/` aside; or it holds the journal (the switch
  past its commit point) and the run did not claim success;
- the exit code says what happened: 0 only with DIR exactly the end set; 130 for a Ctrl-C, 6 for
  an I/O error, each with DIR as above;
- the next run of the same command (uninterrupted) exits as the reference run did and leaves DIR
  exactly the end set: a kill is finished or undone, and no resolved tree is lost;
- no process outlives the command, nothing hangs.

Every command runs with DIR given as the relative `out` in its trial's folder, so that the bytes
bump writes (REPORT.md names the folder) are the same in every trial. Its system calls include
the `*at` forms that `patchkit/base/confined.py` makes (renameat, mkdirat, unlinkat).
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import textwrap
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from testing.releases import REPO, tree
from testing.sweep import (ERROR_SYSCALLS, KILLED, MUTATING, SYSCALLS, TRIAL_TIMEOUT, Counts, add_counts,
                           check_delivery, check_outside, count_trial, find_strace, plan_trials, run_faulted, sample,
                           scratch_root, sigint_not_ignored, strace_argv, traced_calls)

BUMP_SYSCALLS = (*SYSCALLS, "renameat", "renameat2", "mkdirat")
BUMP_MUTATING = (*MUTATING, "renameat", "renameat2", "mkdirat")
BUMP_ERROR_SYSCALLS = (*ERROR_SYSCALLS, "renameat", "renameat2")
STAGING, JOURNAL = ".patchkit-bump-new", ".patchkit-bump-journal.json"

_BOOT = textwrap.dedent("""
    import sys
    sys.argv = ["patchkit", *sys.argv[1:]]
    from patchkit.cli.app import main
    main()
""")


@dataclass(frozen=True)
class BumpScenario:
    name: str
    command: tuple[str, ...]  # patchkit arguments, run in the trial's folder (DIR is `out` there)
    prepare: Callable[[Callable[..., subprocess.CompletedProcess], Path], None]  # (run, trial folder) -> start DIR


@dataclass
class BumpSweep:
    scenario: BumpScenario
    home: Path  # a PATCHKIT_HOME with the wheels both releases need (copied into each trial)
    workdir: Path
    start: dict = field(init=False)
    end: dict = field(init=False)
    code: int = field(init=False)  # the uninterrupted run's exit code
    strace: str = field(init=False)
    calls_of: Counter = field(init=False, default_factory=Counter)
    in_dir: set = field(init=False, default_factory=set)  # (syscall, N) of the calls that change DIR

    def __post_init__(self) -> None:
        self.strace = find_strace()
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.workdir = Path(tempfile.mkdtemp(prefix="patchkit-bump-sweep-", dir=scratch_root(self.workdir)))
        seed = self.workdir / "seed"
        seed.mkdir()
        shutil.copytree(self.home, seed / "home", symlinks=True)
        self.scenario.prepare(lambda *args: self.run(seed, *args), seed)
        self.start = tree(seed / "out")
        shutil.copytree(seed, self.workdir / "end", symlinks=True)
        done = self.run(self.workdir / "end", *self.scenario.command)
        self.code = done.returncode
        assert self.code in (0, 1), done.stderr
        self.end = tree(self.workdir / "end" / "out")
        assert self.end != self.start, "the command changes nothing in DIR: its trials would prove nothing"
        again = self.run(self.workdir / "end", *self.scenario.command)  # the next run on the end set: the same
        assert again.returncode == self.code and tree(self.workdir / "end" / "out") == self.end, again.stderr
        shutil.rmtree(seed / "home")
        shutil.copytree(self.workdir / "end" / "home", seed / "home", symlinks=True)  # caches warm for every trial

    def close(self) -> None:
        shutil.rmtree(self.workdir, ignore_errors=True)

    def _env(self, folder: Path) -> dict:
        env = {**os.environ, "PATCHKIT_HOME": str(folder / "home"), "PYTHONPATH": str(REPO),
               "PYTHONPYCACHEPREFIX": str(self.workdir / "pycache")}
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        return env

    def run(self, folder: Path, *args: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-c", _BOOT, *args], cwd=folder, capture_output=True, text=True,
                              env=self._env(folder), timeout=TRIAL_TIMEOUT)

    def _fresh_trial(self, name: str) -> Path:
        folder = Path(tempfile.mkdtemp(prefix=f"{name}-", dir=self.workdir))
        shutil.copytree(self.workdir / "seed" / "out", folder / "out", symlinks=True)
        shutil.copytree(self.workdir / "seed" / "home", folder / "home", symlinks=True)
        (folder / "outside").mkdir()
        (folder / "outside" / "keep.txt").write_bytes(b"outside DIR\n")
        return folder

    def _argv(self, trace: Path | None = None, syscall: str | None = None, fault: str | None = None,
              n: int = 0) -> list[str]:
        argv = strace_argv(self.strace, trace, syscall, fault, n, BUMP_SYSCALLS, show_paths=True)
        return argv + ["--", sys.executable, "-c", _BOOT, *self.scenario.command]

    def completes(self, syscall: str, n: int) -> bool:
        return n > self.calls_of[syscall]

    def required(self, syscall: str, n: int) -> bool:
        """A trial every sample runs: past the last call (the run completes), or at a call that changes DIR."""
        return self.completes(syscall, n) or (syscall, n) in self.in_dir

    def trace(self) -> list[tuple[str, str]]:
        """[(syscall, its arguments, fds shown as their paths)] of one uninterrupted run, in order;
        the calls that change DIR noted (`in_dir`)."""
        folder = self._fresh_trial("trace")
        out = folder.with_name(folder.name + ".trace")
        proc = subprocess.run(self._argv(out), cwd=folder, capture_output=True, text=True, env=self._env(folder),
                              timeout=TRIAL_TIMEOUT)
        assert proc.returncode == self.code, proc.stderr
        assert tree(folder / "out") == self.end
        calls = traced_calls(out.read_text(), BUMP_SYSCALLS)
        index: Counter = Counter()
        dir_path = str(folder / "out")
        for name, args in calls:
            index[name] += 1
            changes = name in BUMP_MUTATING or (name == "openat" and "O_CREAT" in args) or name == "fsync"
            if changes and dir_path in args:
                self.in_dir.add((name, index[name]))
        shutil.rmtree(folder)
        out.unlink()
        self.calls_of = index
        return calls

    def run_trial(self, syscall: str, n: int, fault: str, total: Counts) -> None:
        counts = Counts()
        self._trial(syscall, n, fault, counts)
        add_counts(total, counts)

    def _trial(self, syscall: str, n: int, fault: str, counts: Counts) -> None:
        folder = self._fresh_trial(f"{syscall}{n}")
        log_path = folder.with_name(folder.name + ".strace")
        started = time.monotonic()
        problems: list[str] = []
        code, err = run_faulted(self._argv(log_path, syscall, fault, n), counts, problems, cwd=folder,
                                env=self._env(folder))
        problems += check_outside(folder, ["home", "out", "outside"], b"outside DIR\n", "DIR", counts)
        problems += check_delivery(syscall, fault, self.completes(syscall, n), code, log_path, counts)
        problems += self._check(code, err, tree(folder / "out"), counts)
        again = self.run(folder, *self.scenario.command)
        if again.returncode != self.code or tree(folder / "out") != self.end:
            counts.lost += 1
            problems.append(f"the next run: exit {again.returncode}, DIR "
                            f"{'the end set' if tree(folder / 'out') == self.end else 'not the end set'}: "
                            f"{again.stderr.strip()[-200:]}")
        count_trial(syscall, fault, counts)
        if problems:
            counts.failures.append(f"{syscall}:{fault}:when={n} (exit {code}, "
                                   f"{time.monotonic() - started:.1f}s): {'; '.join(problems)} | {err.strip()[-300:]}")
        shutil.rmtree(folder, ignore_errors=True)

    def _check(self, code: int | None, err: str, now: dict, counts: Counts) -> list[str]:
        """DIR reads as the start or the end set (or holds the journal), and the exit code says so."""
        journal = JOURNAL in now
        shown = {rel: v for rel, v in now.items() if rel != STAGING and not rel.startswith(STAGING + "/")}
        whole = shown in (self.start, self.end)
        if not journal and not whole:
            torn = sorted(rel for rel in set(shown) | set(self.start) | set(self.end)
                          if shown.get(rel) not in (self.start.get(rel), self.end.get(rel)))
            mixed = not torn
            counts.torn += 1
            return [f"DIR is {'a mix of the start and end sets' if mixed else 'torn'}: {', '.join(torn[:6])}"]
        if code == self.code:
            ok = now == self.end
        elif code in KILLED:
            ok = True  # DIR checked above; the next run finishes or undoes it
        elif code in (130, -signal.SIGINT) or (code == 1 and err.rstrip().endswith("KeyboardInterrupt")):
            ok = True
        elif code == 6:
            ok = True  # an I/O error: DIR as above, said on stderr
        else:
            ok = False
        if not ok:
            counts.untruthful += 1
            return [f"exit {code} does not match DIR (start={shown == self.start}, end={shown == self.end}, "
                    f"journal={journal})"]
        return []



def run_bump_sweep(sweep: BumpSweep, openat_stride: int, workers: int, full: bool, size: int) -> Counts:
    """Trace, plan and run the trials: a fixed-seed sample of about `size` of them (0: all) that
    holds every trial at a call that changes DIR and every completion trial."""
    with sigint_not_ignored():
        started = time.monotonic()
        calls = sweep.trace()
        planned = plan_trials(calls, openat_stride, full, "/out", syscalls=BUMP_SYSCALLS, mutating=BUMP_MUTATING,
                              error_syscalls=BUMP_ERROR_SYSCALLS)
        trials = sample(planned, size, f"bump:{sweep.scenario.name}", sweep.required)
        counts = Counts(calls=len(calls), planned=len(planned))
        with ThreadPoolExecutor(max_workers=workers) as pool:
            list(pool.map(lambda t: sweep.run_trial(*t, counts), trials))
        counts.kill_points_covered = counts.kill_points
        counts.seconds = time.monotonic() - started
        return counts
