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
- strace filters the traced calls in the kernel (--seccomp-bpf) only for a kind of fault it
  really delivers that way: strace 6.1 with --seccomp-bpf -f drops every `signal=` injection
  without a word, so each kind (signal, error) is probed at the start (`strace_options`) and
  --seccomp-bpf used only where the probe's child died (signals) or saw the error (errors);
- the child imports compiled bytecode (a pycache folder the sweep fills once, untraced, before
  the reference trace), as an installed patchkit does, instead of compiling every module again;
- the next runs after a trial (status, apply, revert) are checked once per distinct tree.

Every trial proves its fault was delivered (`delivery_problem`): strace logs the injected call
to the trial's own log; a SIGKILL trial must end killed by SIGKILL, a SIGINT trial must show
the injected SIGINT (si_code SI_KERNEL) and a non-zero exit, an EIO/ENOSPC trial its call
marked `(INJECTED)`, and a trial past the last call (N = calls + 1) must complete with exit 0
and nothing injected. A trial that fails this is a failure of the sweep, like a torn file.

`sample` picks a fixed-seed subset of a plan for CI: every (system call, fault) pair of the
plan at least once and every completion trial, the rest drawn at random.
"""

from __future__ import annotations

import contextlib
import io
import os
import pickle
import random
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

from patchkit.engine import decide, registry
from patchkit.cli import error_handler
from patchkit.commands.apply import apply as apply_command
from patchkit.commands.clean import clean as clean_command
from patchkit.commands.revert import revert as revert_command
from patchkit.store.target import find_in
from patchkit.base.util import sha256
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


KILLED = (-signal.SIGKILL, 128 + signal.SIGKILL)
# The probe's child: one rename, the call a kill or an error is injected at.
_PROBE = "import os, sys; a, b = sys.argv[1:]; open(a, 'w').close(); os.replace(a, b); print('survived')"


class StraceError(AssertionError):
    """strace here does not deliver the faults the sweep injects: no trial could prove anything."""


def _probe(strace: str, options: tuple[str, ...], fault: str, folder: str) -> bool:
    """Whether `strace OPTIONS -f` really delivers `fault` at a rename of a tiny Python child."""
    a, b = os.path.join(folder, "a"), os.path.join(folder, "b")
    proc = subprocess.run([strace, *options, "-f", "-qq", "-o", "/dev/null", "-e", "trace=rename",
                           "-e", f"inject=rename:{fault}:when=1", "--", sys.executable, "-c", _PROBE, a, b],
                          capture_output=True, text=True, timeout=60)
    if fault == "signal=SIGKILL":
        return proc.returncode in KILLED and "survived" not in proc.stdout
    return proc.returncode == 1 and "Input/output error" in proc.stderr and "survived" not in proc.stdout


@lru_cache(maxsize=None)
def strace_options(strace: str, kind: str) -> tuple[str, ...]:
    """The options under which `strace` delivers a fault of `kind` ("signal" or "error"):
    --seccomp-bpf when the probe shows it delivers (strace 6.1 drops signals under it), else
    none (every call stops in strace: slower, but the fault is real). StraceError if neither."""
    fault = "signal=SIGKILL" if kind == "signal" else "error=EIO"
    with tempfile.TemporaryDirectory(prefix="patchkit-strace-probe-") as folder:
        for options in (("--seccomp-bpf",), ()):
            if _probe(strace, options, fault, folder):
                return options
    raise StraceError(f"{strace} does not deliver an injected {fault} to its child (probed with and without "
                      "--seccomp-bpf): the fault sweep would inject nothing")


def fault_kind(fault: str) -> str:
    return "signal" if fault.startswith("signal=") else "error"


def delivery_problem(syscall: str, fault: str, completes: bool, code: int | None, log: str) -> str | None:
    """Why this trial's fault was not (or, for a completion trial, wrongly) delivered; None when it was.
    `log` is strace's log of the injected call (and of SIGINT, for a SIGINT trial)."""
    injected_error = "(INJECTED)" in log
    injected_sigint = "--- SIGINT {si_signo=SIGINT, si_code=SI_KERNEL" in log
    if completes:
        if code != 0 or injected_error or injected_sigint or code in KILLED:
            return f"the run past the last {syscall} did not complete untouched (exit {code})"
        return None
    if fault == "signal=SIGKILL":
        return None if code in KILLED else f"SIGKILL not delivered (exit {code})"
    if fault == "signal=SIGINT":
        if not injected_sigint:
            return f"SIGINT not delivered (strace logged no injected SIGINT; exit {code})"
        return None if code != 0 else "SIGINT delivered but the run exited 0 as if uninterrupted"
    error = fault.split("=", 1)[1]
    if not any("(INJECTED)" in line and f"= -1 {error} " in line for line in log.splitlines()):
        return f"{error} not delivered (strace logged no injected {syscall})"
    return None


