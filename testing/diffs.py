"""Diffs made by real git from real release files (never committed third-party patch files),
and what real `git apply` does with them: the reference a diff patch is held to."""

from __future__ import annotations

import re
import subprocess
import tempfile
from pathlib import Path

_ENV = {"GIT_CONFIG_NOSYSTEM": "1", "HOME": "/nonexistent", "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t",
        "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@t", "PATH": "/usr/bin:/bin:/usr/local/bin"}


def git(repo: Path, *args: str, input: bytes | None = None, check: bool = True) -> subprocess.CompletedProcess:
    return subprocess.run(["git", "-C", str(repo), "-c", "core.autocrlf=false", *args], input=input,
                          capture_output=True, env=_ENV, check=check)


def write_files(repo: Path, files: dict[str, bytes | None]) -> None:
    for rel, data in files.items():
        path = repo / rel
        if data is None:
            path.unlink(missing_ok=True)
        else:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(data)


def repo_of(folder: Path, files: dict[str, bytes | None]) -> Path:
    """A git repository in `folder` with `files` committed."""
    folder.mkdir(parents=True, exist_ok=True)
    git(folder, "init", "-q")
    write_files(folder, files)
    git(folder, "add", "-A")
    git(folder, "commit", "-q", "--allow-empty", "-m", "base")
    return folder


def git_diff(before: dict[str, bytes | None], after: dict[str, bytes | None], prefix: str = "",
             header: str = "", format_patch: bool = False, context: int | None = None) -> bytes:
    """`git diff` (or `git format-patch` with `header` as its message) from `before` to `after`,
    paths under `prefix` (e.g. "python/" for an SGLang checkout), `context` lines of context."""
    with tempfile.TemporaryDirectory() as tmp:
        repo = repo_of(Path(tmp), {prefix + rel: data for rel, data in before.items()})
        write_files(repo, {prefix + rel: data for rel, data in after.items()})
        git(repo, "add", "-A")
        if format_patch:
            git(repo, "commit", "-q", "-m", header or "change")
            return git(repo, "format-patch", "-1", "--stdout", "HEAD").stdout
        lines = [] if context is None else [f"-U{context}"]
        return header.encode() + git(repo, "diff", "--cached", "--no-color", *lines).stdout


def git_apply(files: dict[str, bytes | None], diff: bytes, *args: str) -> tuple[int, dict[str, bytes | None], str]:
    """Real `git apply ARGS` of `diff` on a repository holding `files`: (exit code, the files
    afterwards, stderr)."""
    with tempfile.TemporaryDirectory() as tmp:
        repo = repo_of(Path(tmp), files)
        done = git(repo, "apply", *args, "-", input=diff, check=False)
        out = {rel: (repo / rel).read_bytes() if (repo / rel).exists() else None for rel in files}
        return done.returncode, out, done.stderr.decode("utf-8", "replace")



def git_3way_files(base: dict[str, bytes | None], files: dict[str, bytes | None], diff: bytes,
                   prefix: str = "") -> dict[str, bytes]:
    """{file: its bytes} of the files `git apply --3way` applies cleanly on the target files, in a
    repository made from the base's files (the pre-image blobs) with the target's committed on top.
    Each file on its own (`--include`): git applies a diff all or nothing, so one file missing from
    the release (an error) leaves every file as it was while it still says "Applied patch ...
    cleanly" for the others."""
    found = {}
    with tempfile.TemporaryDirectory() as tmp:
        repo = repo_of(Path(tmp), {prefix + rel: data for rel, data in base.items() if data is not None})
        write_files(repo, {prefix + rel: data for rel, data in files.items()})
        git(repo, "add", "-A")
        git(repo, "commit", "-q", "--allow-empty", "-m", "target")
        for rel in files:
            done = git(repo, "apply", "--3way", f"--include={prefix}{rel}", "-", input=diff, check=False)
            err = done.stderr.decode("utf-8", "replace")
            if done.returncode == 0 and re.search(r"^Applied patch to '.*' cleanly\.$", err, re.M):
                found[rel] = (repo / prefix / rel).read_bytes()
            git(repo, "reset", "-q", "--hard")
    return found


# A diff of offloader.py's tied-parameters code beside the built-in patch that fixes the same
# code (cpu-offload-tied-params, pending on 0.5.10-0.5.20, stacked first on the file by id).
OFFLOADER_BUILT_IN = "cpu-offload-tied-params"


def fails_only_beside_the_built_in(found: dict) -> bool:
    """`status --json`'s row of such a diff where it applies alone (`apply --only` it, or
    `--skip cpu-offload-tied-params`): `failed`, naming the built-in it cannot stack on."""
    return found["state"] == "failed" and f"does not apply on top of {OFFLOADER_BUILT_IN}," in found["detail"]


def many_sections(count: int, pid: str, prefix: str = "") -> bytes:
    """A diff of `count` file sections, each creating a two-line module `sglang/srt/section_NNNNN.py`
    (`new file` and `index` lines as git writes them), with `Patchkit-Id: pid`: loading and judging
    per section (bench/diff_sections.py, tests/unit/diffs/test_sections_linear.py)."""
    out = [f"Patchkit-Id: {pid}\n\n".encode()]
    for i in range(count):
        rel = f"{prefix}sglang/srt/section_{i:05d}.py"
        out.append(f"diff --git a/{rel} b/{rel}\nnew file mode 100644\nindex 0000000..1111111\n--- /dev/null\n"
                   f"+++ b/{rel}\n@@ -0,0 +1,2 @@\n+def f_{i}():\n+    return {i}\n".encode())
    return b"".join(out)
