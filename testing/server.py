"""A real SGLang server on this machine's CPU, for tests/server and bench/server.py.

- `python_for(version, folder)`: a throwaway venv holding the pristine release (copied from the
  tests' cache, as `pip install --no-deps` of its wheel lays it out) whose other packages come
  from the cached server venv (`layer()`): the behaviour venv's packages (torch, transformers,
  fastapi, uvicorn, zmq, prometheus_client...; tests/behaviour/requirements.txt) and the few more
  the server needs (tests/server/requirements.txt), both through a `.pth` line, so nothing of the
  6 GB behaviour venv is installed twice.
- `make_model(python, dest)`: the tiny random-weight Llama of testing/tiny_model.py.
- `start(...)`: `python -m sglang.launch_server` on 127.0.0.1 on a free port, with the CPU engine,
  the torch-native attention backend, no CUDA graphs, no warm-up, a small KV pool and metrics;
  returns once `/health` answers. The only stand-in is testing/sgl_kernel_standin (first on
  PYTHONPATH): the index's compiled `sgl_kernel` is a CUDA build.
- `Server.stop()`: stops every process of the server by PID and raises if one is left. A process
  of the server is one working in the server's own folder or writing to its log (what each
  inherits from the launcher), so children that outlive the launcher are found too; not by a
  marker in the environment, which SGLang's process titles overwrite (setproctitle reuses that
  memory: /proc/PID/environ of the scheduler then no longer holds it). Then it removes what the
  server leaves behind: the load-snapshot file SGLang (0.5.13 on) writes into /dev/shm per start
  (`sglang_loads_<instance>_<hash>.shm`, 16 KB, named by a random instance id and never removed),
  found as a file its processes hold open, so another server's stays; and its temporary folder
  (TMPDIR, where SGLang names its zmq sockets: `_launch`).
"""

from __future__ import annotations

import atexit
import contextlib
import hashlib
import http.client
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import venv
from dataclasses import dataclass, field
from pathlib import Path

from testing import behaviour
from testing.containers import free_port
from testing.releases import CACHE, REPO, copy_release, making

REQUIREMENTS = REPO / "tests" / "server" / "requirements.txt"
STANDIN = REPO / "testing" / "sgl_kernel_standin"
KERNEL_LOG = "PATCHKIT_SGL_KERNEL_LOG"  # read by the stand-in (testing/sgl_kernel_standin)
SHM_LEFT = "/dev/shm/sglang_loads_"  # SGLang's load snapshot: shm_path_for() in sglang/srt/managers/load_snapshot.py
START_TIMEOUT = 900.0  # seconds to healthy: 20-45 s on a quiet 2-core machine, minutes under load
# Set by whoever starts the server, never inherited from the tests' own environment.
_NOT_INHERITED = ("PYTHONPATH", "SGLANG_PLUGINS", "SGLANG_PATCHKIT_DISABLE", "PATCHKIT_API_KEY", "PYTHONHOME")


class Unavailable(Exception):
    """The server's Python cannot be made here; the message says why (the tier skips with it)."""


def site_packages(root: Path) -> Path:
    """A venv's site-packages (venvs here are made by this interpreter, as the behaviour venv is)."""
    return root / "lib" / f"python{sys.version_info.major}.{sys.version_info.minor}" / "site-packages"


def layer() -> Path:
    """The cached server venv (built once, keyed by both requirements files): its site-packages
    holds the server's extra packages and a `.pth` line to the behaviour venv's site-packages."""
    try:
        base = behaviour.python().parents[1]
    except (subprocess.CalledProcessError, OSError) as exc:
        raise Unavailable(f"the behaviour venv cannot be built here: {exc}") from None
    key = hashlib.sha256(behaviour.REQUIREMENTS.read_bytes() + REQUIREMENTS.read_bytes()).hexdigest()[:12]
    root = CACHE / f"server-venv-{key}"
    if (root / ".complete").exists():
        return root
    with making(root.name):
        if not (root / ".complete").exists():
            _build(root, base)
    return root


def _build(root: Path, base: Path) -> None:
    shutil.rmtree(root, ignore_errors=True)
    started = time.monotonic()
    venv.EnvBuilder(with_pip=True, symlinks=True).create(root)
    (site_packages(root) / "behaviour-venv.pth").write_text(f"{site_packages(base)}\n")
    python = root / "bin" / "python"
    # Every package pinned in the file, dependencies too: nothing resolved, nothing upgraded.
    install = subprocess.run([str(python), "-m", "pip", "install", "-q", "--no-deps", "--disable-pip-version-check",
                              "-r", str(REQUIREMENTS)], capture_output=True, text=True)
    if install.returncode != 0:
        shutil.rmtree(root, ignore_errors=True)
        said = (install.stderr.strip().splitlines() or ["no message"])[-1]
        raise Unavailable(f"pip cannot install tests/server/requirements.txt here: {said}")
    check = subprocess.run([str(python), "-c", "import uvloop, jsonschema, soundfile, multipart, torch, fastapi"],
                           capture_output=True, text=True)
    if check.returncode != 0:
        shutil.rmtree(root, ignore_errors=True)
        raise Unavailable(f"the server venv does not import its packages: {check.stderr.strip()[-500:]}")
    size = sum(path.stat().st_size for path in root.rglob("*") if path.is_file() and not path.is_symlink())
    (root / ".complete").write_text(json.dumps({"seconds": round(time.monotonic() - started, 1), "bytes": size}))


