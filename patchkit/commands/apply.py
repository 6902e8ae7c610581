from __future__ import annotations

import os
from dataclasses import replace

from patchkit.store import lock
from patchkit.commands import output
from patchkit.engine import planning
from patchkit.store import runtime_plugin as runtime, stale, transaction
from patchkit.store import state as state_mod
from patchkit.commands import report
from patchkit.commands.locate import APPLY_TARGET_OPTIONS, locate
from patchkit.base.constants import DEFAULT_LOCK_TIMEOUT, EXIT_OK
from patchkit.base.errors import is_environment_failure


def apply(
    site_packages: str | None = None,
    fetch: str | None = None,
    version: str | None = None,
    only: tuple[str, ...] = (),
    skip: tuple[str, ...] = (),
    dry_run: bool = False,
    force: bool = False,
    as_json: bool = False,
    source: str | None = None,
    python: str | None = None,
    lock_timeout: float = DEFAULT_LOCK_TIMEOUT,
) -> int:
    target = locate(site_packages, fetch, version, source=source, python=python, dry_run=dry_run,
                    options=APPLY_TARGET_OPTIONS)
    with report.interruptible(target) as progress:  # also while the report is printed
        try:
            return _apply(target, only, skip, dry_run, force, as_json, lock_timeout, progress)
        except planning.PatchesFailed as exc:
            if not as_json:  # every selected patch as judged, the failed one among them; then the error
                report.header(target)
                report.table(exc.statuses)
            raise


def _upgrade_state(target, state: state_mod.State) -> None:
    """Rewrite a schema-1 state as schema 2 (patch digests added, nothing else changes; one
    atomic replace under the run's lock). Where the tree cannot be written (a read-only mount),
    the apply still succeeds: the old state stays, and `status` keeps judging it by rendering."""
    try:
        state_mod.save(target.site, state)
    except OSError as exc:
        if not is_environment_failure(exc):
            raise
        output.note(f"could not record the patch digests in {state_mod.state_path(target.site)} "
                    f"({exc.strerror or exc}); `status` keeps checking those files by rendering them")


def _add_runtime_report(plan: planning.Plan) -> planning.Plan:
    """Nothing to apply, but the runtime report's files are missing (a tree patched by an older
    patchkit): add them. Where the tree cannot be written (a read-only mount) the apply still
    succeeds, as a no-op, with a note; the patched files are as they were."""
    try:
        transaction.commit(plan.target, list(plan.writes), plan.old_state, plan.new_state, plan.lost)
        return plan
    except OSError as exc:
        if not is_environment_failure(exc):
            raise
        output.note(f"could not add the runtime report to {plan.target.runtime_dir} ({exc.strerror or exc}); the "
                    "patched files are unchanged, but SGLang's processes will not say which patches they run")
        return replace(plan, writes=(), new_state=plan.old_state)


def _runtime_notes(plan: planning.Plan) -> None:
    """Where the runtime report (patchkit/store/runtime_plugin.py) will not speak: say so, and how to fix it."""
    if plan.new_state is None:
        return
    if not runtime.has_plugin_system(plan.target):
        output.note(f"SGLang {plan.target.version} has no plugin system ({runtime.PLUGINS_MODULE}): its processes "
                    f"cannot report which patches they run; `{plan.target.naming.command('verify')}` checks the files "
                    "(see docs/runtime.md)")
        return
    for note in (runtime.plugins_note(os.environ), runtime.disable_note(os.environ, plan.switchable)):
        if note:
            output.note(note)


def _apply(target, only, skip, dry_run, force, as_json, lock_timeout, progress: report.Progress) -> int:
    kept: tuple[str, ...] = ()
    recovery = transaction.Recovery()
    if dry_run:
        if state_mod.journal_path(target.site).exists():
            output.warn("an interrupted patchkit run is pending; the real apply will finish it first")
        plan = planning.plan_apply(target, only, skip, force)
    else:
        with lock.locked(target.site, lock_timeout, output.warn):
            recovery = transaction.recover(target, force)
            progress.recovered = recovery.finished
            report.discarded(stale.discard_stale(target), target)
            plan = planning.plan_apply(target, only, skip, force)
            if plan.changes_files and not plan.acted:
                plan = _add_runtime_report(plan)
            elif plan.changes_files:
                kept = transaction.commit(plan.target, list(plan.writes), plan.old_state, plan.new_state, plan.lost)
            elif plan.new_state is not plan.old_state and plan.new_state is not None:
                _upgrade_state(target, plan.new_state)
            progress.done = f"{len(plan.writes)} file(s) written"

    _runtime_notes(plan)
    acted = set(plan.acted)
    warnings = [*recovery.warnings, *plan.warnings]
    kept = (*recovery.kept, *kept)
    if as_json:
        output.as_json({
            "sglang": report.sglang(target),
            "dry_run": dry_run,
            "changed": plan.changes_files or recovery.finished,
            "recovered": recovery.finished,
            "patches": [
                {**s.to_dict(), "action": ("would apply" if dry_run else "applied") if s.id in acted else "none"}
                for s in plan.statuses
            ],
            "files": [w.rel for w in plan.writes],
            "overwritten": report.overwritten(plan.lost, kept),
            "diff": plan.diff() if dry_run else "",
            "warnings": warnings,
        })
        return EXIT_OK
    report.warnings(warnings)
    if dry_run:
        output.text(plan.diff())
        for rel in sorted(plan.lost):
            output.line(f"would overwrite {rel} (changed outside patchkit; a copy would be kept under .patchkit/)")
        output.line(f"dry run: {len(plan.writes)} file(s) would change; nothing written")
        return EXIT_OK
    report.header(target)
    report.table([replace(s, state="applied", detail="") if s.id in acted else s for s in plan.statuses])
    report.kept(target.site, plan.lost, kept)
    if recovery.finished:  # files moved into place before this run planned: never "no file changed"
        output.line(report.FINISHED_EARLIER)
    if not plan.changes_files:
        output.line("nothing else to do" if recovery.finished else "nothing to do: no file changed")
    elif not acted:
        output.line(f"nothing to apply; added the runtime report ({len(plan.writes)} file(s) in {plan.target.runtime_dir})")
    else:
        output.line(f"patched {len(plan.sglang_writes)} file(s)")
    return EXIT_OK
