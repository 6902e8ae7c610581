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

The printed fixes are one set (`one_set`): applied together, patches and flags, the launch is checked again and
must have no error and no warning it did not have. Fixes interact (two flags that each shrink the KV pool, a
`--context-length` sized before a patch changes the pool), so the doctor searches for that set: it applies the
findings' fixes together, and where the launch then has an error, a new warning or a warning whose fix is now
known, it adds those findings' own fixes with their figures as they are on that launch, and checks again (a few
rounds); where that does not settle it tries fewer fixes (without the infos', then the errors' alone, then an
error's alternatives). Each finding then prints its part of that set with the set's figures.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import replace
from typing import TYPE_CHECKING, Callable

from patchkit.doctor.launch import Launch, changed, written
from patchkit.doctor.report import Finding, Fix, Report
from patchkit.doctor.switches import DISABLED, switch_on, switched_on_by
from patchkit.base.errors import UsageError

if TYPE_CHECKING:
    from patchkit.doctor.run import Run
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


def kv_range(evaluate: Callable[[float], Budget], low: float, high: float,
             middle: Budget) -> tuple[int | None, int | None]:
    """The fewest and most KV tokens the launch starts with where the free memory at load is anywhere from `low` to
    `high` GiB (sampled every 0.01 GiB, both ends and the estimate's middle included), 0 where it does not start.
    Not the tokens at the two ends: the state pool's slots come in steps, so the middle may hold fewer than both
    ends, and an end whose state pool has no slot for a request does not start at all."""
    if middle.kv_tokens is None or middle.weights_bytes is None:
        return None, None  # no budget to carry the range through
    steps = max(1, round((high - low) / 0.01))
    found = [evaluate(low + (high - low) * i / steps) for i in range(steps + 1)] + [middle]
    tokens = [(b.kv_tokens or 0) if starts(b) else 0 for b in found]
    return min(tokens), max(tokens)


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
    """The patch states once `fix` is followed: the patches it applies, or switches back on, in force."""
    return {**states, **{pid: "applied" for pid in fix.patches if states.get(pid) in ("pending", "drifted", DISABLED)}}


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


SET_ROUNDS = 5  # rounds of checking the set again and adding what that launch's findings need


def _key(piece) -> str:
    return piece.flag.dest if piece.flag is not None else str(piece.name or piece.tokens[0])


def as_one(fixes: list[Fix], run: Run) -> Fix:
    """Fixes as one: each flag set by the last fix that sets it, every flag dropped that no later fix sets, and one
    `patchkit apply --only ...` for all their patches (the tree and --patches the run names)."""
    table = run.release.flags
    setting: dict[str, tuple[str, ...]] = {}
    remove: dict[str, None] = {}
    for fix in fixes:
        for piece in written(fix.remove, table):
            setting.pop(_key(piece), None)
            remove.update(dict.fromkeys(piece.tokens))
        for piece in written(fix.args, table):
            setting.pop(_key(piece), None)  # the latest setting goes last, as on a line
            setting[_key(piece)] = piece.tokens
    set_keys = set(setting)
    kept_remove = tuple(r for r in remove if not any(_key(p) in set_keys for p in written((r,), table)
                                                     if p.name is not None))
    patches = tuple(dict.fromkeys(p for fix in fixes for p in fix.patches))
    switched = tuple(p for p in patches if run.states.get(p) == DISABLED)
    applying = tuple(p for p in patches if p not in switched)
    every = {pid for pid, state in run.states.items() if state in ("pending", "drifted")}
    only = () if every and every <= set(applying) else tuple(a for p in applying for a in ("--only", p))
    command = tuple(run.naming.argv("apply", *only)) if applying else ()
    if switched:  # switched back on (SGLANG_PATCHKIT_DISABLE), then any `patchkit apply`: one shell line
        command = (*switch_on(run.environ, switched), *(("&&", *command) if command else ()))
    return Fix(args=tuple(t for tokens in setting.values() for t in tokens), remove=kept_remove, command=command,
               patches=patches)


def _agreeing(fix: Fix, whole: Fix, run: Run) -> Fix:
    """`fix` with each flag it sets at the value the whole set gives it."""
    table = run.release.flags
    final = {_key(p): p.tokens for p in written(whole.args, table)}
    args = tuple(t for p in written(fix.args, table) for t in final.get(_key(p), p.tokens))
    return replace(fix, args=args)


Settled = tuple[list[tuple[str, Fix]], Report, dict[Fix, Finding]]


def _settle(seed: list[tuple[str, Fix]], report: Report, run: Run, args: list[str],
            check_again: Rerun) -> Settled | None:
    """`seed` ((rule, fix) pairs) grown round by round with the fixes the launch, with the set applied, still asks
    for (each checked there, as `verified` checks them), until it has no error and no warning the launch did not
    have; None where no round gets there. With the members and that launch's report, the finding that asked for
    each added fix (on the launch with the fixes before it in place)."""
    before = Counter((f.rule, f.level) for f in report.findings)
    members = list(seed)
    asked: dict[Fix, Finding] = {}
    settled: Settled | None = None
    for _ in range(SET_ROUNDS):
        whole = as_one([fix for _rule, fix in members], run)
        try:
            again = check_again(changed(args, run.release.flags, whole.args, whole.remove),
                                _fixed_states(run.states, whole))
        except UsageError:
            return settled
        after = Counter((f.rule, f.level) for f in again.findings)
        clean = not again.has_errors and not any(
            n > before[key] for key, n in after.items() if key[1] == "warning")
        if clean:
            settled = (list(members), again, dict(asked))
        known = {fix for _rule, fix in members}
        wanted = [(f, fix) for f in again.findings if f.level in ("error", "warning") and f.applicable
                  for fix in (Fix(f.args, f.remove, f.command, _patches(f, run), f.note),)
                  if fix not in known and _one_fraction(fix, report, run)]
        if not wanted:
            return settled
        members += [(f.rule, fix) for f, fix in wanted]
        for f, fix in wanted:
            asked.setdefault(fix, f)
    return settled


RerunAt = Callable[[list[str], dict[str, str], float], Report]


def one_set(report: Report, run: Run, args: list[str], check_again: Rerun, check_at: RerunAt | None = None) -> Report:
    """The report whose printed fixes are one set that, applied together, leaves the launch no error and no new
    warning (`Report.fix_set`), each finding's fix at the set's figures; the report as it was where no set of its
    fixes does that (`fix_set` None). `check_again`: the doctor's report, fixes verified, of a launch line with
    those patch states; `check_at`: its findings with the free memory at load given (GiB), where the set is checked
    again across the estimate's range and re-sized to hold across it (`_cover`, `Report.fix_set_holds`)."""
    fixed = [(f, Fix(f.args, f.remove, f.command, _patches(f, run))) for f in report.findings if f.applicable]
    if not fixed:
        return report
    seeds = [[(f.rule, x) for f, x in fixed if f.level in levels] for levels in
             (("error", "warning", "info"), ("error", "warning"), ("error",))]
    for finding in report.findings:
        for alternative in (finding.alternatives if finding.level == "error" else ()):
            seeds.append([(f.rule, alternative if f is finding else x) for f, x in fixed if f.level != "info"])
    tried = []
    for seed in seeds:
        if not seed or seed in tried:
            continue
        tried.append(seed)
        found = _settle(seed, report, run, args, check_again)
        if found is not None:
            members, _again, asked = found
            covered = _cover(report, members, asked, run, args, check_at) if check_at is not None else None
            holds, short = None, None
            if covered is not None:
                members, asked, holds, short = covered
            whole = as_one([fix for _rule, fix in members], run)
            findings = _with_set([*report.findings, *_explaining(report, members, asked, run)], members, whole, run)
            order = {level: i for i, level in enumerate(("error", "warning", "info"))}
            return replace(report, findings=sorted(findings, key=lambda f: order.get(f.level, 3)), fix_set=whole,
                           fix_set_holds=holds, fix_set_short=short)
    return report


HOLD_STEP = 0.05  # GiB between the free-memory figures the set is checked again at (0.1 s a check)


def range_figures(low: float, high: float, middle: float) -> list[float]:
    """The free-memory figures (GiB) a set is checked at over an estimate's range: both ends, the middle and every
    HOLD_STEP between."""
    steps = max(1, round((high - low) / HOLD_STEP))
    return sorted({round(low + (high - low) * i / steps, 4) for i in range(steps + 1)} | {middle})


def _parts(held: list[tuple[float, bool]]) -> tuple[tuple[float, float], ...]:
    """Adjacent figures that hold (or that do not) merged into (first, last) parts."""
    parts: list[tuple[float, float]] = []
    last = False
    for free, ok in held:
        if ok and last:
            parts[-1] = (parts[-1][0], free)
        elif ok:
            parts.append((free, free))
        last = ok
    return tuple(parts)


Covered = tuple[list[tuple[str, Fix]], dict[Fix, Finding], tuple[tuple[float, float], ...], str | None]


def _cover(report: Report, members: list[tuple[str, Fix]], asked: dict[Fix, Finding], run: Run, args: list[str],
           check_at: RerunAt) -> Covered | None:
    """The set found at the free memory's middle figure, re-sized to hold across the estimate's range: checked at
    every `range_figures` figure (no error, no new warning); where it fails at one, the fixes the launch with the set
    applied asks for there (at the failing figure with the fewest KV tokens: a shorter --context-length, ...) take
    the place of the set's fixes of the same rule and flags, and the whole range is checked again (a few rounds).
    The KV pool does not grow steadily with the free memory (the state pool's slots come in steps), so the figure
    that asks the most need not be the lowest. Returns the members, the findings that asked for them, the parts of
    the range where the set holds and, where it does not hold across the whole range, one line saying which part it
    cannot cover and why; None where the free memory is not a range."""
    g = report.gpu
    if g.free_gib is None or g.free_low_gib is None or g.free_high_gib is None or g.free_low_gib >= g.free_high_gib:
        return None
    middle = g.free_gib
    figures = range_figures(g.free_low_gib, g.free_high_gib, middle)
    before = Counter((f.rule, f.level) for f in report.findings)

    def new_findings(again: Report) -> list[Finding]:
        after = Counter((f.rule, f.level) for f in again.findings)
        return [f for f in again.findings
                if f.level == "error" or (f.level == "warning" and after[(f.rule, f.level)] > before[(f.rule, f.level)])]

    best: tuple[int, Covered] | None = None
    for round_ in range(SET_ROUNDS):
        whole = as_one([fix for _rule, fix in members], run)
        line = changed(args, run.release.flags, whole.args, whole.remove)
        states = _fixed_states(run.states, whole)
        failing: list[tuple[float, Report | None]] = []
        held: list[tuple[float, bool]] = []
        for free in figures:
            if round_ == 0 and free == middle:
                held.append((free, True))  # where the set was found and checked
                continue
            try:
                again: Report | None = check_at(line, states, free)
            except UsageError:
                again = None
            ok = again is not None and not new_findings(again)
            held.append((free, ok))
            if not ok:
                failing.append((free, again))
        holds = _parts(held)
        middle_holds = dict(held)[middle]
        count = sum(ok for _free, ok in held)
        if middle_holds and (best is None or count > best[0]):
            best = (count, (list(members), dict(asked), holds, _short(failing, g.free_low_gib, g.free_high_gib,
                                                                       held, new_findings)))
        if not failing:
            break
        reports = [(free, again) for free, again in failing if again is not None]
        if not reports:
            break
        free, worst = min(reports, key=lambda p: (p[1].budget.kv_tokens or 0, p[0]))
        known = {fix for _rule, fix in members}
        wanted = [(f, fix) for f in new_findings(worst) if f.applicable
                  for fix in (Fix(f.args, f.remove, f.command, _patches(f, run), f.note),)
                  if fix not in known and _one_fraction(fix, report, run)]
        if not wanted:
            break
        for f, fix in wanted:
            at = next((i for i, (rule, old) in enumerate(members) if rule == f.rule and fix.args and not fix.command
                       and _keys(old, run) == _keys(fix, run)), None)
            if at is None:
                members.append((f.rule, fix))
            else:
                # The finding as the launch has it there without the fix it replaces (its message then speaks of
                # the launch's own figure, not of the replaced fix's: the 262,144-token context, not 41,187).
                f, fix = _without(members, at, f, fix, run, args, free, check_at)
                members[at] = (f.rule, fix)
            asked[fix] = replace(f, message=f"at {free:.2f} GiB free (of the estimated {g.free_low_gib:.2f}-"
                                            f"{g.free_high_gib:.2f} GiB), {f.message}")
    return None if best is None else best[1]


def _keys(fix: Fix, run: Run) -> set[str]:
    return {_key(p) for p in written(fix.args, run.release.flags)}


def _without(members: list[tuple[str, Fix]], at: int, finding: Finding, fix: Fix, run: Run, args: list[str],
             free: float, check_at: RerunAt) -> tuple[Finding, Fix]:
    """`finding` and its `fix` as the launch has them at `free` GiB with the set applied less its member `at` (the fix
    of the same rule and flags that `fix` replaces); as given where that launch does not ask for the same flags."""
    rest = as_one([x for i, (_rule, x) in enumerate(members) if i != at], run)
    try:
        again = check_at(changed(args, run.release.flags, rest.args, rest.remove), _fixed_states(run.states, rest), free)
    except UsageError:
        return finding, fix
    for f in again.findings:
        if f.rule == finding.rule and f.level == finding.level and f.applicable and not f.command:
            plain = Fix(f.args, f.remove, f.command, (), f.note)
            if _keys(plain, run) == _keys(fix, run):
                return f, plain
    return finding, fix


def _short(failing: list[tuple[float, Report | None]], low: float, high: float, held: list[tuple[float, bool]],
           new_findings: Callable[[Report], list[Finding]]) -> str | None:
    """One line: the parts of the range where the set does not hold, and why (the first failing figure's first new
    finding, errors first); None where it holds across the range."""
    if not failing:
        return None
    gaps = _parts([(free, not ok) for free, ok in held])
    where = ", ".join(f"{a:.2f}" if a == b else f"{a:.2f}-{b:.2f}" for a, b in gaps)
    free, again = failing[0]
    if again is None:
        why = "the launch with the set applied is refused there"
    else:
        found = sorted(new_findings(again), key=lambda f: f.level != "error")
        why = f"{found[0].rule}: {found[0].message}" if found else "no fix found"
    return f"no set of the fixes found holds at {where} GiB of the estimated {low:.2f}-{high:.2f} GiB: at {free:.2f} GiB, {why}"


def _explaining(report: Report, members: list[tuple[str, Fix]], asked: dict[Fix, Finding], run: Run) -> list[Finding]:
    """The findings that call for the set's fixes no finding of the launch calls for (no printed finding of that
    rule sets those flags): each as the launch with the fixes before it in place has it (a --context-length that
    only the patched launch's kv-below-context asks for; a --chunked-prefill-size the range's low end asks for
    where the launch's own finding of that rule sets a fraction), said so; a warning at most, since the launch as
    given does not have it."""
    printed = {(f.rule, frozenset(_keys(Fix(f.args), run))) for f in report.findings}
    out: list[Finding] = []
    for rule, fix in members:
        source = asked.get(fix)
        key = (rule, frozenset(_keys(fix, run)))
        if source is None or key in printed:
            continue
        printed.add(key)
        out.append(Finding(source.rule, "warning" if source.level == "error" else source.level,
                           f"with the fixes before it in place, {source.message}").fixed_by(
            Fix(source.args, source.remove, source.command, note=_set_note(source.note))))
    return out


def _patches(finding: Finding, run: Run) -> tuple[str, ...]:
    """The patches a finding's `patchkit apply` puts in place: those it names with --only, else every patch not in
    place."""
    command = finding.command
    if command[:1] in (("export",), ("unset",)):  # switched back on (SGLANG_PATCHKIT_DISABLE)
        return tuple(pid for pid in switched_on_by(run.environ, command) if run.states.get(pid) == DISABLED)
    only = tuple(command[i + 1] for i, token in enumerate(command[:-1]) if token == "--only")
    if only or not command:
        return only
    return tuple(pid for pid, state in run.states.items() if state in ("pending", "drifted"))


def _with_set(findings: list[Finding], members: list[tuple[str, Fix]], whole: Fix, run: Run) -> list[Finding]:
    """Each finding's fix as the set has it: at the set's figures, or, for a finding that had none, the fix the set
    added for its rule."""
    out = []
    for f in findings:
        if f.applicable:
            own = Fix(f.args, f.remove, f.command, note=f.note)
            fix = _agreeing(own, whole, run)
            out.append(f if fix == own else f.fixed_by(replace(fix, note=_set_note(fix.note))))
            continue
        added = next((fix for rule, fix in members if rule == f.rule and fix.args), None)
        if added is not None and f.level != "info":
            fix = _agreeing(added, whole, run)
            out.append(f.fixed_by(replace(fix, note=_set_note(fix.note), patches=())))
            continue
        out.append(f)
    return out


def _set_note(note: str) -> str:
    """A note for a fix whose figure is the one it has with the other fixes in place."""
    if note.endswith("with the other fixes in place"):
        return note
    return f"{note}; with the other fixes in place" if note else "with the other fixes in place"


def _one_fraction(fix: Fix, report: Report, run: Run) -> bool:
    """Whether `fix` sets no --mem-fraction-static other than the report's recommended one: a report advises one
    fraction, so the set takes no other (one found on the launch with the set applied is left out)."""
    rec = report.budget.recommended_mem_fraction_static
    return all(p.flag is None or p.flag.dest != "mem_fraction_static" or
               (rec is not None and p.values[:1] == (f"{rec:.2f}",))
               for p in written(fix.args, run.release.flags))
