"""Stale and orphaned state: a `.patchkit/` left by a release that is no longer installed there
(`pip install --upgrade sglang` replaced it, or `pip uninstall sglang` removed it)."""

from __future__ import annotations

import os
from pathlib import Path

from patchkit.base.lean_typing import NamedTuple
from patchkit.store import state as state_mod
from patchkit.base.constants import JOURNAL_FILE, LOCK_FILE, STATE_FILE
from patchkit.base.errors import DriftError
from patchkit.store.state import State
from patchkit.store.target import SITE, Target, interpreter_for
from patchkit.base.util import sha256

# shutil and shlex are imported where they are used: a no-op apply only asks `discard_stale`.


# Leftover and Discarded are NamedTuples, not dataclasses: every `apply` imports this module, and
# making a dataclass costs ~0.5 ms (nothing copies or compares them).
class Leftover(NamedTuple):
    folder: Path  # the folder holding `.patchkit/`
    sglang_version: str | None  # the release it recorded (None: no readable state file)

    @property
    def state_dir(self) -> Path:
        return state_mod.state_dir(self.folder)

    def describe(self) -> str:
        what = f"SGLang {self.sglang_version}" if self.sglang_version else "an unknown release"
        return f"{self.state_dir} (left by {what})"


def stale_state(target: Target) -> State | None:
    """The recorded state when it belongs to another release than the one installed."""
    recorded = state_mod.load(target.site)
    if recorded is None or recorded.sglang_version == target.version:
        return None
    return recorded


class Discarded(NamedTuple):
    """A stale record dropped: the release it was of, the files it named, where it was."""

    sglang_version: str
    files: tuple[str, ...]
    state_dir: Path


def discard_stale(target: Target) -> Discarded | None:
    """Drop the record of a release no longer installed here (under the caller's lock): what was
    dropped, or None when the record is this release's own (or there is none)."""
    recorded = stale_state(target)
    if recorded is None:
        return None
    files = discard(target, recorded)
    return Discarded(recorded.sglang_version, tuple(files), state_mod.state_dir(target.site))


def discard(target: Target, recorded: State) -> list[str]:
    """Remove a stale record after checking that no file it names still holds patchkit's bytes
    (those would be taken for the new release's own). Returns the files it named."""
    ours = [rel for rel, record in sorted(recorded.files.items())
            if (data := target.read(rel)) is not None and sha256(data) == record.patched]
    refuse_patched(target, ours, recorded.sglang_version)
    remove(target.site)
    return sorted(recorded.files)


def refuse_patched(target: Target, ours: list[str], recorded_version: str) -> None:
    """Exit 4 when a file of a record for another release still holds patchkit's bytes: that
    record's backups are the only pristine copy, and its files would pass for the new release's.
    --force cannot help: the backups are the old release's bytes (restoring them mixes two
    releases) and the patched bytes are not the new one's (taking them as pristine makes the
    patch permanent). Only the files themselves can be put right."""
    if ours:
        raise DriftError(
            f"{ours[0]} still holds what patchkit wrote for SGLang {recorded_version}, but "
            f"{target.version} is installed; nothing was written (--force cannot choose between the two "
            f"releases' bytes). {restore_advice(target, ours)}, then run again"
        )


def restore_advice(target: Target, files: list[str]) -> str:
    """How to put the release's own bytes back into `files`, for the way this SGLang is installed."""
    if target.checkout is not None:
        return f"Restore them from git: `{git_command(target, 'checkout', files)}`"
    reinstall = reinstall_command(target)
    if reinstall is not None:
        return f"Reinstall SGLang {target.version}: `{reinstall}`"
    return (f"Restore {', '.join(files)} in {target.site} from SGLang {target.version}'s source "
            f"(unpack its sdist again, or check the tree out again)")


def git_command(target: Target, verb: str, files: list[str]) -> str:
    """`git -C CHECKOUT VERB -- PATHS` for files of a target in a git checkout, from any folder."""
    import shlex

    assert target.checkout is not None
    paths = [os.path.relpath(target.site / rel, target.checkout) for rel in files]
    return " ".join(shlex.quote(word) for word in ("git", "-C", str(target.checkout), verb, "--", *paths))


def reinstall_command(target: Target) -> str | None:
    """The pip command that puts the release's own files back into this SGLang: its virtual
    environment's pip, else pip's --target with its folder (a bare `pip install` reinstalls into
    whatever Python that shell finds). None for a source tree (an sdist, an editable install):
    pip would not rewrite those files."""
    import shlex

    if target.kind != SITE:
        return None
    release = f"sglang=={target.version}"
    python = interpreter_for(target.site)
    if python is not None:  # a virtual environment's site-packages
        return f"{shlex.quote(python)} -m pip install --force-reinstall --no-deps {release}"
    return f"pip install --force-reinstall --no-deps --upgrade --target {shlex.quote(str(target.site))} {release}"


def remove(folder: Path) -> None:
    """Remove `.patchkit/` (its lock file stays for the lock holder, which drops it on release).
    The state file goes last: a kill or an error in between leaves the record naming what is
    left, and the next `clean` removes the rest (removed first, it left backups no record named)."""
    import shutil

    directory = state_mod.state_dir(folder)
    if not directory.is_dir():
        return
    last = (JOURNAL_FILE, STATE_FILE)  # the record of a run, then the record of the tree
    for entry in sorted(directory.iterdir(), key=lambda e: (last.index(e.name) + 1 if e.name in last else 0, e.name)):
        if entry.name != LOCK_FILE:
            shutil.rmtree(entry) if entry.is_dir() and not entry.is_symlink() else entry.unlink()


def orphans(folders: list[Path]) -> list[Leftover]:
    """`.patchkit/` folders in `folders` with no SGLang beside them any more."""
    found = []
    for folder in dict.fromkeys(Path(f) for f in folders):
        directory = state_mod.state_dir(folder)
        if not directory.is_dir() or (folder / "sglang" / "__init__.py").is_file():
            continue
        try:
            recorded = state_mod.load(folder)
        except Exception:  # a corrupt record is still a leftover to clean
            recorded = None
        found.append(Leftover(folder, recorded.sglang_version if recorded else None))
    return found
