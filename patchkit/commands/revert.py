from __future__ import annotations

from patchkit import engine, output, stale, transaction
from patchkit import state as state_mod
from patchkit.commands import report
from patchkit.commands.clean import clean_leftovers
from patchkit.commands.locate import locate
from patchkit.errors import NotFoundError
from patchkit.constants import EXIT_OK


def revert(site_packages: str | None, version: str | None, only: tuple[str, ...], force: bool, as_json: bool,
           source: str | None = None, python: str | None = None) -> int:
    try:
        target = locate(site_packages, None, version, source=source, python=python)
    except NotFoundError as exc:
        left = stale.orphans(list(exc.searched))  # SGLang uninstalled: its `.patchkit/` goes too
        if not left:
            raise
        return clean_leftovers(left, as_json)
    with state_mod.locked(target.site):
        transaction.recover(target)
        report.discard_stale(target)
        plan = engine.plan_revert(target, only, force)
        if plan.changes_files or plan.old_state != plan.new_state:
            transaction.commit(target, list(plan.writes), plan.old_state, plan.new_state)
    if as_json:
        output.as_json({
            "sglang": report.sglang(target),
            "reverted": list(plan.acted),
            "files": [w.rel for w in plan.writes],
            "warnings": list(plan.warnings),
        })
        return EXIT_OK
    report.warnings(plan.warnings)
    report.header(target)
    if not plan.acted:
        output.line("nothing to revert: patchkit has changed nothing here")
    for pid in plan.acted:
        output.line(f"  reverted        {pid}")
    if plan.writes:
        output.line(f"restored {len(plan.writes)} file(s)")
    return EXIT_OK
