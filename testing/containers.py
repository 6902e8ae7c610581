"""A real container builder for the image tests: podman with runc, a private configuration and a
private store, base images made locally with mmdebstrap (no registry needed), a local registry.

The recipe (issue 12), checked on this kind of machine:
- podman's runtime is runc (crun fails here: "cgroups in hybrid mode not supported"); its default
  ulimits exceed what the machine allows, so `nofile` is the hard limit and `nproc` <= 32768;
- each test module gets its own store (graphroot/runroot) through CONTAINERS_STORAGE_CONF, removed
  afterwards; CONTAINERS_CONF and CONTAINERS_REGISTRIES_CONF point at private files too, so
  patchkit calls plain `podman` exactly as a user would;
- HTTPS from inside a build goes through a proxy with its own CA: the host's extra CA
  certificates are copied into the base by a mmdebstrap hook;
- the base is Debian bookworm: Python 3.11 (the SGLang wheels are cp311), externally managed
  (PEP 668) like many real images; `PIP_BREAK_SYSTEM_PACKAGES=1` lets the *test* install SGLang
  into the system Python, as image authors do.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import resource
import shutil
import socket
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from testing.releases import CACHE, making

TOOLS = ("podman", "runc", "mmdebstrap", "docker-registry")
SUITE = "bookworm"
PACKAGES = ("python3", "python3-venv", "python3-pip", "ca-certificates")
HOST_CAS = Path("/usr/local/share/ca-certificates")
RECIPE = "1"  # bump when the base recipe changes: the cache key includes it
BASE_CACHE = CACHE / "images"


def missing_tools() -> list[str]:
    return [tool for tool in TOOLS if shutil.which(tool) is None]


def require_builder() -> None:
    """Skip (with the reason) where this machine cannot build images; `.ci/run` installs the tools."""
    missing = missing_tools()
    if missing:
        pytest.skip(f"no {', '.join(missing)} here (`.ci/run` installs them with apt-get)")
    if not Path("/proc/self/ns/user").exists():
        pytest.skip("no user namespaces on this machine")


def mirror() -> str:
    """The Debian mirror apt uses here."""
    for source in sorted(Path("/etc/apt").glob("sources.list.d/*.sources")):
        for line in source.read_text().splitlines():
            if line.startswith("URIs:") and "security" not in line:
                return line.split()[1]
    return "http://deb.debian.org/debian"


def _host_cas() -> list[Path]:
    return sorted(HOST_CAS.glob("*.crt"))


def base_tar() -> Path:
    """The Debian base as a tar, made once and cached by its inputs (suite, packages, mirror, CAs)."""
    key = hashlib.sha256("\n".join([RECIPE, SUITE, mirror(), *PACKAGES, *(
        f"{ca.name}:{hashlib.sha256(ca.read_bytes()).hexdigest()}" for ca in _host_cas())]).encode()).hexdigest()[:16]
    tar = BASE_CACHE / f"debian-{SUITE}-{key}.tar"
    if tar.is_file():
        return tar
    BASE_CACHE.mkdir(parents=True, exist_ok=True)
    with making(tar.relative_to(CACHE).as_posix()):
        if not tar.is_file():
            _mmdebstrap(tar)
    return tar


def _mmdebstrap(tar: Path) -> None:
    partial = tar.with_suffix(f".{os.getpid()}.partial")
    hook = ('mkdir -p "$1/usr/local/share/ca-certificates" && '
            f'for f in {HOST_CAS}/*.crt; do [ -e "$f" ] && cp "$f" "$1/usr/local/share/ca-certificates/"; done; '
            'chroot "$1" update-ca-certificates >/dev/null')
    env = {**os.environ, "TMPDIR": "/dev/shm" if Path("/dev/shm").is_dir() else os.environ.get("TMPDIR", "/tmp")}
    proc = subprocess.run(["mmdebstrap", "--variant=minbase", "--format=tar", "--quiet",
                           f"--include={','.join(PACKAGES)}", f"--customize-hook={hook}",
                           SUITE, str(partial), mirror()], env=env, capture_output=True, text=True)
    if proc.returncode != 0:
        partial.unlink(missing_ok=True)
        pytest.fail(f"mmdebstrap failed:\n{proc.stderr[-3000:]}")
    os.replace(partial, tar)


@contextlib.contextmanager
def scratch_dir(min_free: int = 6 << 30):
    """A folder for podman stores: in /dev/shm when it has room, else the system temp folder."""
    shm = Path("/dev/shm")
    where = shm if shm.is_dir() and shutil.disk_usage(shm).free >= min_free else None
    path = Path(tempfile.mkdtemp(prefix="patchkit-images-", dir=where))
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@dataclass
class Podman:
    """podman with a private configuration and store; `env` is what patchkit runs under too."""

    root: Path
    env: dict[str, str]

    @classmethod
    def create(cls, root: Path, insecure_registries: tuple[str, ...] = (), volumes: tuple[str, ...] = ()) -> "Podman":
        """`volumes` (host:container:options) are mounted into every container, builds included."""
        root.mkdir(parents=True, exist_ok=True)
        nofile = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
        nofile = 20000 if nofile == resource.RLIM_INFINITY else min(nofile, 1048576)
        nproc = resource.getrlimit(resource.RLIMIT_NPROC)[1]
        nproc = 32768 if nproc == resource.RLIM_INFINITY else min(nproc, 32768)
        (root / "containers.conf").write_text(
            "[containers]\n"
            f'default_ulimits = ["nofile={nofile}:{nofile}", "nproc={nproc}:{nproc}"]\n'
            f"volumes = {json.dumps(list(volumes))}\n"
            "[engine]\n"
            'runtime = "runc"\ncgroup_manager = "cgroupfs"\nevents_logger = "file"\n'
        )
        (root / "storage.conf").write_text(
            f'[storage]\ndriver = "overlay"\ngraphroot = "{root / "graph"}"\nrunroot = "{root / "run"}"\n'
        )
        registries = "unqualified-search-registries = []\n" + "".join(
            f'[[registry]]\nlocation = "{location}"\ninsecure = true\n' for location in insecure_registries)
        (root / "registries.conf").write_text(registries)
        env = {**os.environ, "CONTAINERS_CONF": str(root / "containers.conf"),
               "CONTAINERS_STORAGE_CONF": str(root / "storage.conf"),
               "CONTAINERS_REGISTRIES_CONF": str(root / "registries.conf"), "TMPDIR": str(root / "tmp")}
        (root / "tmp").mkdir(exist_ok=True)
        return cls(root, env)

    def __call__(self, *args: str | Path, check: bool = True, timeout: int = 900) -> subprocess.CompletedProcess:
        proc = subprocess.run(["podman", *map(str, args)], env=self.env, capture_output=True, text=True,
                              timeout=timeout)
        if check and proc.returncode != 0:
            raise AssertionError(f"podman {' '.join(map(str, args))} exited {proc.returncode}:\n"
                                 f"{proc.stdout[-2000:]}\n{proc.stderr[-3000:]}")
        return proc

    def build(self, tag: str, context: Path) -> None:
        self("build", "-t", tag, context)

    def run(self, image: str, *command: str, check: bool = True) -> subprocess.CompletedProcess:
        return self("run", "--rm", image, *command, check=check)

    def labels(self, image: str) -> dict[str, str]:
        return json.loads(self("inspect", "--format", "{{json .Labels}}", image).stdout)

    def remove_store(self) -> None:
        subprocess.run(["podman", "system", "reset", "--force"], env=self.env, capture_output=True, timeout=300)
        shutil.rmtree(self.root, ignore_errors=True)


class Registry:
    """Debian's docker-registry (distribution 2.x) serving on 127.0.0.1, storage in a tmp folder."""

    def __init__(self, root: Path) -> None:
        self.port = free_port()
        self.address = f"127.0.0.1:{self.port}"
        root.mkdir(parents=True, exist_ok=True)
        config = root / "config.yml"
        config.write_text(f"version: 0.1\nlog:\n  level: error\nstorage:\n  filesystem:\n"
                          f"    rootdirectory: {root / 'data'}\nhttp:\n  addr: {self.address}\n")
        self.log = (root / "registry.log").open("w")
        self.proc = subprocess.Popen(["docker-registry", "serve", str(config)], stdout=self.log,
                                     stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
                return
            except OSError:
                time.sleep(0.2)
        self.stop()
        raise AssertionError(f"docker-registry did not listen on {self.address}")

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
        self.log.close()
