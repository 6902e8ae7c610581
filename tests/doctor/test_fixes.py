"""Advice is a fixed point (issue 33): every fix the doctor prints, applied to the launch line the way a user
would apply it, gives a launch on which the doctor reports no error; a report advises one --mem-fraction-static,
and following it, the doctor advises the same again. Checked over a grid of cards, releases and launch shapes;
the launch line is edited here by this file's own hand (`applied`), not by the doctor's helpers."""

from __future__ import annotations

from collections import Counter

import pytest

from patchkit.doctor.report import Finding, Report
from testing.doctor import GIB, model_folder, run

CARDS = {
    "24 GB SM 8.9": dict(gpus=1, gpu_memory=23.99, gpu_free=23.0, sm="8.9"),
    "32 GB SM 12.0": dict(gpus=1, gpu_memory=31.36, gpu_free=30.4, sm="12.0"),
    "4x24 GB PCIe SM 8.6": dict(gpus=4, gpu_memory=23.99, gpu_free=23.0, sm="8.6", interconnect="pcie"),
    "80 GB SM 9.0, free memory estimated": dict(gpus=1, gpu_memory=80.0, gpu_free=None, sm="9.0"),
}
SHAPES = {
    "the release's default fraction": (),
    "--mem-fraction-static 0.72": ("--mem-fraction-static", "0.72"),
    "--mem-fraction-static 0.96": ("--mem-fraction-static", "0.96"),
    "NEXTN, no --max-running-requests": ("--speculative-algorithm", "NEXTN", "--speculative-draft-model-path", "{model}"),
    "TP 2, 64 requests, 128k context": ("--tp-size", "2", "--max-running-requests", "64", "--context-length", "131072"),
    "fp8 KV on triton, a typo": ("--kv-cache-dtype", "fp8_e4m3", "--attention-backend", "triton",
                                 "--mem-fraction-statc", "0.9"),
}
RELEASES = ["0.5.12", "0.5.17", "0.5.19", "0.5.23"]


def applied(argv: list[str], args: tuple[str, ...], remove: tuple[str, ...]) -> list[str]:
    """The launch line edited as a user would: each flag named in `remove`, and each flag `args` sets, taken out
    with the values that follow it; then `args` appended."""
    setting = {token for token in args if token.startswith("--")}
    dropping = set(remove) | setting
    out, skipping = [], False
    for token in argv:
        name = token.split("=", 1)[0]
        if token.startswith("--"):
            skipping = name in dropping
            if skipping:
                continue
        elif skipping or token in remove:
            continue
        out.append(token)
    return out + list(args)


def states_after(states: dict[str, str], command: tuple[str, ...]) -> dict[str, str]:
    """What `patchkit apply [--only X ...]` leaves: the patches it names (all pending ones without --only)
    applied."""
    only = {command[i + 1] for i, token in enumerate(command) if token == "--only"}
    return {pid: "applied" if state == "pending" and (not only or pid in only) else state
            for pid, state in states.items()}


def own(report: Report) -> Counter:
    """The findings of the launch as given, by rule and level: not those printed to explain a fix of the set, which
    the launch has only with the fixes before it in place."""
    return Counter((f.rule, f.level) for f in report.findings if "with the fixes before it in place" not in f.message)


def errors(report: Report) -> Counter:
    return Counter(f.rule for f in report.findings if f.level == "error")


def fractions(report: Report) -> set[str]:
    """Every --mem-fraction-static value the report's fixes (and their alternatives) advise (a flag-* fix that
    renames the launch's own --mem-fraction-static keeps its value: not advice)."""
    found = set()
    for f in report.findings:
        if f.rule.startswith("flag-"):
            continue
        for args in (f.args, *(a.args for a in f.alternatives)):
            found |= {args[i + 1] for i, token in enumerate(args[:-1]) if token == "--mem-fraction-static"}
    return found


@pytest.fixture(scope="module")
def q4(tmp_path_factory):
    """The Qwen3.8-27B geometry as a 16 GiB (4-bit) checkpoint: the field's 24-32 GB cards."""
    return str(model_folder(tmp_path_factory.mktemp("models") / "qwen3.8-27b-4bit", total_size=16 * GIB))


