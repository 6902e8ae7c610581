from __future__ import annotations

import os
import sys
from pathlib import Path

from patchkit.commands import output
from patchkit.store import runtime_plugin as runtime
from patchkit.runtime import server_report
from patchkit.runtime import verify as verify_mod
from patchkit.commands import report as render
from patchkit.commands.locate import locate
from patchkit.engine import patch_status
from patchkit.base.constants import EXIT_OK, EXIT_PLAN
from patchkit.base.errors import UsageError
from patchkit.store.naming import Naming
from patchkit.store.target import SITE, Target, interpreter, interpreter_for


def verify(site_packages: str | None, python: str | None, strict: bool, as_json: bool,
           source: str | None = None, allow_skipped: bool = False, url: str | None = None,
           expect_from: str | None = None) -> int:
    if url is not None:
        given = [flag for flag, value in (("--site-packages", site_packages), ("--source", source),
                                          ("--python", python), ("--strict", strict),
                                          ("--allow-skipped", allow_skipped)) if value]
        if given:
            raise UsageError(f"--url audits a running server: {', '.join(given)} cannot go with it")
        return verify_url(url, expect_from, as_json)
    if expect_from is not None:
        raise UsageError("--expect-from goes with --url")
    target = locate(site_packages, source=source, python=python)
    note = runtime.plugins_note(os.environ)
    if note:
        output.note(note)
    report = verify_mod.verify(target, _interpreter(target, site_packages, python))
    pending = report.not_applied()
    missing = pending if strict else []
    skipped = [c for c in report.checks if c.result == verify_mod.SKIPPED]
    refused_skips = skipped if strict and not allow_skipped else []
    ok = not report.failed and not missing and not refused_skips
    # "verified" only when there was something to check and every check counted ran.
    verified = ok and bool(report.checks) and not skipped and not pending
    summary = _summary(report, pending, skipped, ok, verified, strict, allow_skipped)
    if as_json:
        output.as_json({
            "sglang": render.sglang(target),
            "ok": ok,
            "verified": verified,
            "summary": summary,
            "checks": [c.to_dict() for c in report.checks],
            "skipped": [c.name for c in skipped],
            "patches": [s.to_dict() for s in report.statuses],
            "not_applied": [s.id for s in pending],
        })
        return EXIT_OK if ok else EXIT_PLAN
    render.header(target)
    for check in report.checks:
        output.line(f"  {check.result:<8} {check.name}" + (f"  ({check.detail})" if check.detail else ""))
    for s in pending:
        result = "failed" if strict else "pending"
        output.line(f"  {result:<8} patch {s.id} is {s.state}: this release needs it ({next_step(s, target.naming)})")
    output.line(summary)
    return EXIT_OK if ok else EXIT_PLAN


def next_step(status: patch_status.PatchStatus, named: Naming) -> str:
    """The command that puts a patch this release needs in place, for the state it is in: `apply`
    refuses a drifted file (exit 4) without --force, and cannot plan a failed patch."""
    if status.state == patch_status.DRIFTED:
        return (f"`{named.command('diff')}` shows the outside change; `{named.command('apply', '--force')}` "
                "overwrites it, keeping a copy")
    if status.state == patch_status.FAILED:
        return f"`{named.command('status')}` says why; `{named.command('apply', '--skip', status.id)}` applies the others"
    return f"run `{named.command('apply')}`"


def _interpreter(target: Target, site_packages: str | None, python: str | None) -> str:
    """A fresh child of that environment: --python, else the venv owning the folder named with
    --site-packages (an editable install's checkout lies outside its venv: never look there),
    else the venv owning a plain site-packages found, else this interpreter."""
    if python:
        return interpreter(python)
    if site_packages:
        owner = interpreter_for(Path(os.path.abspath(site_packages)))
    else:
        owner = interpreter_for(target.site) if target.kind == SITE else None
    return owner or sys.executable


def _summary(report: verify_mod.Report, pending: list, skipped: list, ok: bool, verified: bool, strict: bool,
             allow_skipped: bool) -> str:
    ran = sum(1 for c in report.checks if c.result != verify_mod.SKIPPED)
    counts = f"{ran} check(s) ran, {len(skipped)} skipped, {len(report.failed)} failed"
    if verified:
        return f"verified: {counts}"
    if not ok:
        reasons = []
        if report.failed:
            reasons.append(f"{len(report.failed)} check(s) failed")
        if strict and pending:
            reasons.append(f"{len(pending)} needed patch(es) not applied")
        if strict and skipped and not allow_skipped:
            reasons.append(f"{len(skipped)} check(s) could not run (--allow-skipped accepts that)")
        return f"verification FAILED: {'; '.join(reasons)} ({counts})"
    if not report.checks:
        what = f"; {len(pending)} patch(es) this release needs are not applied" if pending else ""
        return f"NOT verified: patchkit has patched nothing here, nothing was checked{what}"
    parts = []
    if skipped:
        parts.append(f"{len(skipped)} check(s) could not run here (listed as skipped)")
    if pending:
        parts.append(f"{len(pending)} patch(es) this release needs are not applied")
    return f"NOT fully verified: {'; '.join(parts)} ({counts})"


def verify_url(url: str, expect_from: str | None, as_json: bool) -> int:
    """A running server's runtime report against what should be there, per DP rank."""
    ranks, expected, where = server_report.audit(url, expect_from)
    ok = all(not rank.failed for rank in ranks)
    note = runtime.plugins_note(os.environ)
    if as_json:
        output.as_json({
            "url": where,
            "expected_from": expected.source,
            "expected": expected.digests,
            "ok": ok,
            "ranks": [rank.to_dict() for rank in ranks],
            "notes": [note] if note else [],
        })
        return EXIT_OK if ok else EXIT_PLAN
    if note:
        output.note(note)
    output.line(f"{where}: expecting {len(expected.digests)} patch(es), {expected.source}")
    for rank in ranks:
        name = f"dp{rank.dp_rank}" + (f" tp{rank.tp_rank}" if rank.tp_rank is not None else "")
        pid = f" pid {rank.pid}" if rank.pid is not None else ""
        verdict = "ok" if not rank.failed else "FAILED"
        output.line(f"  {name}{pid} (SGLang {rank.sglang or '?'}): {verdict}, {len(rank.active)} patch(es) active")
        for finding in rank.findings:
            output.line(f"    {finding.problem:<9} {finding.patch or '-'}: {finding.detail}")
    failed = sum(1 for rank in ranks if rank.failed)
    output.line(f"server verified: {len(ranks)} rank(s) run the expected patches" if ok else
                f"server verification FAILED: {failed} of {len(ranks)} rank(s) differ from what is expected")
    return EXIT_OK if ok else EXIT_PLAN
