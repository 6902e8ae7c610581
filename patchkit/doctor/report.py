"""Findings and the doctor's report: plain data, a dict for --json, lines for the terminal."""

from __future__ import annotations

from dataclasses import dataclass, field

from patchkit.doctor.budget import Budget
from patchkit.doctor.gpu import GIB, GpuFacts

LEVELS = ("error", "warning", "info")
MIB = 1 << 20


@dataclass(frozen=True)
class Fix:
    """One machine-applicable fix: launch flags to set (each followed by its values, replacing every spelling of
    that flag on the line), flags to drop with their values (or stray tokens), a command to run first (naming
    the tree it acts on) and the patches that command puts in place."""

    args: tuple[str, ...] = ()
    remove: tuple[str, ...] = ()
    command: tuple[str, ...] = ()
    patches: tuple[str, ...] = ()
    note: str = ""  # said after the change, in brackets

    @property
    def text(self) -> str:
        parts = [" ".join(self.command)] if self.command else []
        if self.args:
            parts.append(" ".join(self.args) + (f" in place of {' '.join(self.remove)}" if self.remove else ""))
        elif self.remove:
            parts.append("drop " + " ".join(self.remove))
        return "; ".join(parts) + (f" ({self.note})" if self.note else "")


@dataclass(frozen=True)
class Finding:
    """One finding. Its fix, where it is a change to the launch or a command to run first, is also
    machine-applicable: `args` (flags to set, each followed by its values, replacing every spelling of
    that flag on the line), `remove` (flags to drop with their values, or stray tokens) and `command`
    (argv of a command to run before the launch, naming the tree it acts on)."""

    rule: str
    level: str  # error: the launch will fail or crash; warning: runs, not as intended; info
    message: str  # one sentence, with the numbers behind it
    fix: str = ""  # what to do, in words: the exact flags (or command) where there are some
    args: tuple[str, ...] = ()
    remove: tuple[str, ...] = ()
    command: tuple[str, ...] = ()
    # The fixes a rule proposes, best first, and what to say where none of them clears the finding: the doctor
    # applies each to the launch, checks it again and keeps the first that works (patchkit/doctor/advice.py).
    options: tuple[Fix, ...] = field(default=(), compare=False, repr=False)
    otherwise: str = field(default="", compare=False, repr=False)
    alternatives: tuple[Fix, ...] = ()  # other fixes that were checked and work too
    note: str = field(default="", compare=False, repr=False)  # the fix's note (what its text ends with, bracketed)

    @classmethod
    def proposing(cls, rule: str, level: str, message: str, options: tuple[Fix | None, ...] | Fix | None,
                  otherwise: str = "") -> "Finding":
        """A finding whose fix is the first of `options` (None entries skipped) that works when applied."""
        found = tuple(o for o in (options if isinstance(options, tuple) else (options,)) if o is not None)
        if not found:
            return cls(rule, level, message, otherwise)
        return cls(rule, level, message, found[0].text, found[0].args, found[0].remove, found[0].command,
                   options=found, otherwise=otherwise, note=found[0].note)

    def with_fixes(self, fixes: tuple[Fix, ...]) -> "Finding":
        """This finding with `fixes` (checked ones): the first is its fix, the others its alternatives. None: the
        finding says what it would take, with no machine-applicable fix."""
        if not fixes:
            return Finding(self.rule, self.level, self.message,
                           self.otherwise or "no change to the launch line found that clears it")
        first = fixes[0]
        return Finding(self.rule, self.level, self.message, first.text, first.args, first.remove, first.command,
                       alternatives=fixes[1:], note=first.note)

    def fixed_by(self, fix: Fix) -> "Finding":
        """This finding with `fix` as its fix (its alternatives kept)."""
        return Finding(self.rule, self.level, self.message, fix.text, fix.args, fix.remove, fix.command,
                       alternatives=self.alternatives, note=fix.note)

    @property
    def applicable(self) -> bool:
        return bool(self.args or self.remove or self.command)

    def to_dict(self) -> dict:
        return {"rule": self.rule, "level": self.level, "message": self.message, "fix": self.fix,
                "fix_args": list(self.args), "fix_remove": list(self.remove), "fix_command": list(self.command),
                "alternatives": [{"fix": a.text, "fix_args": list(a.args), "fix_remove": list(a.remove),
                                  "fix_command": list(a.command)} for a in self.alternatives]}


@dataclass
class Report:
    sglang: dict
    gpu: GpuFacts
    budget: Budget
    findings: list[Finding] = field(default_factory=list)
    model: dict = field(default_factory=dict)
    # The findings' fixes as one set, checked together (patchkit/doctor/advice.py: no error, no new warning);
    # None where the report has no fix or no set of its fixes does that.
    fix_set: Fix | None = None
    # Where the free memory at load is an estimate: the parts of its range (GiB) over which the set holds, checked
    # every advice.HOLD_STEP GiB (advice._cover); None where the free memory is no range or there is no set.
    fix_set_holds: tuple[tuple[float, float], ...] | None = None
    # Where the set, re-sized, still does not hold across the whole range: one line naming the part it cannot
    # cover and why (advice._cover); None where it holds across it (or there is no range).
    fix_set_short: str | None = None

    @property
    def has_errors(self) -> bool:
        return any(f.level == "error" for f in self.findings)

    def to_dict(self) -> dict:
        return {
            "sglang": self.sglang,
            "gpu": self.gpu.to_dict(),
            "model": self.model,
            "budget": self.budget.to_dict(),
            "findings": [f.to_dict() for f in self.findings],
            "fix_set": None if self.fix_set is None else {
                "fix": self.fix_set.text, "fix_args": list(self.fix_set.args),
                "fix_remove": list(self.fix_set.remove), "fix_command": list(self.fix_set.command),
                "holds_free_gib": None if self.fix_set_holds is None else [list(p) for p in self.fix_set_holds],
                "short_of_range": self.fix_set_short},
        }


