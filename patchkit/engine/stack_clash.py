"""A diff patch beside another patch on the same file: do they stack?

Each patch is judged on the release's bytes alone, and two that both read `pending` may still
clash: `apply` stacks them on the shared file in their declared order (`Patchkit-After`, else
by id), each on the bytes the one before wrote. So `status`, `apply` and `matrix` render each
shared file's stack as `apply` will: patches that change different code of the file are applied
one on top of the other (a diff's hunks found where the other patch moved them, or per unit); the
first patch of the stack that no longer applies on top of the ones before it is `failed`, naming
them, and the patches under it stay `pending` (each applies alone, `--skip` the other).

Only stacks that hold a diff patch are rendered here: the built-in patches that share a file
declare their order and are verified together on every release (`patchkit manifest`), so their
status stays a matter of hashes.
"""

from __future__ import annotations

from typing import Any

from collections.abc import Mapping
from dataclasses import dataclass

from patchkit.engine import registry
from patchkit.base.errors import PlanError
from patchkit.authoring.patch import SkipPatch
from patchkit.engine import view as view_mod
from patchkit.engine.view import View


@dataclass(frozen=True)
class Clash:
    file: str  # the shared file
    under: tuple[str, ...]  # the patches stacked before it there
    detail: str  # the status detail: why, and what applies each alone

    def to_dict(self) -> dict[str, Any]:
        return {"file": self.file, "under": list(self.under), "detail": self.detail}


def clashes(view: View, pending: Mapping[str, tuple[str, ...]],
            applied: Mapping[str, tuple[str, ...]] | None = None) -> dict[str, Clash]:
    """{patch id: why it cannot be applied on top of the others}: for each file of `pending`
    ({id: the files it would write}) that another patch of `pending` or `applied` ({file: the ids
    the state records there}) also changes, its stack rendered from the release's bytes."""
    applied = applied or {}
    sharing: dict[str, list[str]] = {}
    for pid, files in pending.items():
        for rel in files:
            sharing.setdefault(rel, list(applied.get(rel, ())))
            if pid not in sharing[rel]:
                sharing[rel].append(pid)
    known = set(registry.patch_ids())
    # Cheap first (no patch imported): a file that two patches change, one of them a diff.
    shared = {rel: ids for rel, ids in sharing.items()
              if len(ids) > 1 and any(pid in known and registry.is_diff(pid) for pid in ids)}
    if not shared:
        return {}
    classes = {pid: type(patch) for pid, patch in view.patches.items()}
    found: dict[str, Clash] = {}
    for rel, ids in sorted(shared.items()):
        if any(pid in found for pid in ids):
            continue  # one of them already failed on another file: apply refuses it there
        stack = registry.stack(ids, classes)
        for depth in range(2, len(stack) + 1):
            pid, under = stack[depth - 1], tuple(stack[:depth - 1])
            if pid not in pending:
                continue
            try:
                view_mod.render_file(view, rel, (*under, pid))
            except (PlanError, SkipPatch) as exc:
                named = _culprits(view, rel, pid, under)
                found[pid] = Clash(rel, named, _detail(view, rel, pid, named, exc, set(applied.get(rel, ()))))
                break
    return found


def _culprits(view: View, rel: str, pid: str, under: tuple[str, ...]) -> tuple[str, ...]:
    """The patches under `pid` it does not apply on top of one by one (all of them when it is
    only their sum)."""
    if len(under) == 1:
        return under
    named = []
    for other in under:
        try:
            view_mod.render_file(view, rel, (other, pid))
        except (PlanError, SkipPatch):
            named.append(other)
    return tuple(named) or under


def _detail(view: View, rel: str, pid: str, under: tuple[str, ...], exc: Exception, recorded: set[str]) -> str:
    """Why `pid` fails on top of `under` on `rel`, naming both and what applies each alone."""
    reason = str(exc)
    try:
        # The reason as `pid` gives it on the bytes the patches under it wrote (without the
        # stacking advice the render adds, said once below).
        data = view.render(rel, view.pristine(rel) or b"", under)
        view.render(rel, data, (pid,))
    except (PlanError, SkipPatch) as own:
        reason = str(own)
    names = ", ".join(under)
    # A patch patchkit already applied is taken off with revert; one not applied yet, skipped.
    off = [f"`{view.target.naming.command('revert', '--only', other)}`" if other in recorded else f"`--skip {other}`"
           for other in under]
    return (f"{rel}: it does not apply on top of {names}, stacked before it on that file ({reason}); "
            f"`--skip {pid}` applies the others without it, {' and '.join(off)} lets {pid} apply without "
            f"{names}, `Patchkit-After:` sets the order")
