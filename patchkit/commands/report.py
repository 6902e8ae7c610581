"""Rendering shared by the commands: the SGLang header and a patch table."""

from __future__ import annotations

from patchkit import output
from patchkit.engine import PatchStatus
from patchkit.target import Target


def sglang(target: Target) -> dict:
    return {"version": target.version, "path": str(target.site)}


def header(target: Target) -> None:
    output.line(f"SGLang {target.version} at {target.site}")


def table(statuses: list[PatchStatus] | tuple[PatchStatus, ...]) -> None:
    width = max((len(s.id) for s in statuses), default=0)
    for s in statuses:
        files = ", ".join(s.files) or "-"
        output.line(f"  {s.state:<15} {s.id:<{width}}  {files}")
        if s.detail:
            output.line(f"  {'':<15} {'':<{width}}  {s.detail}")


def warnings(items: tuple[str, ...] | list[str]) -> None:
    for item in items:
        output.warn(item)


def discard_stale(target: Target) -> None:
    """Drop the record of a release no longer installed here (under the caller's lock)."""
    from patchkit import stale

    recorded = stale.stale_state(target)
    if recorded is not None:
        files = stale.discard(target, recorded)
        output.warn(f"discarded the stale record of SGLang {recorded.sglang_version} "
                    f"({len(files)} file(s), now {target.version}'s own) from {target.site / '.patchkit'}")
