from __future__ import annotations

import os
from pathlib import Path

from patchkit.store import lock
from patchkit.commands import output
from patchkit.engine import planning, registry
from patchkit.store import stale, transaction
from patchkit.store import state as state_mod
from patchkit.commands import report
from patchkit.commands.clean import clean_leftovers
from patchkit.commands.locate import locate, naming
from patchkit.base.errors import NotFoundError, TargetError
from patchkit.base.constants import DEFAULT_LOCK_TIMEOUT, EXIT_OK


def revert(site_packages: str | None, version: str | None, only: tuple[str, ...], force: bool, as_json: bool,
           source: str | None = None, python: str | None = None, lock_timeout: float = DEFAULT_LOCK_TIMEOUT) -> int:
    if only:
        registry.select(registry.patch_ids(), only)  # an unknown id is exit 2, whatever the tree holds
    try:
        target = locate(site_packages, None, version, source=source, python=python)
    except NotFoundError as exc:
        left = stale.orphans(list(exc.searched))  # SGLang uninstalled: its `.patchkit/` goes too
        if not left:
            raise
        if only:
            # One patch cannot be taken out of a release that is gone; removing the whole record
            # is a full revert's (or clean's) job, never a side effect of --only.
            named = naming(site_packages, source, python, version)
            raise TargetError(f"{exc}; patchkit state is left behind in {left[0].describe()}: nothing to revert "
                              f"for {', '.join(only)} there and nothing was removed (`{named.command('revert')}` "
                              f"without --only, or `{named.command('clean')}`, removes it)") from None
        return clean_leftovers(left, as_json, naming(site_packages, source, python), lock_timeout)
    with report.interruptible(target) as progress:  # also while the report is printed
        return _revert(target, only, force, as_json, lock_timeout, progress)


def _kept_copies(target) -> list[str]:
    """The files under .patchkit/overwritten/, as paths relative to the package folder's parent."""
    folder = state_mod.overwritten_dir(target.site)
    return sorted((Path(top) / name).relative_to(target.site).as_posix()
                  for top, _, names in os.walk(folder) for name in names)  # symlinks are not followed


def _revert(target, only, force, as_json, lock_timeout, progress: report.Progress) -> int:
    kept: tuple[str, ...] = ()
    with lock.locked(target.site, lock_timeout, output.warn):
        recovery = transaction.recover(target, force)
        progress.recovered = recovery.finished
        report.discarded(stale.discard_stale(target), target)
        plan = planning.plan_revert(target, only, force)
        # A full revert also drops the copies earlier `--force` runs kept.
        dropped = not only and plan.new_state is None and state_mod.overwritten_dir(target.site).exists()
        # Named before they go: a revert that only drops those copies must say so.
        removed = _kept_copies(target) if dropped else []
        if plan.changes_files or plan.old_state != plan.new_state or dropped:
            kept = transaction.commit(plan.target, list(plan.writes), plan.old_state, plan.new_state, plan.lost)
        progress.done = _counted(plan.sglang_writes)
    warnings = [*recovery.warnings, *plan.warnings]
    kept = (*recovery.kept, *kept)
    if as_json:
        output.as_json({
            "sglang": report.sglang(target),
            "reverted": list(plan.acted),
            "files": [w.rel for w in plan.writes],
            "overwritten": report.overwritten(plan.lost, kept),
            "removed_kept_copies": removed,
            "recovered": recovery.finished,
            "warnings": warnings,
        })
        return EXIT_OK
    report.warnings(warnings)
    report.header(target)
    if recovery.finished:
        output.line(report.FINISHED_EARLIER)
    if not plan.acted and recovery.finished and plan.old_state is None:
        output.line("nothing else to revert: patchkit has changed nothing here now")
    elif not plan.acted:
        output.line("nothing to revert: patchkit has changed nothing here" if plan.old_state is None or not only else
                    f"nothing to revert: {', '.join(only)} not applied here (`{target.naming.command('status')}` "
                    "lists what is)")
    if removed:
        output.line(f"removed the {len(removed)} copy(ies) of outside edits that earlier --force runs kept: "
                    + ", ".join(removed))
    for pid in plan.acted:
        output.line(f"  reverted        {pid}")
    report.kept(target.site, plan.lost, kept)
    if plan.writes:
        output.line(_counted(plan.sglang_writes))
    return EXIT_OK


def _counted(writes) -> str:
    """`restored N file(s)`, and `removed M file(s) patchkit had created` where a patch had added files."""
    removed = sum(1 for w in writes if w.after is None)
    restored = f"restored {len(writes) - removed} file(s)"
    return f"{restored}, removed {removed} file(s) patchkit had created" if removed else restored