def python_for(version: str, folder: Path) -> Path:
    """A new venv in `folder` with the pristine `version` installed in its own site-packages
    (hard links, except sglang/srt/*.py: copies a test may edit in place) and the cached layer's
    packages after it on sys.path. Returns its python."""
    packages = site_packages(layer())
    venv.EnvBuilder(with_pip=False, symlinks=True).create(folder)
    site = site_packages(folder)
    (site / "server-venv.pth").write_text(f"{packages}\n" + (packages / "behaviour-venv.pth").read_text())
    copy_release(version, site, into_existing=True)
    return folder / "bin" / "python"


def make_model(python: Path, dest: Path) -> Path:
    subprocess.run([str(python), str(REPO / "testing" / "tiny_model.py"), str(dest)], check=True,
                   capture_output=True, env={**os.environ, "PYTHONWARNINGS": "ignore"}, timeout=600)
    return dest


@dataclass
class Answer:
    status: int
    body: bytes

    def json(self) -> dict:
        return json.loads(self.body)


@dataclass
class Server:
    version: str
    proc: subprocess.Popen
    port: int
    folder: Path
    log_path: Path
    kernel_log: Path
    api_key: str | None = None
    argv: tuple[str, ...] = ()  # the launcher's command line: the python, `-m sglang.launch_server`, its arguments
    healthy_after: float = 0.0  # seconds from launch to the first /health answer
    notes: list[str] = field(default_factory=list)
    left_files: set[Path] = field(default_factory=set)  # what it writes outside its folder (its TMPDIR too), removed by stop()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def patchkit_lines(self) -> list[str]:
        return [line for line in self.log().splitlines() if line.startswith("patchkit: ")]

    def processes(self) -> dict[int, str]:
        """{pid: command line} of every live process of this server (zombies are gone)."""
        found = {}
        for entry in Path("/proc").iterdir():
            if entry.name.isdigit() and self._ours(entry):
                try:
                    found[int(entry.name)] = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode().strip()
                except OSError:  # gone meanwhile
                    continue
        return found

    def _ours(self, entry: Path) -> bool:
        for link, ours in (("cwd", self.folder), ("fd/1", self.log_path), ("fd/2", self.log_path)):
            try:
                if os.readlink(entry / link) == str(ours):
                    return True
            except OSError:  # gone, a zombie, or not ours to read
                continue
        return False

    def files_left(self) -> set[Path]:
        """The files outside its folder that the server's processes hold open (as a descriptor or
        a mapping) and that it would leave behind: its /dev/shm load snapshot."""
        found = set()
        for pid in self.processes():
            held = []
            try:
                for fd in os.listdir(f"/proc/{pid}/fd"):
                    with contextlib.suppress(OSError):
                        held.append(os.readlink(f"/proc/{pid}/fd/{fd}"))
                held += [line.split(None, 5)[5] for line in Path(f"/proc/{pid}/maps").read_text().splitlines()
                         if len(line.split(None, 5)) == 6]
            except OSError:  # gone meanwhile
                continue
            found |= {Path(path) for path in held if path.startswith(SHM_LEFT) and not path.endswith(" (deleted)")}
        return found

    def remove_left_files(self) -> None:
        """Remove what `files_left` found and its temporary folder (once no process of it is left)."""
        for path in sorted(self.left_files):
            if path.is_dir() and not path.is_symlink():
                shutil.rmtree(path, ignore_errors=True)
            else:
                path.unlink(missing_ok=True)

    def kernel_events(self) -> tuple[set[int], list[str]]:
        """(pids that imported the stand-in sgl_kernel, the calls made to it)."""
        lines = self.kernel_log.read_text().splitlines() if self.kernel_log.exists() else []
        imports = {int(line.split()[1]) for line in lines if line.startswith("import ")}
        return imports, [line for line in lines if not line.startswith("import ")]

    def request(self, method: str, path: str, body: object = None, key: str | None = "server's",
                timeout: float = 120.0) -> Answer:
        """One request; `key`: the server's --api-key (default), another, or None for none."""
        headers = {"Content-Type": "application/json"}
        key = self.api_key if key == "server's" else key
        if key:
            headers["Authorization"] = f"Bearer {key}"
        connection = http.client.HTTPConnection("127.0.0.1", self.port, timeout=timeout)
        try:
            connection.request(method, path, body=None if body is None else json.dumps(body), headers=headers)
            response = connection.getresponse()
            return Answer(response.status, response.read())
        finally:
            connection.close()

    def stop(self, grace: float = 30.0) -> list[str]:
        """SIGTERM to the launcher; what is still running after `grace` seconds gets SIGTERM by
        PID, then SIGKILL. Returns notes on what needed more than the launcher's SIGTERM; raises
        AssertionError when a process of the server is left even then."""
        self.left_files |= self.files_left()
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        left = self._wait_gone(grace)
        for sig in (signal.SIGTERM, signal.SIGKILL):
            if not left:
                break
            self.notes.append(f"{sig.name} by PID to {sorted(left)}: still running after the launcher's SIGTERM")
            for pid in left:
                try:
                    os.kill(pid, sig)
                except ProcessLookupError:
                    pass
            left = self._wait_gone(10.0)
        assert not left, f"processes of the SGLang {self.version} server are still running after SIGKILL: {left}"
        self.remove_left_files()
        return self.notes

    def _wait_gone(self, seconds: float) -> dict[int, str]:
        deadline = time.monotonic() + seconds
        while True:
            left = self.processes()
            if self.proc.poll() is None:  # the launcher is gone once reaped: while it exits, its cwd and files are
                left.setdefault(self.proc.pid, "the launcher, exiting")  # already released (it would be left a zombie)
            if not left or time.monotonic() > deadline:
                return left
            time.sleep(0.2)


