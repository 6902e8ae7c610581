"""Rendering shared by the commands: the SGLang header and a patch table."""

from __future__ import annotations

import contextlib
from pathlib import Path

from patchkit.base.lean_typing import TYPE_CHECKING
from patchkit.commands import output
from patchkit.base.errors import INTERRUPTED_EARLY, Interrupted
from patchkit.engine.patch_status import PatchStatus
from patchkit.store.target import Target

if TYPE_CHECKING:
    from typing import Iterator
    from patchkit.store import stale


def sglang(target: Target) -> dict:
    return {"version": target.version, "path": str(target.site)}


def header(target: Target) -> None:
    output.line(f"SGLang {target.version} at {target.site}")


def table(statuses: list[PatchStatus] | tuple[PatchStatus, ...]) -> None:
    width = max((len(s.id) for s in statuses), default=0)
    for s in statuses:
        files = ", ".join(s.shown_files) or "-"
        output.line(f"  {s.state:<15} {s.id:<{width}}  {files}")
        if s.detail:
            output.line(f"  {'':<15} {'':<{width}}  {s.detail}")


def warnings(items: tuple[str, ...] | list[str]) -> None:
    for item in items:
        output.warn(item)


def discarded(found: stale.Discarded | None, target: Target) -> None:
    """Say that `stale.discard_stale` dropped the record of another release (nothing when it did not)."""
    if found is not None:
        output.warn(f"discarded the stale record of SGLang {found.sglang_version} "
                    f"({len(found.files)} file(s), now {target.version}'s own) from {found.state_dir}")


def overwritten(lost: dict[str, bytes], kept: tuple[str, ...]) -> list[dict]:
    """[{file, kept}]: each file whose outside edits `--force` overwrote, and where its bytes are."""
    copies = {path.split("/", 3)[-1]: path for path in kept}
    return [{"file": rel, "kept": copies.get(rel)} for rel in sorted(set(lost) | set(copies))]


def kept(site: Path, lost: dict[str, bytes], copies: tuple[str, ...]) -> None:
    for item in overwritten(lost, copies):
        where = site / item["kept"] if item["kept"] else "(no copy)"
        output.line(f"  overwritten     {item['file']} (changed outside patchkit; its bytes are kept in {where} "
                    "until the next full revert)")


FINISHED_EARLIER = ("finished an interrupted earlier run first: the files it was writing are in place and "
                    "recorded")


class Progress:
    """What the run has done so far, for what a Ctrl-C says (a plain class: a dataclass costs
    every `status`, which imports this module, ~0.5 ms to make)."""

    def __init__(self) -> None:
        self.recovered = False  # an unfinished earlier run was finished
        self.done = ""  # set once this run's files are written


@contextlib.contextmanager
def interruptible(target: Target) -> Iterator[Progress]:
    """A Ctrl-C says truthfully what happened to the files."""
    progress = Progress()
    try:
        yield progress
    except KeyboardInterrupt:
        if progress.done:
            raise Interrupted(f"interrupted after the run had finished ({progress.done}); see "
                              f"`{target.naming.command('status')}`") from None
        if progress.recovered:
            raise Interrupted("interrupted; an unfinished earlier run had been finished first, nothing else was "
                              "changed") from None
        raise Interrupted(INTERRUPTED_EARLY) from None
