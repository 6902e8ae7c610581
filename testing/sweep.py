"""Fault injection at the system calls of a patchkit command, with strace.

For one scenario (a start tree and a command) on one release: trace the command once, then
run it again and again under `strace -e inject=SYSCALL:...:when=N`, for N = 1 .. (calls + 1)
(the last N proves the command completes), with SIGKILL, SIGINT and, for write/fsync/rename,
EIO and ENOSPC. After each trial: no torn file, the outcome matches what the command said, no
process left, no change outside the tree, the next `status` is truthful, the next `apply`
reaches exactly the clean-apply tree and the next `revert` exactly the pristine one.

SIGKILL at a call that changes nothing on disk (an `openat` without O_CREAT, an `fsync`)
leaves the same tree as SIGKILL at the next call that does (or as the completed run); such kill
points are counted as covered, not run again. Each child process runs the real CLI; it takes the
rendered bytes of each file from a cache the parent filled with the real renderer (the
transforms are tested elsewhere; this sweeps the transaction), so no trial waits on libcst.

What makes a trial cheap without changing what it proves (bench/sweep_speed.py measures it):
- the trees live on a tmpfs (/dev/shm, or $PATCHKIT_FAULT_TMP) when there is one: the command
  makes the same calls (strace injects at the call, before the file system sees it), but an
  fsync or rmdir costs microseconds instead of a disk flush;
- strace filters the traced calls in the kernel (--seccomp-bpf, when this strace has it): the
  child stops only at the swept calls, which are the same calls counted the same way;
- the child imports compiled bytecode (a pycache folder the sweep fills once, untraced, before
  the reference trace), as an installed patchkit does, instead of compiling every module again;
- the next runs after a trial (status, apply, revert) are checked once per distinct tree.
"""

from __future__ import annotations

import contextlib
import io
import os
import pickle
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import textwrap
import threading
import time
from collections import Counter
from functools import lru_cache
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from patchkit import engine, error_handler
from patchkit.commands.apply import apply as apply_command
from patchkit.commands.revert import revert as revert_command
from patchkit.target import find_in
from patchkit.util import sha256
from testing.faults import _RENDERED
from testing.faults import cache_renders as install_render_cache  # the one render cache of the fault tests
from testing.releases import REPO, copy_minimal, tree

SYSCALLS = ("write", "fsync", "rename", "unlink", "unlinkat", "rmdir", "mkdir", "openat", "clone", "clone3")
ERRORS = ("EIO", "ENOSPC")
ERROR_SYSCALLS = ("write", "fsync", "rename")
SIGNALS = ("SIGKILL", "SIGINT")
MUTATING = ("write", "rename", "unlink", "unlinkat", "rmdir", "mkdir")
TRIAL_TIMEOUT = 120.0
SCRATCH_MIN_FREE = 1 << 30  # a tmpfs with less free space than this is not used


def scratch_root(fallback: Path) -> Path:
    """Where the sweep's trees live: $PATCHKIT_FAULT_TMP, else /dev/shm when it is a writable
    tmpfs with room, else `fallback` (the test's temp folder)."""
    chosen = os.environ.get("PATCHKIT_FAULT_TMP")
    if chosen:
        return Path(chosen)
    shm = Path("/dev/shm")
    try:
        stats = os.statvfs(shm)
        if os.access(shm, os.W_OK) and stats.f_bavail * stats.f_frsize >= SCRATCH_MIN_FREE:
            return shm
    except OSError:
        pass
    return fallback


@lru_cache(maxsize=1)
def strace_options() -> tuple[str, ...]:
    """--seccomp-bpf when this strace and kernel support it (the traced calls are the same)."""
    probe = subprocess.run(["strace", "--seccomp-bpf", "-f", "-qq", "-o", "/dev/null", "-e", "trace=write",
                            "--", sys.executable, "-c", "pass"], capture_output=True)
    return ("--seccomp-bpf",) if probe.returncode == 0 and not probe.stderr.strip() else ()

