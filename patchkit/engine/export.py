"""`export`: a patch (built-in, from a patch set or a diff file) as a `git format-patch` file
against one release, with the paths of an SGLang checkout (`python/sglang/...`), for a fork or
an upstream pull request. The change is what `apply` writes on that release with this patch
alone, from the release's pristine bytes (its wheel)."""

from __future__ import annotations

import textwrap
from dataclasses import dataclass
from typing import Any

from patchkit.engine import decide, identity, registry
from patchkit.diffs import format_patch
from patchkit.releases import pristine as releases, versions
from patchkit.engine import view as view_mod  # render_file through the module: the fault tests replace it
from patchkit.engine.patch_status import PENDING, PatchStatus
from patchkit.base.errors import PlanError

CHECKOUT_PREFIX = "python/"  # where the package lives in the SGLang repository


@dataclass(frozen=True)
class Export:
    id: str
    version: str
    data: bytes  # the format-patch file
    files: tuple[dict[str, Any], ...]  # {file: path in the checkout, added, removed}


def body(patch: Any) -> str:
    """The commit message body: the rationale, upstream references, when to drop it."""
    paragraphs = [textwrap.fill(" ".join(str(patch.RATIONALE).split()), 72)] if patch.RATIONALE else []
    if patch.UPSTREAM:
        paragraphs.append("\n".join(f"Upstream: {ref}" for ref in patch.UPSTREAM))
    if patch.DROP_WHEN:
        paragraphs.append(textwrap.fill(f"Drop when: {' '.join(patch.DROP_WHEN.split())}", 72))
    return "\n\n".join(paragraphs)


def export(pid: str, version: str, author: str | None = None, progress: releases.Progress = releases.quiet) -> Export:
    registry.select(registry.patch_ids(), (pid,))  # an unknown id: exit 2, before any download
    if author is not None:
        format_patch.check_author(author)  # before any download too
    version = versions.normalise(version, "--release")
    registry.check_known(version)  # a release patchkit knows nothing about: exit 3, nothing downloaded
    source = releases.WheelSource(version, progress)
    status, files = _render_alone(source, pid)
    if status.state != PENDING:
        why = f": {status.detail}" if status.detail else ""
        raise PlanError(f"patch {pid} is {status.state} on SGLang {version}{why}; there is no change to export "
                        "(`patchkit matrix` shows the releases it applies to)")
    patch = next(cls for cls in registry.load_all() if cls.ID == pid)
    changes = [format_patch.FileChange(rel, before, after) for rel, (before, after) in files.items()]
    trailers = format_patch.Trailers(id=pid, title=patch.TITLE, upstream=tuple(patch.UPSTREAM),
                                     applies_to=patch.APPLIES_TO, after=tuple(patch.STACK_AFTER))
    # The `From <sha>` line names the patch source the file was made from (its digest's first 40 digits).
    mail = format_patch.Mail(author=author or format_patch.DEFAULT_AUTHOR, commit=identity.digest(pid)[:40])
    data = format_patch.format_patch(trailers, body(patch), changes, CHECKOUT_PREFIX, mail)
    summary = tuple({"file": CHECKOUT_PREFIX + c.rel, "added": added, "removed": removed}
                    for c in sorted(changes, key=lambda c: c.rel) for added, removed in (format_patch.counts(c),))
    return Export(id=pid, version=version, data=data, files=summary)


def _render_alone(source: Any, pid: str) -> tuple[PatchStatus, dict[str, tuple[bytes | None, bytes | None]]]:
    """One patch on a pristine source (a release's wheel), judged by its probes: its status
    there and, when it is pending, {file: (bytes before, bytes after)} of the files it edits,
    rendered and compiled as `apply` would write them on that release alone."""
    view = view_mod.code_view(source)
    found = decide.evaluate(view, pid)
    if found.state != PENDING:
        return found, {}
    return found, {rel: (view.read(rel), view_mod.render_file(view, rel, (pid,))) for rel in found.files}