def gib(n: float | int | None) -> str:
    return "?" if n is None else f"{n / GIB:.2f} GiB"


def mib(n: float | int | None) -> str:
    return "?" if n is None else f"{n / MIB:.2f} MiB"


def lines(report: Report) -> list[str]:
    """The terminal rendering: the budget table of one GPU, then the findings."""
    b, g = report.budget, report.gpu
    out = [f"SGLang {report.sglang.get('version')} at {report.sglang.get('path')}"]
    gpu_bits = [f"{g.count or '?'} GPU(s)", f"{g.total_gib:.2f} GiB each" if g.total_gib else "memory unknown"]
    if g.sm:
        gpu_bits.append(f"SM {g.sm[0]}.{g.sm[1]}")
    if g.interconnect:
        gpu_bits.append(g.interconnect)
    if g.wsl:
        gpu_bits.append("WSL2")
    out.append("GPU: " + ", ".join(gpu_bits))
    out.append(f"Budget per GPU (TP {b.tp_size}):")
    rows: list[tuple[str, str]] = []
    free = None if b.free_at_load_gib is None else b.free_at_load_gib * GIB
    rows.append((f"free at weight load ({g.free_source})", gib(free)))
    if b.mem_fraction_static is not None:
        rows.append((f"mem-fraction-static ({b.mem_fraction_source})", f"{b.mem_fraction_static:.3f}"))
    rows.append(("- runtime slack (activations, graphs)", gib(b.slack_bytes)))
    rows.append(("- weights (estimate)" if b.weights_estimated else "- weights", gib(b.weights_bytes)))
    if b.draft_weights_bytes:
        rows.append(("- draft weights", gib(b.draft_weights_bytes)))
    if b.multimodal_reserve_bytes:
        rows.append(("- multimodal reserve", gib(b.multimodal_reserve_bytes)))
    if b.hybrid:
        rows.append((f"- state pool ({max(b.state_slots or 0, 0)} slots x {mib(b.state_slot_bytes)})", gib(b.state_pool_bytes)))
        if b.intermediate_state_bytes:
            rows.append(("- intermediate speculative state", gib(b.intermediate_state_bytes)))
        if b.replayssm_bytes:
            rows.append(("- ReplaySSM rings", gib(b.replayssm_bytes)))
    rows.append(("= KV pool", gib(b.kv_budget_bytes)))
    rows.append(("KV bytes per token", "?" if b.kv_bytes_per_token is None else f"{b.kv_bytes_per_token:,} B"))
    rows.append(("KV tokens", "?" if b.kv_tokens is None else f"{b.kv_tokens:,}"))
    if b.hybrid:
        rows.append(("state slots per running request", str(b.slots_per_request)))
    rows.append(("max running requests (effective)", "?" if b.effective_max_running_requests is None
                 else f"{b.effective_max_running_requests} (asked: {b.requested_max_running_requests}, {b.max_running_source})"))
    if b.non_static_needed_bytes is not None:
        rows.append(("outside the static pools: needed", gib(b.non_static_needed_bytes)))
        rows.append(("outside the static pools: available", gib(b.non_static_available_bytes)))
        safe = b.max_safe_mem_fraction_static
        rows.append(("max safe mem-fraction-static", f"{safe:.2f}" if safe is not None else
                     "none" if b.free_at_load_gib is not None else "?"))
    rows.append(("longest request (tokens)", "?" if b.max_request_tokens is None else f"{b.max_request_tokens:,}"))
    width = max(len(label) for label, _ in rows)
    out += [f"  {label:<{width}}  {value:>14}" for label, value in rows]
    out += [f"  note: {note}" for note in b.notes]
    for term in b.assumed:
        value, low, high = term["value"], term["low"], term["high"]
        figures = ("" if value is None else f" {value:.3f}" if isinstance(value, float) else
                   f" {gib(value)} ({low / GIB:.2f}-{high / GIB:.2f} GiB)")
        out.append(f"  assumed: {term['term']}{figures}: {term['why']}")
    if report.findings:
        out.append("Findings:")
        for f in report.findings:
            out.append(f"  {f.level:<7} {f.rule}: {f.message}")
            if f.fix:
                out.append(f"  {'':<7} fix: {f.fix}")
            out += [f"  {'':<7}  or: {a.text}" for a in f.alternatives]
        if report.fix_set is not None:
            where = ""
            holds = report.fix_set_holds
            if holds is not None and g.free_low_gib is not None and g.free_high_gib is not None:
                span = f"{g.free_low_gib:.2f}-{g.free_high_gib:.2f} GiB"
                where = (f", across the estimated free memory {span}" if holds == ((g.free_low_gib, g.free_high_gib),)
                         else f"; of the estimated free memory {span} only at " + ", ".join(
                             f"{a:.2f}" if a == b else f"{a:.2f}-{b:.2f}" for a, b in holds)
                         + " GiB (pass --gpu-free for the card's own figure)")
            out.append(f"All fixes at once (checked together: no error, no new warning{where}): {report.fix_set.text}")
            if report.fix_set_short is not None:
                out.append(f"  {report.fix_set_short}")
    else:
        out.append("No findings.")
    return out
