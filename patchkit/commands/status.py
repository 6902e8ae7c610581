from __future__ import annotations

from patchkit.engine import decide
from patchkit.commands import output
from patchkit.store import state as state_mod
from patchkit.commands import report
from patchkit.commands.locate import locate
from patchkit.base.constants import EXIT_OK, EXIT_PLAN


def status(site_packages: str | None = None, version: str | None = None, as_json: bool = False,
           source: str | None = None, python: str | None = None) -> int:
    target = locate(site_packages, None, version, source=source, python=python)
    statuses, warnings = decide.status(target)
    if state_mod.journal_path(target.site).exists():
        from patchkit.store import lock

        holder = lock.lock_holder(target.site)
        warnings.append(f"a patchkit run is in progress ({holder})" if holder else
                        f"an interrupted patchkit run is pending; `{target.naming.command('apply')}` or "
                        f"`{target.naming.command('revert')}` finishes it")
    # A patch whose own code raised is a failure of the run (exit 1); its row says which.
    code = EXIT_PLAN if any(s.crashed for s in statuses) else EXIT_OK
    if as_json:
        output.as_json({"sglang": report.sglang(target), "patches": [s.to_dict() for s in statuses], "warnings": warnings})
        return code
    report.warnings(warnings)
    report.header(target)
    report.table(statuses)
    return code