def sample(trials: list[tuple[str, int, str]], size: int, seed: str,
           completes: Callable[[str, int], bool]) -> list[tuple[str, int, str]]:
    """A fixed-seed subset of `trials` of about `size` (0: all): every completion trial, one
    trial of each (system call, fault) pair the plan has (drawn at random among that pair's),
    then others at random; in the plan's order."""
    if size <= 0 or size >= len(trials):
        return list(trials)
    rng = random.Random(seed)
    chosen = {i for i, (name, n, _) in enumerate(trials) if completes(name, n)}
    pairs: dict[tuple[str, str], list[int]] = {}
    for i, (name, n, fault) in enumerate(trials):
        if i not in chosen:
            pairs.setdefault((name, fault), []).append(i)
    chosen |= {rng.choice(indexes) for _, indexes in sorted(pairs.items())}
    rest = sorted(set(range(len(trials))) - chosen)
    chosen |= set(rng.sample(rest, max(0, min(len(rest), size - len(chosen)))))
    return [trials[i] for i in sorted(chosen)]


_BOOT = textwrap.dedent("""
    import os, pickle, sys
    from patchkit.engine import view as view_mod
    from patchkit.base.util import sha256
    with open(os.environ["PATCHKIT_SWEEP_RENDERS"], "rb") as handle:
        cache = pickle.load(handle)
    real = view_mod.render_file
    def render(view, rel, ids):
        base = view.pristine(rel)
        key = (rel, None if base is None else sha256(base), tuple(ids))
        return cache[key] if key in cache else real(view, rel, ids)
    view_mod.render_file = render
    sys.argv = ["patchkit", *sys.argv[1:]]
    from patchkit.cli.app import main
    main()
""")


@dataclass(frozen=True)
class Scenario:
    name: str
    command: tuple[str, ...]  # patchkit arguments; the tree is appended as --site-packages
    prepare: Callable[[Path], None]  # fresh minimal tree -> start tree (in-process)
    force: bool = False  # the next apply needs --force (the start tree has an outside edit)
    patches: tuple[str, ...] = ()  # patch files or folders loaded with --patches (a diff patch)
    extra: tuple[str, ...] = ()  # release files the tree holds besides the built-in patches' targets
    only: tuple[str, ...] = ()  # the patches the reference (and each next) apply applies; () all


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
    undelivered: int = 0  # a fault strace did not deliver (or a completion trial that was faulted)
    sigkill_delivered: int = 0
    sigint_delivered: int = 0
    eio_delivered: int = 0
    enospc_delivered: int = 0
    completed: int = 0  # trials past the last call, completed with the injection armed
    planned: int = 0  # trials in the whole plan (before sampling)
    failures: list[str] = field(default_factory=list)
    seconds: float = 0.0
    by_syscall: Counter = field(default_factory=Counter)


# --- in-process commands (the real command functions, without click) ---------------------------

def command(fn: Callable[[], int], sets: registry.PatchSets | None = None) -> tuple[int, str]:
    """(exit code, stderr) of a command function run in this process (with `sets`: those patch
    sets, as `--patches` gives them; else the built-in set and $PATCHKIT_PATCHES)."""
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        code = error_handler.run(fn, sets=sets or registry.PatchSets())
    return code, err.getvalue()


_COUNT_LOCK = threading.Lock()
_CMD_LOCK = threading.RLock()  # redirect_stdout is process-wide: one in-process command at a time


