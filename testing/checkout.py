"""SGLang checkouts for the diff tests: a git repository in the official layout
(`python/sglang/...`) made from a release tree's files, and a PATCHKIT_HOME whose wheel cache
holds the tests' cached wheels (so that commands reading a release's wheel download nothing)."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

from testing.releases import HOME, pristine

_GIT_ENV = {"GIT_AUTHOR_NAME": "test", "GIT_AUTHOR_EMAIL": "test@localhost", "GIT_COMMITTER_NAME": "test",
            "GIT_COMMITTER_EMAIL": "test@localhost", "GIT_CONFIG_NOSYSTEM": "1", "HOME": "/nonexistent"}


def git(repo: Path, *args: str | Path, check: bool = True) -> subprocess.CompletedProcess[str]:
    """git in `repo`, without the user's configuration."""
    return subprocess.run(["git", "-C", str(repo), *map(str, args)], capture_output=True, text=True, check=check,
                          env={**os.environ, **_GIT_ENV})


def checkout(site: Path, repo: Path) -> Path:
    """A git repository holding `site`'s sglang/ under python/ (as SGLang's repository does), committed."""
    shutil.copytree(site / "sglang", repo / "python" / "sglang", ignore=shutil.ignore_patterns("__pycache__"))
    git(repo, "init", "-q", "-b", "main")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "release")
    return repo


def package_bytes(root: Path) -> dict[str, bytes]:
    """Every file under root/sglang, by its path in the package (sglang/...)."""
    return {path.relative_to(root).as_posix(): path.read_bytes()
            for path in sorted((root / "sglang").rglob("*")) if path.is_file() and "__pycache__" not in path.parts}


def wheel_home(home: Path, versions: tuple[str, ...] | list[str]) -> Path:
    """A PATCHKIT_HOME whose wheels/ links the tests' cached wheels of `versions`."""
    (home / "wheels").mkdir(parents=True)
    for version in versions:
        pristine(version)  # makes sure the tests' cache has the wheel
        wheel = next((HOME / "wheels").glob(f"sglang-{version}-*.whl"))
        os.symlink(wheel, home / "wheels" / wheel.name)
    return home
