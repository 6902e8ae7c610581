from __future__ import annotations

import sys

from patchkit import output
from patchkit import verify as verify_mod
from patchkit.commands import report as render
from patchkit.commands.locate import locate
from patchkit.constants import EXIT_OK, EXIT_PLAN
from patchkit.errors import UsageError


def verify(site_packages: str | None, python: str | None, strict: bool, as_json: bool) -> int:
    if site_packages and python:
        raise UsageError("--site-packages and --python are mutually exclusive")
    target = verify_mod.interpreter_site(python) if python else locate(site_packages)
    # A fresh child of that environment: --python, else the venv owning the folder, else this one.
    report = verify_mod.verify(target, python or verify_mod.interpreter_for(target.site) or sys.executable)
    missing = report.not_applied() if strict else []
    ok = not report.failed and not missing
    if as_json:
        output.as_json({
            "sglang": render.sglang(target),
            "ok": ok,
            "checks": [c.to_dict() for c in report.checks],
            "patches": [s.to_dict() for s in report.statuses],
            "not_applied": [s.id for s in missing],
        })
        return EXIT_OK if ok else EXIT_PLAN
    render.header(target)
    for check in report.checks:
        output.line(f"  {check.result:<8} {check.name}" + (f"  ({check.detail})" if check.detail else ""))
    for s in missing:
        output.line(f"  {'failed':<8} patch {s.id} is {s.state}: this release needs it (run `patchkit apply`)")
    output.line("verified" if ok else "verification FAILED")
    return EXIT_OK if ok else EXIT_PLAN