def do_apply(site: Path, force: bool = False, only: tuple[str, ...] = (),
             sets: registry.PatchSets | None = None) -> tuple[int, str]:
    with _CMD_LOCK:
        return command(lambda: apply_command(str(site), None, None, only, (), False, force, False, lock_timeout=5.0),
                       sets)


def do_revert(site: Path, only: tuple[str, ...] = (), sets: registry.PatchSets | None = None) -> tuple[int, str]:
    with _CMD_LOCK:
        return command(lambda: revert_command(str(site), None, only, False, False, lock_timeout=5.0), sets)


def do_clean(site: Path, sets: registry.PatchSets | None = None) -> tuple[int, str]:
    with _CMD_LOCK:
        return command(lambda: clean_command(str(site), None, None, False, lock_timeout=5.0), sets)


def states(site: Path, sets: registry.PatchSets | None = None) -> dict[str, str]:
    with _CMD_LOCK, registry.running(sets or registry.PatchSets()):
        statuses, _ = decide.status(find_in(site))
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


# --- one trial's steps, shared by this sweep and bump's (testing/bump_sweep.py) -------------------

def find_strace() -> str:
    """The strace on PATH, each kind of fault probed now (StraceError, before any trial, if it delivers nothing)."""
    found = shutil.which("strace")
    assert found, "strace is not installed"
    for kind in ("signal", "error"):
        strace_options(found, kind)
    return found


def strace_argv(strace: str, log: Path | None, syscall: str | None, fault: str | None, n: int,
                traced: tuple[str, ...], show_paths: bool = False) -> list[str]:
    """strace up to its `--`: with `fault`, injected at the `n`-th `syscall`, and that call (and a
    SIGINT) logged to `log`, under the options that deliver that kind of fault; without, every call
    of `traced` logged (`show_paths`: each fd shown as its path, strace -y)."""
    kind = fault_kind(fault) if fault else "signal"
    argv = [strace, *strace_options(strace, kind), "-f", "-qq", "-o", str(log) if log else "/dev/null"]
    if fault:
        argv += ["-e", f"trace={syscall}", "-e", f"signal={'SIGINT' if fault == 'signal=SIGINT' else 'none'}",
                 "-e", f"inject={syscall}:{fault}:when={n}"]
    else:
        argv += [*(["-y"] if show_paths else []), "-e", f"trace={','.join(traced)}"]
    return argv


def traced_calls(log: str, syscalls: tuple[str, ...]) -> list[tuple[str, str]]:
    """[(syscall, its arguments)] of a reference trace's log, in order, those of `syscalls` only."""
    calls = []
    for line in log.splitlines():
        match = re.match(r"\d+\s+(\w+)\((.*)", line)
        if match and match.group(1) in syscalls:
            calls.append((match.group(1), match.group(2)))
    return calls


def run_faulted(argv: list[str], counts: Counts, problems: list[str], **popen) -> tuple[int | None, str]:
    """(exit code, stderr) of a trial's command, run in a session of its own: killed as a hang after
    TRIAL_TIMEOUT; any of its processes still there 2 s after it ended is an escape (then killed)."""
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True,
                            **popen)
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
    return proc.returncode, err


def check_outside(folder: Path, names: list[str], keep: bytes, what: str, counts: Counts) -> list[str]:
    """The trial's folder holds exactly `names` and `outside/keep.txt` still reads `keep`."""
    if sorted(p.name for p in folder.iterdir()) != names or (folder / "outside" / "keep.txt").read_bytes() != keep or \
            [p.name for p in (folder / "outside").iterdir()] != ["keep.txt"]:
        counts.escapes += 1
        return [f"something outside {what} changed"]
    return []


def check_delivery(syscall: str, fault: str, completes: bool, code: int | None, log_path: Path,
                   counts: Counts) -> list[str]:
    """The trial's fault was delivered (`delivery_problem`, on its strace log, removed after), counted by kind."""
    log = log_path.read_text(errors="replace") if log_path.exists() else ""
    log_path.unlink(missing_ok=True)
    undelivered = delivery_problem(syscall, fault, completes, code, log)
    if undelivered:
        counts.undelivered += 1
        return [undelivered]
    if completes:
        counts.completed += 1
    else:
        kind = fault.split("=", 1)[1].lower()
        setattr(counts, f"{kind}_delivered", getattr(counts, f"{kind}_delivered") + 1)
    return []