_STARTED: list[Server] = []


def started() -> list[Server]:
    """Every server started in this process (stopped ones too)."""
    return list(_STARTED)


@atexit.register
def _stop_left_running() -> None:
    """A session ended without a fixture's teardown (an interrupt): no server outlives it."""
    for server in _STARTED:
        server.left_files |= server.files_left()
        for pid in server.processes():
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        server.remove_left_files()


def start(python: Path, model: Path, version: str, folder: Path, *, env: dict[str, str] | None = None,
          args: tuple[str, ...] = (), pythonpath: tuple[Path, ...] = (), api_key: str | None = None) -> Server:
    """Launch `python -m sglang.launch_server` and wait until it is healthy. `pythonpath`: folders
    put on PYTHONPATH after the stand-in (a patched overlay, the read-only overlay way). The
    launcher's stdout and stderr, which every process of the server inherits, go to
    `folder`/server.log."""
    folder.mkdir(parents=True, exist_ok=True)
    folder = folder.resolve()  # as /proc/PID/cwd says it
    log_path, kernel_log = folder / "server.log", folder / "sgl_kernel.log"
    path = [str(STANDIN), *map(str, pythonpath)]
    child_env = {key: value for key, value in os.environ.items() if key not in _NOT_INHERITED}
    child_env.update({"SGLANG_USE_CPU_ENGINE": "1", "CUDA_VISIBLE_DEVICES": "", "HF_HUB_OFFLINE": "1",
                      "PYTHONPATH": os.pathsep.join(path), KERNEL_LOG: str(kernel_log)})
    child_env.update(env or {})
    port = free_port()
    argv = [str(python), "-m", "sglang.launch_server", "--model-path", str(model), "--host", "127.0.0.1",
            "--port", str(port), "--device", "cpu", "--attention-backend", "torch_native", "--disable-cuda-graph",
            "--skip-server-warmup", "--max-total-tokens", "2048", "--enable-metrics", *args]
    if api_key:
        argv += ["--api-key", api_key]
    started = time.monotonic()
    server = _launch(argv, version, folder, child_env, port, api_key)
    try:
        _wait_healthy(server, started)
    except BaseException:
        server.stop()
        raise
    server.healthy_after = time.monotonic() - started
    server.left_files |= server.files_left()  # while every process of it runs
    return server


def _launch(argv: list[str], version: str, folder: Path, env: dict[str, str], port: int = 0,
           api_key: str | None = None) -> Server:
    """Start the server's launcher `argv` working in `folder`, its output into `folder`/server.log,
    with a temporary folder of its own (TMPDIR, removed by `stop`): SGLang names its zmq sockets
    there (NamedTemporaryFile(delete=False), five per start, never removed). That folder is a
    short path in the system's temporary folder: a socket's path has at most 107 bytes."""
    temp = Path(tempfile.mkdtemp(prefix="sglang-server-"))
    left = {temp}
    try:
        with open(folder / "server.log", "wb") as log:
            proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                    env={**env, "TMPDIR": str(temp)}, cwd=folder, start_new_session=True)
    except BaseException:
        shutil.rmtree(temp, ignore_errors=True)
        raise
    server = Server(version, proc, port, folder, folder / "server.log", folder / "sgl_kernel.log", api_key,
                    argv=tuple(argv), left_files=left)
    _STARTED.append(server)
    return server


def _wait_healthy(server: Server, started: float) -> None:
    while time.monotonic() - started < START_TIMEOUT:
        if server.proc.poll() is not None:
            raise AssertionError(f"the SGLang {server.version} server exited ({server.proc.returncode}) before it "
                                 f"was healthy:\n{server.log()[-6000:]}")
        try:
            if server.request("GET", "/health", timeout=5).status == 200:
                return
        except OSError:
            pass
        time.sleep(0.5)
    raise AssertionError(f"the SGLang {server.version} server was not healthy after {START_TIMEOUT:g} s:\n"
                         f"{server.log()[-6000:]}")