@pytest.mark.integration
@pytest.mark.parametrize("version", RELEASES)
def test_every_fix_applied_gives_a_launch_with_no_error(version, q4):
    from patchkit.doctor import patch_states
    from patchkit.store.target import find_in
    from testing.releases import pristine

    states = patch_states(find_in(pristine(version)))
    checked = 0
    for card_name, card in CARDS.items():
        for shape_name, shape in SHAPES.items():
            argv = ["--model-path", q4, *(t.format(model=q4) for t in shape)]
            report = run(version, argv, states=states, **card)
            where = f"{version}, {card_name}, {shape_name}"
            advised = fractions(report)
            assert len(advised) <= 1, (where, advised)  # one recommended fraction, never two
            if advised:
                assert advised == {f"{report.budget.recommended_mem_fraction_static:.2f}"}, where
            for finding in report.findings:
                assert "<" not in finding.fix and " N " not in f" {finding.fix} ", (where, finding)
                for fix in (finding, *finding.alternatives):
                    if not (fix.args or fix.remove or fix.command):
                        continue
                    if "with the other fixes in place" in (fix.fix if isinstance(fix, Finding) else fix.text):
                        continue  # its figure is the one it has in the report's fix set, checked below as one

                    again = run(version, applied(argv, fix.args, fix.remove),
                                states=states_after(states, fix.command), **card)
                    before, after = own(report), own(again)
                    key = (finding.rule, finding.level)
                    assert after[key] < before[key], (where, finding.rule, fix.fix if hasattr(fix, "fix") else fix.text)
                    new = [rule for rule, n in errors(again).items() if n > errors(report)[rule]]
                    assert not new, (where, finding.rule, new)
                    checked += 1
            # The report's fix set (issue 46 item 3), applied by this file's hand: no error, no new warning.
            if report.fix_set is not None:
                whole = report.fix_set
                again = run(version, applied(argv, whole.args, whole.remove),
                            states=states_after(states, whole.command), **card)
                assert not again.has_errors, (where, whole.text)
                # The launch's own findings (not those a report prints to explain a fix of its set: advice.one_set).
                before, after = own(report), own(again)
                assert not [k for k, n in after.items() if k[1] == "warning" and n > before[k]], (where, whole.text)
            # All the error findings' fixes together: no error left.
            if report.has_errors and all(f.args or f.remove or f.command for f in report.findings if f.level == "error"):
                fixed, fixed_states = list(argv), dict(states)
                for f in (f for f in report.findings if f.level == "error"):
                    fixed = applied(fixed, f.args, f.remove)
                    fixed_states = states_after(fixed_states, f.command)
                assert not run(version, fixed, states=fixed_states, **card).has_errors, where
            # Following the advised fraction, the doctor advises the same one (a fixed point).
            if advised:
                fraction = next(iter(advised))
                again = run(version, applied(argv, ("--mem-fraction-static", fraction), ()), states=states, **card)
                assert f"{again.budget.recommended_mem_fraction_static:.2f}" == fraction, where
                assert fractions(again) <= {fraction}, where
                assert not {"budget-negative", "mamba-slots-zero", "non-static-short"} & {f.rule for f in again.findings}, where
    assert checked > 50  # the grid really exercises fixes


@pytest.mark.integration
def test_the_field_trap_at_0_72_gets_a_fraction_that_works(q4):
    """Issue 33: at the default fraction the report said "raise --mem-fraction-static" while a warning said
    "fix: --mem-fraction-static 0.72", and 0.72 gave budget-negative with 0 KV tokens. Now one fraction is
    advised, the highest that leaves the non-static need, and at it the launch starts."""
    card = CARDS["24 GB SM 8.9"]
    report = run("0.5.19", ["--model-path", q4, "--mem-fraction-static", "0.72"], **card)
    rec = report.budget.recommended_mem_fraction_static
    assert rec is not None and 0.72 < rec
    errors_at = [f for f in report.findings if f.level == "error"]
    assert errors_at and all(f.args == ("--mem-fraction-static", f"{rec:.2f}") for f in errors_at
                             if f.rule in ("budget-negative", "mamba-slots-zero"))
    followed = run("0.5.19", ["--model-path", q4, "--mem-fraction-static", f"{rec:.2f}"], **card)
    assert not followed.has_errors and followed.budget.kv_tokens > 0
    assert "non-static-short" not in {f.rule for f in followed.findings}