def count_trial(syscall: str, fault: str, counts: Counts) -> None:
    counts.trials += 1
    counts.by_syscall[syscall] += 1
    if "SIGKILL" in fault:
        counts.kill_points += 1
    elif "SIGINT" in fault:
        counts.interrupts += 1
    else:
        counts.errors += 1


def add_counts(total: Counts, counts: Counts) -> None:
    """One trial's counts added to the run's (trials run in threads)."""
    with _COUNT_LOCK:
        for name in ("trials", "kill_points", "interrupts", "errors", "torn", "lost", "escapes", "hangs", "untruthful",
                     "undelivered", "sigkill_delivered", "sigint_delivered", "eio_delivered", "enospc_delivered",
                     "completed"):
            setattr(total, name, getattr(total, name) + getattr(counts, name))
        total.failures += counts.failures
        total.by_syscall.update(counts.by_syscall)



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
    strace: str = field(init=False)  # the strace on PATH when the sweep was set up
    calls_of: Counter = field(init=False, default_factory=Counter)  # syscall -> calls in one uninterrupted run
    sets: registry.PatchSets = field(init=False)  # the scenario's patch sets, for its in-process runs

    def __post_init__(self) -> None:
        self.strace = find_strace()
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.workdir = Path(tempfile.mkdtemp(prefix="patchkit-sweep-", dir=scratch_root(self.workdir)))
        self.sets = registry.PatchSets(self.scenario.patches)  # in-process runs; the child gets --patches
        seed = self.workdir / "seed"
        copy_minimal(self.version, seed / "fresh", self.scenario.extra)
        self.pristine = tree(seed / "fresh")
        shutil.copytree(seed / "fresh", seed / "applied", symlinks=True)
        assert do_apply(seed / "applied", only=self.scenario.only, sets=self.sets)[0] == 0
        self.applied = tree(seed / "applied")
        shutil.copytree(seed / "fresh", seed / "start", symlinks=True)
        self.scenario.prepare(seed / "start")
        self.start = tree(seed / "start")
        self.start_states = states(seed / "start", self.sets)
        if self.scenario.force:
            self.edited = next(v[2] for rel, v in self.start.items() if v != self.applied.get(rel)
                               and not rel.startswith(".patchkit"))
        shutil.copytree(seed / "start", seed / "end", symlinks=True)
        code, err = command_in_process(self.scenario.command, seed / "end", self.sets)
        assert code == 0, err
        self.end = tree(seed / "end")
        assert self.end != self.start, "the command changes nothing here: its trials would prove nothing"
        self.end_states = states(seed / "end", self.sets)
        self.renders = self.workdir / "renders.pickle"
        self.renders.write_bytes(pickle.dumps(dict(_RENDERED)))
        self._warm_bytecode()

    def close(self) -> None:
        shutil.rmtree(self.workdir, ignore_errors=True)

    def _warm_bytecode(self) -> None:
        """Run the command once, untraced, so that every module it imports is compiled into the
        sweep's pycache folder before the reference trace (trials then only read bytecode)."""
        folder, site = self._fresh_trial("warm")
        argv = self._argv(site)
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

    def _argv(self, site: Path, trace: Path | None = None, syscall: str | None = None, fault: str | None = None,
              n: int = 0) -> list[str]:
        """strace over the command; with `fault`, injected at the `n`-th `syscall`, and that call
        (and a SIGINT) logged to `trace`, under the options that deliver that kind of fault."""
        argv = strace_argv(self.strace, trace, syscall, fault, n, SYSCALLS)
        loads = [arg for path in self.scenario.patches for arg in ("--patches", path)]
        return argv + ["--", sys.executable, "-c", _BOOT, *loads, *self.scenario.command, "--site-packages", str(site)]

    def completes(self, syscall: str, n: int) -> bool:
        """Whether the `n`-th `syscall` comes after the last one of an uninterrupted run."""
        return n > self.calls_of[syscall]

    def _env(self) -> dict:
        env = {**os.environ, "PATCHKIT_SWEEP_RENDERS": str(self.renders), "PYTHONPATH": str(REPO),
               "PYTHONPYCACHEPREFIX": str(self.workdir / "pycache")}
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        return env

    def trace(self) -> list[tuple[str, str]]:
        """[(syscall, its arguments)] of one uninterrupted run, in order."""
        folder, site = self._fresh_trial("trace")
        out = folder / "trace.txt"
        proc = subprocess.run(self._argv(site, out), capture_output=True, text=True, env=self._env(),
                              timeout=TRIAL_TIMEOUT)
        assert proc.returncode == 0, proc.stderr
        assert _plain(tree(site)) == _plain(self.end)
        calls = traced_calls(out.read_text(), SYSCALLS)
        shutil.rmtree(folder)
        self.calls_of = Counter(name for name, _ in calls)
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
        return plan_trials(calls, openat_stride, full, "/sglang-tree")

    def run_trial(self, syscall: str, n: int, fault: str, total: Counts) -> None:
        counts = Counts()
        self._trial(syscall, n, fault, counts)
        add_counts(total, counts)

    def _trial(self, syscall: str, n: int, fault: str, counts: Counts) -> None:
        folder, site = self._fresh_trial(f"{syscall}{n}")
        inject = f"{syscall}:{fault}:when={n}"
        # The log lies beside the trial's folder: the folder itself must hold only the tree and `outside`.
        log_path = folder.with_name(folder.name + ".strace")
        started = time.monotonic()
        problems: list[str] = []
        code, err = run_faulted(self._argv(site, log_path, syscall, fault, n), counts, problems, env=self._env())
        problems += check_outside(folder, ["outside", "sglang-tree"], b"outside the tree\n", "the tree", counts)
        problems += check_delivery(syscall, fault, self.completes(syscall, n), code, log_path, counts)
        now = tree(site)
        problems += self._check_whole(now, counts)
        problems += self._check_outcome(code, err, now, counts)
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
        count_trial(syscall, fault, counts)
        if problems:
            counts.failures.append(f"{inject} (exit {code}, {time.monotonic() - started:.1f}s): "
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
        if self.scenario.command[0] == "clean" and code == 130:
            # clean changes only `.patchkit/`: its Ctrl-C says how much of it is gone (a Ctrl-C
            # while the lock is released may leave the emptied folder and its lock file).
            if "before anything was removed" in err or "before any file was changed" in err:
                ok = _plain(now) == _plain(self.start)
            elif "was being removed; its record is removed last" in err:
                ok = ".patchkit/state.json" in now or journal
            elif "interrupted after removing" in err:
                ok = _sglang(now) == _sglang(self.end) and set(now) - set(self.end) <= {".patchkit", ".patchkit/lock"}
            else:
                ok = False
        elif code == 0:
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
            got = states(site, self.sets)
            if _sglang(now) == _sglang(self.start) and ".patchkit/journal.json" not in now and got != self.start_states:
                problems.append(f"status {got} on the start tree")
            if _sglang(now) == _sglang(self.end) and ".patchkit/journal.json" not in now and got != self.end_states:
                problems.append(f"status {got} on the end tree")
        except Exception as exc:  # noqa: BLE001 - any failure of status is a finding
            problems.append(f"status failed: {exc!r}")
        code, err = do_apply(site, force=self.scenario.force, only=self.scenario.only, sets=self.sets)
        if code != 0 or _plain(tree(site)) != _plain(self.applied):
            problems.append(f"next apply: exit {code} {err.strip()[-200:]}")
        code, err = do_revert(site, sets=self.sets)
        if code != 0 or tree(site) != self.pristine:
            counts.lost += 1
            problems.append(f"next revert did not restore the pristine tree: exit {code} {err.strip()[-200:]}")
        return problems


def plan_trials(calls: list[tuple[str, str]], openat_stride: int, full: bool, inside: str,
                syscalls: tuple[str, ...] = SYSCALLS, mutating: tuple[str, ...] = MUTATING,
                error_syscalls: tuple[str, ...] = ERROR_SYSCALLS) -> list[tuple[str, int, str]]:
    """`Sweep.plan`'s trials for a trace; `inside`: what an openat's path holds where it reads the
    command's own folder (every 4th of those is faulted, the rest every `openat_stride`-th); the
    system calls swept, those that change the disk and those an error is injected at."""
    index: Counter = Counter()
    trials: list[tuple[str, int, str]] = [("openat", 1, "signal=SIGKILL")]  # the start tree
    for name, args in calls:
        index[name] += 1
        n = index[name]
        changes = name in mutating or (name == "openat" and "O_CREAT" in args)
        if changes or name != "openat" or n % (4 if inside in args else openat_stride) == 0:
            faults = ["signal=SIGINT", *(f"error={err}" for err in (ERRORS if name in error_syscalls else ()))]
            trials += [(name, n, fault) for fault in (faults if full else [faults[n % len(faults)]])]
        if changes and (name, n) != ("openat", 1):
            trials.append((name, n, "signal=SIGKILL"))
    for name in syscalls:  # N = calls + 1: the command completes with the injection armed
        trials.append((name, index[name] + 1, "signal=SIGKILL"))
    return trials


def command_in_process(args: tuple[str, ...], site: Path, sets: registry.PatchSets | None = None) -> tuple[int, str]:
    verb, rest = args[0], args[1:]
    only = tuple(rest[i + 1] for i, a in enumerate(rest) if a == "--only")
    if verb == "apply":
        return do_apply(site, force="--force" in rest, only=only, sets=sets)
    if verb == "clean":
        return do_clean(site, sets)
    return do_revert(site, only=only, sets=sets)


@contextlib.contextmanager
def sigint_not_ignored():
    """Children start with SIGINT's default action, as under a terminal. A process started in the
    background of a shell (`nohup ... &`) ignores SIGINT, an ignored signal stays ignored across
    exec, and a Python started so never raises KeyboardInterrupt: every injected SIGINT was lost
    (seen: 19 of 19 SIGINT trials exited 0). A signal with a handler is reset to its default at exec."""
    ignored = signal.getsignal(signal.SIGINT) is signal.SIG_IGN
    if ignored:
        assert threading.current_thread() is threading.main_thread(), "the sweep runs from the main thread"
        signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        yield
    finally:
        if ignored:
            signal.signal(signal.SIGINT, signal.SIG_IGN)


def run_sweep(sweep: Sweep, openat_stride: int, workers: int, full: bool = True, size: int = 0) -> Counts:
    """Trace, plan and run the trials (a fixed-seed `sample` of about `size` of them; 0: all)."""
    with sigint_not_ignored():
        return _run_sweep(sweep, openat_stride, workers, full, size)


def _run_sweep(sweep: Sweep, openat_stride: int, workers: int, full: bool, size: int) -> Counts:
    started = time.monotonic()
    calls = sweep.trace()
    planned = sweep.plan(calls, openat_stride, full)
    trials = sample(planned, size, f"{sweep.version}:{sweep.scenario.name}", sweep.completes)
    whole = len(trials) == len(planned)  # a sample covers only the kill points it runs
    counts = Counts(kill_points_covered=len(calls) + len(SYSCALLS) if whole else 0, calls=len(calls),
                    planned=len(planned))
    with ThreadPoolExecutor(max_workers=workers) as pool:
        list(pool.map(lambda t: sweep.run_trial(*t, counts), trials))
    if not whole:
        counts.kill_points_covered = counts.kill_points
    counts.seconds = time.monotonic() - started
    return counts



def verdict(counts: Counts) -> list[str]:
    """What makes a run of the sweep fail: any failed trial (torn, lost, escaped, hung, untruthful,
    or a fault not delivered), or a run in which no fault of a kind was delivered at all."""
    problems = list(counts.failures)
    if counts.trials == 0 or counts.kill_points == 0:
        problems.append("no trial ran")
    for what, delivered in (("SIGKILL", counts.sigkill_delivered), ("SIGINT", counts.sigint_delivered),
                            ("EIO or ENOSPC", counts.eio_delivered + counts.enospc_delivered)):
        if not delivered:
            problems.append(f"no {what} was delivered in {counts.trials} trial(s)")
    return problems
