"""Container builders: which one really answers, building an image with it, pushing it.

docker, podman and buildah are driven through their command-line clients. A client on PATH is
not enough: docker needs its daemon, podman and buildah need a working sandbox (runtime, user
namespaces, storage). `choose` asks each one a cheap question that needs all of that.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from patchkit.base.errors import BuildError

BUILDERS = ("docker", "podman", "buildah")
AUTO = "auto"

# A question each builder can only answer when it can really build.
_PROBES = {
    "docker": ["version", "--format", "{{.Server.Version}}"],  # contacts the daemon
    "podman": ["info", "--format", "{{.Host.OCIRuntime.Name}}"],  # checks runtime and storage
    "buildah": ["info"],
}
PROBE_TIMEOUT = 30


@dataclass(frozen=True)
class Probe:
    name: str
    answers: bool
    detail: str  # why not, in a few words ("not installed", its last error line)


def probe(name: str) -> Probe:
    exe = shutil.which(name)
    if exe is None:
        return Probe(name, False, "not installed")
    try:
        proc = subprocess.run([exe, *_PROBES[name]], capture_output=True, text=True, timeout=PROBE_TIMEOUT,
                              stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        return Probe(name, False, f"no answer within {PROBE_TIMEOUT} s")
    except OSError as exc:
        return Probe(name, False, exc.strerror or str(exc))
    if proc.returncode != 0:
        lines = [line.strip() for line in (proc.stderr or proc.stdout).splitlines() if line.strip()]
        return Probe(name, False, lines[-1] if lines else f"exit {proc.returncode}")
    return Probe(name, True, proc.stdout.strip())


def choose(requested: str) -> tuple[str, list[Probe]]:
    """The builder to use and every probe made to find it.

    `auto` takes the first of docker, podman, buildah that answers; a named one must answer.
    """
    names = BUILDERS if requested == AUTO else (requested,)
    tried = []
    for name in names:
        result = probe(name)
        tried.append(result)
        if result.answers:
            return name, tried
    summary = "; ".join(f"{p.name}: {p.detail}" for p in tried)
    raise BuildError(f"no container builder answers (tried {summary}); install and start one, "
                     "or write the Dockerfile with `patchkit image dockerfile` and build it elsewhere")


def _stream(argv: list[str], echo: Callable[[str], None]) -> tuple[int, list[str]]:
    """Run argv, passing every output line to echo; returns the exit code and the lines."""
    lines: list[str] = []
    with subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                          text=True, errors="replace") as proc:
        assert proc.stdout is not None
        for line in proc.stdout:
            echo(line.rstrip("\n"))
            lines.append(line.rstrip("\n"))
    return proc.returncode, lines


def _failure(builder: str, what: str, code: int, lines: list[str]) -> BuildError:
    # patchkit's own message from inside the build (apply/verify), else the builder's last line.
    inner = [line.strip() for line in lines if line.strip().startswith("error:")]
    cause = inner[-1] if inner else next((line.strip() for line in reversed(lines) if line.strip()), "no output")
    return BuildError(f"{builder} {what} failed (exit {code}): {cause}")


def build(builder: str, context: Path, tag: str, echo: Callable[[str], None]) -> None:
    verb = ["bud"] if builder == "buildah" else ["build"]
    code, lines = _stream([builder, *verb, "-t", tag, "-f", str(context / "Dockerfile"), str(context)], echo)
    if code != 0:
        raise _failure(builder, f"build of {tag}", code, lines)


def push(builder: str, tag: str, ref: str, echo: Callable[[str], None]) -> str:
    """Push the built image `tag` to `ref`; returns its digest (`sha256:...`)."""
    if builder == "docker":
        for argv in (["docker", "tag", tag, ref], ["docker", "push", ref]):
            code, lines = _stream(argv, echo)
            if code != 0:
                raise _failure(builder, f"push to {ref}", code, lines)
        found = subprocess.run(["docker", "inspect", "--format", "{{json .RepoDigests}}", ref],
                               capture_output=True, text=True)
        digests = [d.split("@", 1)[1] for d in _json_list(found.stdout) if d.split("@", 1)[0] == _repository(ref)]
        if found.returncode != 0 or not digests:
            raise BuildError(f"docker pushed {ref} but reports no digest for it")
        return digests[0]
    with tempfile.TemporaryDirectory(prefix="patchkit-push-") as scratch:
        digest_file = Path(scratch, "digest")
        destination = ref if builder == "podman" else f"docker://{ref}"
        code, lines = _stream([builder, "push", "--digestfile", str(digest_file), tag, destination], echo)
        if code != 0:
            raise _failure(builder, f"push to {ref}", code, lines)
        return digest_file.read_text().strip()


def _repository(ref: str) -> str:
    """`host:5000/name:tag` -> `host:5000/name`."""
    head, _, last = ref.rpartition("/")
    return f"{head}/{last.split(':', 1)[0]}" if head else last.split(":", 1)[0]


def _json_list(text: str) -> list[str]:
    try:
        value = json.loads(text or "[]")
    except ValueError:
        return []
    return [str(v) for v in value] if isinstance(value, list) else []

