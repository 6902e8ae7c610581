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
