"""What a patched image's build context holds beside its Dockerfile: the running patchkit itself
(its wheel: the one given with `--wheel`, else built from the checkout patchkit runs from, else
written from the installed copy it runs as: `own_wheel`) and
every patch set this run loads besides the built-in one (`--patches` folders and diff files,
$PATCHKIT_PATCHES, entry-point packages), copied byte for byte, so that the image applies
exactly the patches `status` shows here (their digests are the same bytes).

Planned in memory (`plan`), then written (`write`): nothing is copied before every name checks.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from patchkit.base import confined
from patchkit.engine import registry
from patchkit.image import own_wheel
from patchkit.base.errors import BuildError, UsageError
from patchkit.base.util import fsync_dir

PATCHES_DIR = "patchkit-patches"  # in the build context, one numbered folder per patch set
WHEEL_NAME = own_wheel.NAME  # what `pip wheel` makes of the checkout, and own_wheel of an installed copy
_PLAIN = re.compile(r"[A-Za-z0-9_+][A-Za-z0-9_.+-]*", re.ASCII)


@dataclass(frozen=True)
class Context:
    wheel: str  # the file name of patchkit's wheel in the context
    wheel_source: Path | None  # a wheel to copy; None: built from `checkout` or `installed` when written
    checkout: Path | None
    installed: Path | None = None  # the dist-info of the installed copy patchkit runs as (no checkout)
    patch_sets: tuple[str, ...] = ()  # context paths of the patch sets, in load order
    copies: dict[str, Path] = field(default_factory=dict)  # context path -> file or folder to copy

    def names(self) -> list[str]:
        """What the context holds beside the Dockerfile, for the messages."""
        return [self.wheel, *([f"{PATCHES_DIR}/"] if self.patch_sets else [])]


def checkout() -> Path | None:
    """The source tree patchkit runs from (pyproject.toml beside the package), if it is one."""
    import patchkit

    root = Path(patchkit.__file__).resolve().parent.parent
    return root if (root / "pyproject.toml").is_file() and (root / "patches").is_dir() else None


def plan(wheel: Path | None) -> Context:
    """The context for the patch sets loaded now; UsageError (exit 2) when it cannot be made."""
    root = installed = None
    if wheel is None:
        root = checkout()
        installed = own_wheel.installed_copy() if root is None else None
        if root is None and installed is None:
            raise UsageError("patchkit runs neither from a checkout nor from an install pip made of its wheel (no "
                             "RECORD lists it): give its wheel with --wheel FILE (the image installs exactly that "
                             "patchkit)")
    sets, copies = [], {}
    for number, patch_set in enumerate((s for s in registry.patch_sets() if s.origin != registry.BUILT_IN), 1):
        where = f"{PATCHES_DIR}/{number}"
        if patch_set.only:  # `--patches FILE`: the one diff file, under its own name (its id may be it)
            if not _PLAIN.fullmatch(patch_set.only):
                raise UsageError(f"--patches {patch_set.folder / patch_set.only}: the file name must be a plain name "
                                 "(letters, digits, . _ + -) to be copied into the build context")
            where = f"{where}/{patch_set.only}"
            copies[where] = patch_set.folder / patch_set.only
        else:
            # Nothing from outside the folder: a symlink out of it, to nothing or to a folder is
            # refused (exit 6) before anything is written; one to a file in it is copied as its bytes.
            confined.plain_tree(patch_set.folder, registry.left_out(patch_set.folder))
            copies[where] = patch_set.folder
        sets.append(where)
    return Context(wheel=wheel.name if wheel else WHEEL_NAME, wheel_source=wheel, checkout=root,
                   patch_sets=tuple(sets), copies=copies, installed=installed)


def write(context: Context, folder: Path) -> None:
    """Put the wheel and the patch sets into `folder` (the build context): made in a staging folder
    inside it, then renamed into place (the wheel, then `patchkit-patches/`, which replaces the one
    an earlier run wrote there), so that a failure part way leaves `folder` as it was."""
    staged = Path(tempfile.mkdtemp(prefix=".patchkit-context-", dir=folder))
    try:
        wheel = staged / context.wheel
        if context.wheel_source is not None:
            dest = folder / context.wheel
            if not (dest.exists() and dest.samefile(context.wheel_source)):  # `-o` beside the wheel given
                shutil.copyfile(context.wheel_source, wheel)
        elif context.installed is not None:
            own_wheel.write(context.installed, wheel)
        else:
            assert context.checkout is not None
            _build_wheel(context.checkout, wheel)
        for where, source in context.copies.items():
            dest = staged / where
            dest.parent.mkdir(parents=True, exist_ok=True)
            if source.is_dir():
                shutil.copytree(source, dest, symlinks=False, ignore=registry.left_out(source))
            else:
                shutil.copyfile(source, dest)
        if wheel.exists():
            os.replace(wheel, folder / context.wheel)
        if context.copies:
            _replace_folder(staged / PATCHES_DIR, folder / PATCHES_DIR, staged / "earlier")
        fsync_dir(folder)
    finally:
        shutil.rmtree(staged, ignore_errors=True)


def _replace_folder(new: Path, dest: Path, aside: Path) -> None:
    """`new` renamed to `dest`, what was there moved to `aside` first (and back if the rename fails)."""
    earlier = dest.exists() or dest.is_symlink()
    if earlier:
        os.rename(dest, aside)
    try:
        os.rename(new, dest)
    except BaseException:
        if earlier:
            os.rename(aside, dest)
        raise


def _build_wheel(root: Path, dest: Path) -> None:
    with tempfile.TemporaryDirectory(prefix="patchkit-wheel-") as scratch:
        proc = subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--disable-pip-version-check",
                               "-w", scratch, str(root)], capture_output=True, text=True, stdin=subprocess.DEVNULL,
                              timeout=900)
        built = sorted(Path(scratch).glob("*.whl"))
        if proc.returncode != 0 or [p.name for p in built] != [dest.name]:
            tail = (proc.stderr or proc.stdout).strip().splitlines()
            raise BuildError(f"cannot build patchkit's wheel from {root}: "
                             f"{tail[-1] if tail else [p.name for p in built]}; give one with --wheel FILE")
        shutil.copyfile(built[0], dest)