_BOOT = textwrap.dedent("""
    import os, pickle, sys
    from patchkit import engine
    from patchkit.util import sha256
    with open(os.environ["PATCHKIT_SWEEP_RENDERS"], "rb") as handle:
        cache = pickle.load(handle)
    real = engine._render
    def render(view, rel, ids):
        base = view.pristine(rel)
        key = (rel, None if base is None else sha256(base), tuple(ids))
        return cache[key] if key in cache else real(view, rel, ids)
    engine._render = render
    sys.argv = ["patchkit", *sys.argv[1:]]
    from patchkit.cli import main
    main()
""")


@dataclass(frozen=True)
class Scenario:
    name: str
    command: tuple[str, ...]  # patchkit arguments; the tree is appended as --site-packages
    prepare: Callable[[Path], None]  # fresh minimal tree -> start tree (in-process)
    force: bool = False  # the next apply needs --force (the start tree has an outside edit)


@dataclass
class Counts:
    trials: int = 0
    kill_points: int = 0  # distinct SIGKILL positions run
    kill_points_covered: int = 0  # SIGKILL positions, run or covered by an equivalent one
    calls: int = 0  # calls of the swept syscalls in one uninterrupted run
    interrupts: int = 0
    errors: int = 0
    torn: int = 0
    lost: int = 0
    escapes: int = 0
    hangs: int = 0
    untruthful: int = 0
    failures: list[str] = field(default_factory=list)
    seconds: float = 0.0
    by_syscall: Counter = field(default_factory=Counter)


# --- in-process commands (the real command functions, without click) ---------------------------

def command(fn: Callable[[], int]) -> tuple[int, str]:
    """(exit code, stderr) of a command function run in this process."""
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        code = error_handler.run(fn)
    return code, err.getvalue()


_COUNT_LOCK = threading.Lock()
_CMD_LOCK = threading.RLock()  # redirect_stdout is process-wide: one in-process command at a time


def do_apply(site: Path, force: bool = False, only: tuple[str, ...] = ()) -> tuple[int, str]:
    with _CMD_LOCK:
        return command(lambda: apply_command(str(site), None, None, only, (), False, force, False, lock_timeout=5.0))


def do_revert(site: Path, only: tuple[str, ...] = ()) -> tuple[int, str]:
    with _CMD_LOCK:
        return command(lambda: revert_command(str(site), None, only, False, False, lock_timeout=5.0))


def states(site: Path) -> dict[str, str]:
    with _CMD_LOCK:
        statuses, _ = engine.status(find_in(site))
    return {s.id: s.state for s in statuses}


# --- the sweep ---------------------------------------------------------------------------------


def _sglang(t: dict) -> dict:
    return {rel: v for rel, v in t.items() if not rel.startswith(".patchkit")}


def _plain(t: dict) -> dict:
    """A tree without the copies --force kept (their folder names carry a time stamp)."""
    return {rel: v for rel, v in t.items() if not rel.startswith(".patchkit/overwritten")}


def session_members(sid: int) -> list[str]:
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2:].split()
        if fields[0] != "Z" and int(fields[3]) == sid:
            found.append(entry.name)
    return found


