"""A CPU virtual environment that imports real SGLang modules, built once into the tests'
cache (keyed by tests/behaviour/requirements.txt), and a runner for probe scripts in it."""

from __future__ import annotations

import atexit
import hashlib
import json
import os
import shutil
import subprocess
import tempfile
import venv
from pathlib import Path

from testing.releases import CACHE, REPO, making

REQUIREMENTS = REPO / "tests" / "behaviour" / "requirements.txt"


def python() -> Path:
    key = hashlib.sha256(REQUIREMENTS.read_bytes()).hexdigest()[:12]
    root = CACHE / f"behaviour-venv-{key}"
    interpreter = root / "bin" / "python"
    if (root / ".complete").exists():
        return interpreter
    with making(root.name):
        if not (root / ".complete").exists():
            shutil.rmtree(root, ignore_errors=True)
            venv.EnvBuilder(with_pip=True).create(root)
            subprocess.run([str(interpreter), "-m", "pip", "install", "-q", "--disable-pip-version-check", "-r",
                            str(REQUIREMENTS)], check=True)
            (root / ".complete").touch()
    return interpreter


def run_probe(site: Path, script: Path, *args: str, timeout: int = 600) -> dict:
    """Run a probe script against the SGLang in `site`; it prints one JSON object last.

    The probe runs as `PYTHONPATH=site python script args` would, in a process of its own forked
    from a server that has SGLang's heavy dependencies (torch, transformers...) imported already
    (testing/probe_server.py); PATCHKIT_PROBE_FRESH=1 starts a fresh interpreter per probe instead.
    """
    env = {**os.environ, "PYTHONPATH": str(site), "CUDA_VISIBLE_DEVICES": "", "PYTHONWARNINGS": "ignore"}
    if os.environ.get("PATCHKIT_PROBE_FRESH") == "1":
        proc = subprocess.run([str(python()), str(script), *args], capture_output=True, text=True, env=env,
                              timeout=timeout)
        returncode, stdout, stderr = proc.returncode, proc.stdout, proc.stderr
    else:
        returncode, stdout, stderr = _server().run(site, script, args, env, timeout)
    assert returncode == 0, f"probe exit status {returncode}: {stderr[-4000:]}"
    return json.loads(stdout.strip().splitlines()[-1])


class _ProbeServer:
    """testing/probe_server.py, started on the first probe of this test session."""

    def __init__(self) -> None:
        self.folder = Path(tempfile.mkdtemp(prefix="patchkit-probes-"))
        env = {key: value for key, value in os.environ.items() if key != "PYTHONPATH"}
        env.update(CUDA_VISIBLE_DEVICES="", PYTHONWARNINGS="ignore")
        self.log = self.folder / "server.log"
        with open(self.log, "wb") as log:
            self.proc = subprocess.Popen([str(python()), str(REPO / "testing" / "probe_server.py")], env=env,
                                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=log, text=True,
                                         cwd=REPO)
        atexit.register(self.stop)

    def run(self, site: Path, script: Path, args: tuple[str, ...], env: dict[str, str],
            timeout: int) -> tuple[int, str, str]:
        out, err = self.folder / "stdout", self.folder / "stderr"
        request = {"script": str(script), "args": list(args), "site": str(site), "env": env,
                   "stdout": str(out), "stderr": str(err), "timeout": timeout}
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(json.dumps(request) + "\n")
        self.proc.stdin.flush()
        for line in self.proc.stdout:  # the server enforces the timeout (SIGALRM in the probe)
            if line.startswith("probe-exit "):
                status = json.loads(line.removeprefix("probe-exit "))["status"]
                return status, out.read_text(errors="replace"), err.read_text(errors="replace")
        raise AssertionError(f"the probe server ended: {self.log.read_text(errors='replace')[-4000:]}")

    def stop(self) -> None:
        if self.proc.poll() is None:
            assert self.proc.stdin is not None
            self.proc.stdin.close()
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        shutil.rmtree(self.folder, ignore_errors=True)


_SERVERS: list[_ProbeServer] = []


def _server() -> _ProbeServer:
    if not _SERVERS or _SERVERS[0].proc.poll() is not None:
        _SERVERS[:] = [_ProbeServer()]
    return _SERVERS[0]


# What a process loading the plugins may use (SGLang's modules imported on the CPU take under
# 1 GB): a plugin that reads without bound fails the test with a MemoryError, not the machine.
PLUGINS_DATA_LIMIT = 3 << 30


def _limit_data() -> None:
    import resource

    resource.setrlimit(resource.RLIMIT_DATA, (PLUGINS_DATA_LIMIT, PLUGINS_DATA_LIMIT))


def load_plugins_lines(python: Path | str, extra_env: dict[str, str] | None = None, timeout: float = 600) -> list[str]:
    """The `patchkit:` lines that SGLang's real `load_plugins()` makes the runtime report write,
    run by `python` (a venv, an editable install, or PYTHONPATH in `extra_env`) in a fresh process
    (its data capped at PLUGINS_DATA_LIMIT; a hang is a TimeoutExpired after `timeout` s)."""
    code = "from sglang.srt.plugins import load_plugins; load_plugins()"
    env = {key: value for key, value in os.environ.items() if key not in ("SGLANG_PLUGINS", "PYTHONPATH")}
    env.update(CUDA_VISIBLE_DEVICES="", PYTHONWARNINGS="ignore", **(extra_env or {}))
    proc = subprocess.run([str(python), "-c", code], capture_output=True, text=True, env=env, cwd="/",
                          timeout=timeout, stdin=subprocess.DEVNULL, preexec_fn=_limit_data)
    assert proc.returncode == 0, proc.stderr[-3000:]
    # SGLang catches what a plugin raises and logs it: the report said nothing in that process.
    assert "Failed to execute general plugin" not in proc.stderr, proc.stderr[-3000:]
    return [line for line in proc.stderr.splitlines() if line.startswith("patchkit:")]
