"""Advice that works when followed: one recommended `--mem-fraction-static`, and every fix checked.

The recommended fraction is the highest (to 0.01) whose rest `(1 - f) x free` holds what the launch needs
outside the static pools (patchkit/doctor/non_static.py) and whose static budget still starts (KV tokens and,
on a hybrid model, state slots for at least one request): every rule that advises a fraction names this one, so
a report never holds two. KV tokens grow with the fraction, so no lower fraction keeps more of the context.

A rule proposes its fixes (`Finding.proposing`); before the report is printed each is applied to the launch
line (`launch.changed`: the flags set, every other spelling of them and the flags dropped taken out; a
`patchkit apply` puts its patches in place) and the launch is checked again. The first fix that clears its
finding without bringing an error the launch did not have is the one printed; where none does, the finding
says what it would take, with no machine-applicable fix.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import replace
from typing import TYPE_CHECKING, Callable

from patchkit.doctor.launch import Launch, changed
from patchkit.doctor.report import Finding, Fix, Report
from patchkit.base.errors import UsageError

if TYPE_CHECKING:
    from patchkit.doctor import Run
    from patchkit.doctor.budget import Budget

CAP = 0.99  # the highest fraction advised: SGLang takes up to 1, which leaves nothing outside the pools
INTEGRATED_CAP = 0.80  # a unified-memory GPU: the host's OS and the tokenizer processes need the rest
LOWEST = 0.05
STATIC_ERRORS = ("budget-negative", "mamba-slots-zero")


def with_fraction(launch: Launch, fraction: float) -> Launch:
    """The parsed launch with `--mem-fraction-static fraction` set."""
    return replace(launch, values={**launch.values, "mem_fraction_static": fraction},
                   explicit=launch.explicit | {"mem_fraction_static"})


def starts(b: Budget) -> bool:
    """The static budget lets the launch start: a KV pool, and state slots for at least one request."""
    if b.weights_bytes is None:
        return True  # not known: only the non-static side can be judged
    return not set(STATIC_ERRORS) & set(b.errors) and bool(b.kv_tokens) and (b.effective_max_running_requests or 0) > 0


def fits_outside(b: Budget) -> bool:
    """What runs outside the static pools fits in `(1 - f) x free`."""
    needed, available = b.non_static_needed_bytes, b.non_static_available_bytes
    return needed is None or available is None or needed <= available


def recommend_fraction(evaluate: Callable[[float], Budget], cap: float = CAP) -> float | None:
    """The highest fraction, from `cap` down in steps of 0.01, whose launch fits outside the static pools, if its
    static budget starts; None where the free memory is unknown or no fraction does both."""
    fraction = cap
    while fraction >= LOWEST:
        b = evaluate(fraction)
        if b.free_at_load_gib is None:
            return None
        if fits_outside(b):
            # A lower fraction only shrinks the static budget: this is the one chance for both.
            return fraction if starts(b) else None
        fraction = round(fraction - 0.01, 2)
    return None


Rerun = Callable[[list[str], dict[str, str]], Report]


def _fixed_states(states: dict[str, str], fix: Fix) -> dict[str, str]:
    return {**states, **{pid: "applied" for pid in fix.patches if states.get(pid) in ("pending", "drifted")}}


def _merged(first: Fix, then: tuple[Fix, ...]) -> Fix:
    """`first` with the fixes of the errors it brings applied too (one flag renamed into a combination the
    release refuses: the rename and what that combination needs)."""
    return Fix(args=first.args + tuple(a for fix in then for a in fix.args),
               remove=first.remove + tuple(r for fix in then for r in fix.remove),
               command=first.command or next((fix.command for fix in then if fix.command), ()),
               patches=first.patches + tuple(p for fix in then for p in fix.patches), note=first.note)


def _check(finding: Finding, fix: Fix, report: Report, run: Run, args: list[str], rerun: Rerun) -> tuple[bool, list[Finding]]:
    """(whether `fix` clears one finding of this rule and level and brings no error the launch did not have,
    the errors it brings)."""
    try:
        again = rerun(changed(args, run.release.flags, fix.args, fix.remove), _fixed_states(run.states, fix))
    except UsageError:
        return False, []  # e.g. a fix that dropped --model-path
    before = Counter((f.rule, f.level) for f in report.findings)
    after = Counter((f.rule, f.level) for f in again.findings)
    cleared = after[(finding.rule, finding.level)] < before[(finding.rule, finding.level)]
    brought = [f for f in again.findings if f.level == "error" and after[(f.rule, f.level)] > before[(f.rule, f.level)]]
    return cleared and not brought, brought if cleared else []


def works(finding: Finding, fix: Fix, report: Report, run: Run, args: list[str], rerun: Rerun) -> Fix | None:
    """`fix`, or `fix` with what the errors it brings need (one step), where that clears the finding without an
    error the launch did not have; None where neither does."""
    ok, brought = _check(finding, fix, report, run, args, rerun)
    if ok:
        return fix
    follow = tuple(f.options[0] for f in brought if f.options)
    if brought and len(follow) == len(brought):
        combined = _merged(fix, follow)
        if _check(finding, combined, report, run, args, rerun)[0]:
            return combined
    return None


def verified(report: Report, run: Run, args: list[str], rerun: Rerun) -> Report:
    """The report with each finding's fixes replaced by those of its proposals that work: the first is the fix,
    the others its alternatives."""
    checked = []
    for finding in report.findings:
        proposals = finding.options or ((Fix(finding.args, finding.remove, finding.command),)
                                        if finding.applicable else ())
        if not proposals:
            checked.append(finding)
            continue
        good = [fix for fix in (works(finding, p, report, run, args, rerun) for p in proposals) if fix is not None]
        checked.append(finding.with_fixes(tuple(dict.fromkeys(good))))
    return replace(report, findings=checked)