@dataclass
class Sweep:
    version: str
    scenario: Scenario
    workdir: Path
    renders: Path = field(init=False)
    start: dict = field(init=False)
    end: dict = field(init=False)
    applied: dict = field(init=False)
    pristine: dict = field(init=False)
    start_states: dict = field(init=False)
    end_states: dict = field(init=False)
    edited: bytes | None = field(init=False, default=None)
    verified: dict = field(init=False, default_factory=dict)  # tree fingerprint -> problems of the next runs

    def __post_init__(self) -> None:
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.workdir = Path(tempfile.mkdtemp(prefix="patchkit-sweep-", dir=scratch_root(self.workdir)))
        seed = self.workdir / "seed"
        copy_minimal(self.version, seed / "fresh")
        self.pristine = tree(seed / "fresh")
        shutil.copytree(seed / "fresh", seed / "applied", symlinks=True)
        assert do_apply(seed / "applied")[0] == 0
        self.applied = tree(seed / "applied")
        shutil.copytree(seed / "fresh", seed / "start", symlinks=True)
        self.scenario.prepare(seed / "start")
        self.start = tree(seed / "start")
        self.start_states = states(seed / "start")
        if self.scenario.force:
            self.edited = next(v[2] for rel, v in self.start.items() if v != self.applied.get(rel)
                               and not rel.startswith(".patchkit"))
        shutil.copytree(seed / "start", seed / "end", symlinks=True)
        code, err = command_in_process(self.scenario.command, seed / "end")
        assert code == 0, err
        self.end = tree(seed / "end")
        self.end_states = states(seed / "end")
        self.renders = self.workdir / "renders.pickle"
        self.renders.write_bytes(pickle.dumps(dict(_RENDERED)))
        self._warm_bytecode()

    def close(self) -> None:
        shutil.rmtree(self.workdir, ignore_errors=True)

    def _warm_bytecode(self) -> None:
        """Run the command once, untraced, so that every module it imports is compiled into the
        sweep's pycache folder before the reference trace (trials then only read bytecode)."""
        folder, site = self._fresh_trial("warm")
        argv = self._argv(site, None)
        proc = subprocess.run(argv[argv.index("--") + 1:], capture_output=True, text=True, env=self._env(),
                              timeout=TRIAL_TIMEOUT)
        assert proc.returncode == 0, proc.stderr
        shutil.rmtree(folder)

    # A trial's tree lives in its own folder beside an `outside` folder that must not change.
    def _fresh_trial(self, name: str) -> tuple[Path, Path]:
        folder = Path(tempfile.mkdtemp(prefix=f"{name}-", dir=self.workdir))
        site = folder / "sglang-tree"
        shutil.copytree(self.workdir / "seed" / "start", site, symlinks=True)
        (folder / "outside").mkdir()
        (folder / "outside" / "keep.txt").write_bytes(b"outside the tree\n")
        return folder, site

    def _argv(self, site: Path, inject: str | None, trace: Path | None = None) -> list[str]:
        argv = ["strace", *strace_options(), "-f", "-qq", "-o", str(trace) if trace else "/dev/null", "-e", f"trace={','.join(SYSCALLS)}"]
        if inject:
            argv += ["-e", f"inject={inject}"]
        return argv + ["--", sys.executable, "-c", _BOOT, *self.scenario.command, "--site-packages", str(site)]

    def _env(self) -> dict:
        env = {**os.environ, "PATCHKIT_SWEEP_RENDERS": str(self.renders), "PYTHONPATH": str(REPO),
               "PYTHONPYCACHEPREFIX": str(self.workdir / "pycache")}
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        return env

    def trace(self) -> list[tuple[str, str]]:
        """[(syscall, its arguments)] of one uninterrupted run, in order."""
        folder, site = self._fresh_trial("trace")
        out = folder / "trace.txt"
        proc = subprocess.run(self._argv(site, None, out), capture_output=True, text=True, env=self._env(),
                              timeout=TRIAL_TIMEOUT)
        assert proc.returncode == 0, proc.stderr
        assert _plain(tree(site)) == _plain(self.end)
        calls = []
        for line in out.read_text().splitlines():
            match = re.match(r"\d+\s+(\w+)\((.*)", line)
            if match and match.group(1) in SYSCALLS:
                calls.append((match.group(1), match.group(2)))
        shutil.rmtree(folder)
        return calls

    def plan(self, calls: list[tuple[str, str]], openat_stride: int, full: bool = True) -> list[tuple[str, int, str]]:
        """The trials: (syscall, N, fault). SIGKILL at every call that changes the disk (a kill
        at a call that changes nothing leaves the tree of a kill at the next call that does, or
        of the run that completes: N = calls + 1); SIGINT at
        every call, and EIO and ENOSPC at every write, fsync and rename; except that an openat
        that creates nothing is sampled: in the tree every 4th (reading files while planning),
        outside it (Python's own imports) every `openat_stride`-th. Not `full`: SIGKILL stays at
        every such point, but each N gets one of SIGINT, EIO, ENOSPC in turn (SIGINT alone where
        no error is injected), so every N is still faulted once besides the kill."""
        index: Counter = Counter()
        trials: list[tuple[str, int, str]] = [("openat", 1, "signal=SIGKILL")]  # the start tree
        for name, args in calls:
            index[name] += 1
            n = index[name]
            changes = name in MUTATING or (name == "openat" and "O_CREAT" in args)
            if changes or name != "openat" or n % (4 if "/sglang-tree" in args else openat_stride) == 0:
                faults = ["signal=SIGINT", *(f"error={err}" for err in (ERRORS if name in ERROR_SYSCALLS else ()))]
                trials += [(name, n, fault) for fault in (faults if full else [faults[n % len(faults)]])]
            if changes and (name, n) != ("openat", 1):
                trials.append((name, n, "signal=SIGKILL"))
        for name in SYSCALLS:  # N = calls + 1: the command completes with the injection armed
            trials.append((name, index[name] + 1, "signal=SIGKILL"))
        return trials

    def run_trial(self, syscall: str, n: int, fault: str, total: Counts) -> None:
        counts = Counts()
        self._trial(syscall, n, fault, counts)
        with _COUNT_LOCK:
            for name in ("trials", "kill_points", "interrupts", "errors", "torn", "lost", "escapes", "hangs", "untruthful"):
                setattr(total, name, getattr(total, name) + getattr(counts, name))
            total.failures += counts.failures
            total.by_syscall.update(counts.by_syscall)

    def _trial(self, syscall: str, n: int, fault: str, counts: Counts) -> None:
        folder, site = self._fresh_trial(f"{syscall}{n}")
        inject = f"{syscall}:{fault}:when={n}"
        started = time.monotonic()
        proc = subprocess.Popen(self._argv(site, inject), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                env=self._env(), start_new_session=True)
        problems: list[str] = []
        try:
            _, err = proc.communicate(timeout=TRIAL_TIMEOUT)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            _, err = proc.communicate()
            counts.hangs += 1
            problems.append("hang")
        deadline = time.monotonic() + 2
        while session_members(proc.pid) and time.monotonic() < deadline:
            time.sleep(0.02)
        if session_members(proc.pid):
            counts.escapes += 1
            problems.append("a process outlived the command")
            with contextlib.suppress(OSError):
                os.killpg(proc.pid, signal.SIGKILL)
        if sorted(p.name for p in folder.iterdir()) != ["outside", "sglang-tree"] or \
                (folder / "outside" / "keep.txt").read_bytes() != b"outside the tree\n" or \
                [p.name for p in (folder / "outside").iterdir()] != ["keep.txt"]:
            counts.escapes += 1
            problems.append("something outside the tree changed")
        now = tree(site)
        problems += self._check_whole(now, counts)
        problems += self._check_outcome(proc.returncode, err, now, counts)
        fingerprint = sha256(pickle.dumps(sorted(now.items())))
        with _COUNT_LOCK:
            known = self.verified.get(fingerprint)
        if known is None:  # the next runs on a tree already checked would do exactly the same
            known = self._check_next_runs(site, counts)
            with _COUNT_LOCK:
                self.verified[fingerprint] = known
        elif any("pristine" in problem for problem in known):
            counts.lost += 1
        problems += known
        counts.trials += 1
        counts.by_syscall[syscall] += 1
        if "SIGKILL" in fault:
            counts.kill_points += 1
        elif "SIGINT" in fault:
            counts.interrupts += 1
        else:
            counts.errors += 1
        if problems:
            counts.failures.append(f"{inject} (exit {proc.returncode}, {time.monotonic() - started:.1f}s): "
                                   f"{'; '.join(problems)} | {err.strip()[-300:]}")
        shutil.rmtree(folder, ignore_errors=True)

    def _check_whole(self, now: dict, counts: Counts) -> list[str]:
        torn = []
        for rel in set(_sglang(self.start)) | set(_sglang(self.end)) | set(_sglang(now)):
            if now.get(rel) not in (self.start.get(rel), self.end.get(rel)):
                torn.append(rel)
        if torn:
            counts.torn += 1
            return [f"torn or unexpected: {', '.join(sorted(torn))}"]
        if self.edited is not None and not any(v[2] == self.edited for v in now.values() if v[0] == "file"):
            counts.lost += 1
            return ["the outside edit was overwritten and no copy kept"]
        return []

    def _check_outcome(self, code: int | None, err: str, now: dict, counts: Counts) -> list[str]:
        is_start, is_end = _sglang(now) == _sglang(self.start), _sglang(now) == _sglang(self.end)
        journal = ".patchkit/journal.json" in now
        ok = True
        if code == 0:
            ok = _plain(now) == _plain(self.end)
        elif code in (-signal.SIGKILL, 128 + signal.SIGKILL):
            ok = True  # whole files were checked above; the next runs must sort it out
        elif code == -signal.SIGINT or (code == 1 and err.rstrip().endswith("KeyboardInterrupt")):
            ok = is_start and not journal  # Ctrl-C while the interpreter itself starts, before patchkit runs
        elif code in (130, -signal.SIGINT):
            if "before any file was changed" in err:
                ok = is_start and not journal
            elif "finished" in err or "had been finished first" in err:
                ok = is_end and not journal
            else:
                ok = "finishes it" in err and journal
        elif code == 6:
            ok = ("finishes it" in err and journal) or ((is_start or is_end) and not journal)
        else:
            ok = False
        if not ok:
            counts.untruthful += 1
            return [f"exit {code} does not match the tree (start={is_start}, end={is_end}, journal={journal})"]
        return []

    def _check_next_runs(self, site: Path, counts: Counts) -> list[str]:
        problems = []
        try:
            now = tree(site)
            got = states(site)
            if _sglang(now) == _sglang(self.start) and ".patchkit/journal.json" not in now and got != self.start_states:
                problems.append(f"status {got} on the start tree")
            if _sglang(now) == _sglang(self.end) and ".patchkit/journal.json" not in now and got != self.end_states:
                problems.append(f"status {got} on the end tree")
        except Exception as exc:  # noqa: BLE001 - any failure of status is a finding
            problems.append(f"status failed: {exc!r}")
        code, err = do_apply(site, force=self.scenario.force)
        if code != 0 or _plain(tree(site)) != _plain(self.applied):
            problems.append(f"next apply: exit {code} {err.strip()[-200:]}")
        code, err = do_revert(site)
        if code != 0 or tree(site) != self.pristine:
            counts.lost += 1
            problems.append(f"next revert did not restore the pristine tree: exit {code} {err.strip()[-200:]}")
        return problems


def command_in_process(args: tuple[str, ...], site: Path) -> tuple[int, str]:
    verb, rest = args[0], args[1:]
    only = tuple(rest[i + 1] for i, a in enumerate(rest) if a == "--only")
    if verb == "apply":
        return do_apply(site, force="--force" in rest, only=only)
    return do_revert(site, only=only)


def run_sweep(sweep: Sweep, openat_stride: int, workers: int, full: bool = True) -> Counts:
    started = time.monotonic()
    calls = sweep.trace()
    trials = sweep.plan(calls, openat_stride, full)
    counts = Counts(kill_points_covered=len(calls) + len(SYSCALLS), calls=len(calls))
    with ThreadPoolExecutor(max_workers=workers) as pool:
        list(pool.map(lambda t: sweep.run_trial(*t, counts), trials))
    counts.seconds = time.monotonic() - started
    return counts

