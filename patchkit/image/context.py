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
from patchkit.base.util import fsync_dir, write_new_synced

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
    # context path -> what the plan checked there (confined.plain_tree; a --patches FILE: that file)
    checked: dict[str, list[confined.Checked]] = field(default_factory=dict)

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
    sets, copies, checked = [], {}, {}
    for number, patch_set in enumerate((s for s in registry.patch_sets() if s.origin != registry.BUILT_IN), 1):
        where = f"{PATCHES_DIR}/{number}"
        if patch_set.only:  # `--patches FILE`: the one diff file, under its own name (its id may be it)
            if not _PLAIN.fullmatch(patch_set.only):
                raise UsageError(f"--patches {patch_set.folder / patch_set.only}: the file name must be a plain name "
                                 "(letters, digits, . _ + -) to be copied into the build context")
            where = f"{where}/{patch_set.only}"
            copies[where] = patch_set.folder / patch_set.only
            info = os.stat(copies[where])
            checked[where] = [confined.Checked(patch_set.only, False, info.st_dev, info.st_ino, via_link=True)]
        else:
            # Nothing from outside the folder: a symlink out of it, to nothing or to a folder is
            # refused (exit 6) before anything is written; one to a file in it is copied as its bytes.
            # What is checked here is what is copied (an entry swapped since is refused, never followed).
            checked[where] = confined.plain_tree(patch_set.folder, registry.left_out(patch_set.folder))
            copies[where] = patch_set.folder
        sets.append(where)
    return Context(wheel=wheel.name if wheel else WHEEL_NAME, wheel_source=wheel, checkout=root,
                   patch_sets=tuple(sets), copies=copies, checked=checked, installed=installed)


def write(context: Context, folder: Path, files: dict[str, Path | bytes] | None = None) -> None:
    """Put the wheel, `files` ({name in `folder`: a file to copy, or bytes}: the --ca-cert file, the
    Dockerfile) and the patch sets into `folder` (the build context), all or nothing: each is made
    and synced in a staging folder inside it (`.patchkit-context-*`, removed in every case), then
    renamed into place (the wheel, `files` in their order, then `patchkit-patches/`, present only
    when there are sets), each earlier one moved aside first; the folder is synced. A failure at
    any step, the folder's sync included, moves back what was renamed, so `folder` is as it was.
    A stale `patchkit-patches/` is removed when this run has no sets (the image must not carry it)."""
    staged = Path(tempfile.mkdtemp(prefix=".patchkit-context-", dir=folder))
    try:
        names: list[str] = []
        if context.wheel_source is not None:
            dest = folder / context.wheel
            if not (dest.exists() and dest.samefile(context.wheel_source)):  # `-o` beside the wheel given
                confined.copy_file(context.wheel_source, staged / context.wheel)
                names.append(context.wheel)
        else:
            if context.installed is not None:
                own_wheel.write(context.installed, staged / context.wheel)
            else:
                assert context.checkout is not None
                _build_wheel(context.checkout, staged / context.wheel)
            _sync_file(staged / context.wheel)
            names.append(context.wheel)
        for name, content in (files or {}).items():
            if isinstance(content, bytes):
                write_new_synced(staged / name, content, 0o644)
            else:
                confined.copy_file(content, staged / name)
            names.append(name)
        sets = staged / PATCHES_DIR
        sets.mkdir()
        for where, source in context.copies.items():
            dest = staged / where
            dest.parent.mkdir(parents=True, exist_ok=True)
            if source.is_dir():
                confined.copy_checked(source, context.checked[where], dest)
            else:
                confined.copy_file(source, dest, context.checked[where][0])
        for here, _, _ in os.walk(sets):
            fsync_dir(Path(here))
        names.append(PATCHES_DIR)
        _swap(staged, folder, names, keep_absent={PATCHES_DIR} if not context.copies else set())
    finally:
        shutil.rmtree(staged, ignore_errors=True)


def _swap(staged: Path, folder: Path, names: list[str], keep_absent: set[str]) -> None:
    """Each of `names` renamed from `staged` into `folder` (one in `keep_absent` is not put there:
    what was there is only moved aside), the earlier entry moved into `staged/earlier` first; the
    folder synced. On any failure every step is undone, last first, and the error raised."""
    aside = staged / "earlier"
    aside.mkdir()
    done: list[tuple[str, bool, bool]] = []  # (name, an earlier one moved aside, the new one put in)
    try:
        for name in names:
            earlier = os.path.lexists(folder / name)
            if earlier:
                os.rename(folder / name, aside / name)
            done.append((name, earlier, False))
            if name not in keep_absent:
                os.rename(staged / name, folder / name)
                done[-1] = (name, earlier, True)
        fsync_dir(folder)
    except BaseException:
        for name, earlier, put in reversed(done):
            if put:
                os.rename(folder / name, staged / name)
            if earlier:
                os.rename(aside / name, folder / name)
        raise


def _sync_file(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    try:
        os.fsync(fd)
    except OSError as exc:
        raise OSError(exc.errno, exc.strerror, str(path)) from None
    finally:
        os.close(fd)


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
