"""One launch line checked on two releases side by side (`bump --launch`): doctor's report on V0
and on V, and what changed between them: the flags of the line V removed or renamed, the defaults
V changed of flags the line leaves unset, the findings that appear or disappear, the budget."""

from __future__ import annotations

from patchkit.doctor import diagnose, release_code
from patchkit.doctor.gpu import Overrides
from patchkit.doctor import model as model_mod
from patchkit.doctor.launch import REMOVED_FLAGS, parse, split_command, written_model_path
from patchkit.doctor.report import Report
from patchkit.engine.bump import LaunchChange
from patchkit.releases.pristine import WheelSource

# What the budget comparison shows: (label, Budget field, how it is written).
BUDGET = (("KV tokens", "kv_tokens", "{:,}"), ("state slots", "state_slots", "{:,}"),
          ("max safe --mem-fraction-static", "recommended_mem_fraction_static", "{:.2f}"),
          ("KV bytes per token", "kv_bytes_per_token", "{:,}"))


def check_models(lines: list[list[str]]) -> None:
    """Each launch's model folder read as doctor reads it (a hub id, a missing folder, a bad config.json: exit 2,
    one line), before a release is downloaded or a patch judged; a line naming none is refused by `compare`."""
    for argv in lines:
        path = written_model_path(split_command(argv)[1])
        if path is not None:
            model_mod.load(path)


def compare(first: WheelSource, to: WheelSource, argv: list[str], overrides: Overrides) -> LaunchChange:
    """doctor on `first` (V0) and `to` (V) for one launch line, and the changes."""
    reports = [diagnose(source, argv, overrides) for source in (first, to)]
    _env, args = split_command(argv)
    tables = [release_code(source).flags for source in (first, to)]
    launches = [parse(args, table) for table in tables]
    old, new = launches
    renamed = [(flag, REMOVED_FLAGS[flag]) for flag in new.unknown if flag in REMOVED_FLAGS and flag not in old.unknown]
    renamed += [pair for pair in new.deprecated if pair not in old.deprecated]
    removed = [f"{flag}: not a flag of SGLang {to.version}" for flag in new.unknown
               if flag not in REMOVED_FLAGS and flag not in old.unknown]
    removed += [f"{flag}: {message}" for flag, message in new.refused if (flag, message) not in old.refused]
    given = {use.flag.dest for use in new.uses if use.flag is not None} | {
        use.flag.dest for use in old.uses if use.flag is not None}
    defaults = []
    for dest in sorted(tables[0].dests() & tables[1].dests() - given):
        before, after = tables[0].default(dest), tables[1].default(dest)
        if before is not None and after is not None and before != after:
            defaults.append((tables[1].names_for(dest)[0], repr(before), repr(after)))
    keys = [_findings(report, version) for report, version in zip(reports, (first.version, to.version))]
    appeared = [text for key, text in keys[1].items() if key not in keys[0]]
    disappeared = [text for key, text in keys[0].items() if key not in keys[1]]
    # A rule that found one thing on each release, said differently: changed, not gone and new.
    rules = [[key[:2] for key in found] for found in keys]
    once = {rule for rule in set(rules[0]) & set(rules[1]) if rules[0].count(rule) == rules[1].count(rule) == 1}
    changed = [(keys[0][old], keys[1][new]) for old in keys[0] for new in keys[1]
               if old[:2] == new[:2] and old[:2] in once and old != new]
    appeared = [text for text in appeared if text not in {n for _, n in changed}]
    disappeared = [text for text in disappeared if text not in {o for o, _ in changed}]
    return LaunchChange(line=tuple(argv), removed=tuple(removed), renamed=tuple(renamed), defaults=tuple(defaults),
                        appeared=tuple(appeared), disappeared=tuple(disappeared), changed=tuple(changed),
                        budget=tuple(_budget(reports[0], reports[1])),
                        errors=(sum(f.level == "error" for f in reports[0].findings),
                                sum(f.level == "error" for f in reports[1].findings)),
                        budget_note=_not_compared(reports[0], reports[1], first.version, to.version))


def _findings(report: Report, version: str) -> dict[tuple[str, str, str], str]:
    """{(level, rule, message with the release said as V): how it reads}: a finding is the same on
    both releases when only the release's name in it differs."""
    return {(f.level, f.rule, f.message.replace(version, "V")): f"{f.level} {f.rule}: {f.message}"
            for f in report.findings}


def _budget(old: Report, new: Report) -> list[tuple[str, str, str]]:
    rows = []
    for label, name, form in BUDGET:
        before, after = getattr(old.budget, name), getattr(new.budget, name)
        if before is None and after is None:
            continue
        rows.append((label, "?" if before is None else form.format(before), "?" if after is None else form.format(after)))
    return rows


def _not_compared(old: Report, new: Report, first: str, to: str) -> str:
    """Why the budget is not compared, in one line ("" where both releases computed it)."""
    before, after = old.budget.not_computed, new.budget.not_computed
    if before == after:
        return before or ""
    return "; ".join(f"on {version}: {why}" for version, why in ((first, before), (to, after)) if why)
