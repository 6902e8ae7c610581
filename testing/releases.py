"""Real SGLang releases for the tests: downloaded from the package index once, into a cache
folder the tests own (`.cache/tests`, or $PATCHKIT_TEST_CACHE), then copied per test."""

from __future__ import annotations

import contextlib
import fcntl
import os
import shutil
from pathlib import Path
from typing import Iterator

from patchkit.releases import pristine as releases
from patchkit.base.constants import ENV_HOME

REPO = Path(__file__).resolve().parents[1]
CACHE = Path(os.environ.get("PATCHKIT_TEST_CACHE") or REPO / ".cache" / "tests")
HOME = CACHE / "home"  # a PATCHKIT_HOME whose wheels/ and releases/ persist between runs

MODEL_CONFIG = "sglang/srt/configs/model_config.py"

# The fast tier's test now running (set by tests/conftest.py's offline guard), None in the slow tier: a
# release read there passes on a machine whose cache holds it and fails on CI's empty one.
FAST_TIER_TEST: str | None = None


@contextlib.contextmanager
def making(entry: str) -> Iterator[None]:
    """Held while `CACHE / entry` (a venv, a base image...) is made: the test sessions and xdist
    workers that need it at once wait for the first one instead of building into the same folder
    together; the caller checks again, under the lock, whether it is there now."""
    CACHE.mkdir(parents=True, exist_ok=True)
    with open(CACHE / f"{entry}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # dropped when the file closes
        yield


def pristine(version: str) -> Path:
    """The cached pristine install of a release (never modified by a test)."""
    if FAST_TIER_TEST is not None:
        raise AssertionError(f"the fast tier is offline: {FAST_TIER_TEST} reads SGLang {version} (mark it "
                             "integration: a cache without it downloads it)")
    saved = os.environ.get(ENV_HOME)
    os.environ[ENV_HOME] = str(HOME)
    try:
        return releases.pristine_tree(version)
    finally:
        if saved is None:
            del os.environ[ENV_HOME]
        else:
            os.environ[ENV_HOME] = saved


def copy_release(version: str, dest: Path, into_existing: bool = False) -> Path:
    """A private copy of a release for one test (`into_existing`: into a folder that is there
    already, a venv's site-packages).

    Files are hard links (patchkit only ever replaces files, never writes into them), except
    Python files under sglang/srt/, which are real copies so a test may edit them in place.
    """
    src = pristine(version)

    def link_or_copy(s: str, d: str) -> None:
        rel = Path(s).relative_to(src).as_posix()
        if rel.startswith("sglang/srt/") and rel.endswith(".py"):
            shutil.copy2(s, d)
        else:
            os.link(s, d)

    shutil.copytree(src, dest, copy_function=link_or_copy, dirs_exist_ok=into_existing)
    return dest


def snapshot(site: Path) -> dict[str, str]:
    """The whole tree under `site` (for "nothing changed"): every file with the sha256 of its
    bytes and its mode bits, every folder, every symlink with its target."""
    import hashlib

    found = {}
    for path in sorted(site.rglob("*")):
        rel = path.relative_to(site).as_posix()
        if path.is_symlink():
            found[rel] = "-> " + os.readlink(path)
        elif path.is_file():
            found[rel] = f"{oct(path.stat().st_mode & 0o7777)} {hashlib.sha256(path.read_bytes()).hexdigest()}"
        elif path.is_dir():
            found[rel + "/"] = "dir"
    return found


def entry_hashes(root: Path, skip: Path | None = None) -> dict[str, str]:
    """sha256 of every entry under `root` (a symlink as its target's name, a folder "dir"), the
    entry `skip` and all below it left out (for "no byte beside DIR changed")."""
    import hashlib

    found = {}
    for top, dirs, names in os.walk(root):
        if skip is not None and Path(top) == skip.parent and skip.name in dirs:
            dirs.remove(skip.name)
        for name in [*dirs, *names]:
            path = Path(top, name)
            rel = path.relative_to(root).as_posix()
            if path.is_symlink():
                found[rel] = "-> " + os.readlink(path)
            elif path.is_file():
                found[rel] = hashlib.sha256(path.read_bytes()).hexdigest()
            else:
                found[rel] = "dir"
    return found


def tree_bytes(folder: Path) -> dict[str, bytes]:
    """Every file under a folder with its bytes (for byte-exact comparisons), caches aside."""
    return {
        path.relative_to(folder).as_posix(): path.read_bytes()
        for path in sorted(folder.rglob("*"))
        if path.is_file() and "__pycache__" not in path.parts
    }


def target_files(version: str) -> list[str]:
    """The release's files that patchkit's patches look at (from its manifest: the files its
    verdicts name and every file a patch reads)."""
    from patchkit.releases.manifest import load

    found = load(version)
    reads = {rel for entry in found.patches.values() for rel, digest in entry.reads.items() if digest is not None}
    return sorted({*found.files, *reads})


def copy_minimal(version: str, dest: Path, extra: tuple[str, ...] = ()) -> Path:
    """A tree holding only what patchkit touches: the target files, `sglang/__init__.py`,
    `sglang/version.py` and the dist-info (real copies, for fault sweeps and odd file systems)."""
    src = pristine(version)
    wanted = {"sglang/__init__.py", "sglang/version.py", *target_files(version), *extra}
    for rel in sorted(wanted):
        if (src / rel).exists():
            (dest / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src / rel, dest / rel)
    for info in src.glob("sglang-*.dist-info"):
        shutil.copytree(info, dest / info.name)
    return dest


def tree(site: Path) -> dict[str, tuple]:
    """Every entry under `site`: (kind, mode, bytes or link target), for byte-exact comparisons."""
    found: dict[str, tuple] = {}
    for path in sorted(site.rglob("*")):
        st = path.lstat()
        rel = path.relative_to(site).as_posix()
        if rel == ".patchkit/lock":
            continue  # an empty lock file a killed run left: the next run removes it
        if path.is_symlink():
            found[rel] = ("link", st.st_mode & 0o7777, os.readlink(path))
        elif path.is_dir():
            found[rel] = ("dir", st.st_mode & 0o7777, None)
        else:
            found[rel] = ("file", st.st_mode & 0o7777, path.read_bytes())
    return found


# What SGLang's python/pyproject.toml says, trimmed to what an install without dependencies
# reads (SGLang's own file has the same build system and package discovery).
_PYPROJECT = """\
[build-system]
requires = ["setuptools>=61.0", "wheel"]
build-backend = "setuptools.build_meta"

[project]
name = "sglang"
version = "{version}"
requires-python = ">=3.10"

[tool.setuptools.packages.find]
exclude = ["assets*", "benchmark*", "docs*", "dist*", "playground*", "scripts*", "tests*"]
"""


def source_project(version: str, project: Path) -> Path:
    """The `python/` folder of an SGLang checkout of a release, as the official images hold it
    (/sgl-workspace/sglang/python): the release's package and a pyproject.toml that
    `pip install -e` (or a plain install) reads."""
    project.mkdir(parents=True)
    shutil.copytree(pristine(version) / "sglang", project / "sglang", ignore=shutil.ignore_patterns("__pycache__"))
    (project / "pyproject.toml").write_text(_PYPROJECT.format(version=version))
    return project
