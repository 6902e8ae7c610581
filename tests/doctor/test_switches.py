"""A patch switched off at run time (issue 46 item 1, "or switching one on"): an applied patch that the launch's
SGLANG_PATCHKIT_DISABLE lists takes the release's own path where the launch runs, so the doctor counts it off, and
switching it back on is the first fix of the errors it clears, machine-applicable and checked like the others. On
the issue's launch (tests/doctor/test_one_round.py: the 4-bit Qwen3.5-27B-like checkpoint with its MTP head, NEXTN,
--mem-fraction-static 0.9, 24 GB SM 8.9, 0.5.23) with draft-lmhead-placeholder applied."""

from __future__ import annotations

import pytest

from patchkit.doctor.report import Report
from testing.doctor import GIB, model_folder, run
from tests.doctor.test_fixes import applied, states_after
from tests.doctor.test_one_round import CARD, field_launch, finding

STATIC = ("budget-negative", "mamba-slots-zero")
PATCH = "draft-lmhead-placeholder"
OTHER = "fp8-kv-triton-sm89"  # switched off too, and the launch does not depend on it


@pytest.fixture(scope="module")
def q4(tmp_path_factory):
    return str(model_folder(tmp_path_factory.mktemp("models") / "qwen3.5-27b-4bit-mtp", total_size=16 * GIB))


@pytest.fixture(scope="module")
def states() -> dict[str, str]:
    """0.5.23's pristine patch states with the patch (and OTHER) applied."""
    from patchkit.doctor import patch_states
    from patchkit.store.target import find_in
    from testing.releases import pristine

    return {**patch_states(find_in(pristine("0.5.23"))), PATCH: "applied", OTHER: "applied"}


def errors(report: Report) -> set[str]:
    return {f.rule for f in report.findings if f.level == "error"}


@pytest.mark.integration
@pytest.mark.parametrize("listed, then", [
    (PATCH, ("unset", "SGLANG_PATCHKIT_DISABLE")),
    (f"{OTHER}, {PATCH}", ("export", f"SGLANG_PATCHKIT_DISABLE={OTHER}"))])
def test_a_patch_switched_off_counts_off_and_switching_it_on_is_the_fix(q4, states, listed, then):
    """Before, the budget counted the applied patch as in force whatever SGLANG_PATCHKIT_DISABLE said: the draft
    without its own vocab tensors, no static error, where the server would load them and not start."""
    argv = field_launch(q4)
    on = run("0.5.23", argv, states=states, **CARD)
    assert not set(STATIC) & errors(on) and on.budget.draft_weights_bytes < 0.2 * GIB
    off = run("0.5.23", argv, states=states, environ={"SGLANG_PATCHKIT_DISABLE": listed}, **CARD)
    assert set(STATIC) <= errors(off), errors(off)
    assert off.budget.draft_weights_bytes > 4 * GIB  # the draft's own embedding and lm_head count again
    for rule in STATIC:
        assert finding(off, rule).command == then, (rule, finding(off, rule).fix)
    [said] = [f for f in off.findings if f.rule == "patch-needed" and PATCH in f.message]
    assert said.message.startswith(f"patchkit patch {PATCH} is applied in this SGLang but switched off by the "
                                   f"launch's SGLANG_PATCHKIT_DISABLE"), said.message
    assert said.command == then, said.fix
    # Followed by this test's own hand: the launch's environment without the patch's id.
    rest = then[1].partition("=")[2] if then[0] == "export" else ""
    again = run("0.5.23", argv, states=states, environ={"SGLANG_PATCHKIT_DISABLE": rest} if rest else {}, **CARD)
    assert not set(STATIC) & errors(again) and errors(again) <= errors(off), errors(again)
    # The printed set switches it on (only its id comes off the list), then applies the pending patches the set
    # takes (one shell line, `&&`), then sets the flags; followed by hand, the launch has no error.
    assert off.fix_set is not None and off.fix_set.command[:2] == then, off.fix_set
    command = off.fix_set.command
    apply = command[command.index("&&") + 1:] if "&&" in command else ()
    assert apply[:2] in ((), ("patchkit", "apply")) and PATCH not in apply, command
    after = run("0.5.23", applied(argv, off.fix_set.args, off.fix_set.remove),
                states=states_after(states, apply) if apply else states,
                environ={"SGLANG_PATCHKIT_DISABLE": rest} if rest else {}, **CARD)
    assert not errors(after), [(f.rule, f.message) for f in after.findings if f.level == "error"]


@pytest.mark.integration
def test_a_switch_on_the_pasted_line_counts_and_a_patch_that_cannot_be_switched_stays(q4, states):
    """The launch's environment is the user's shell with the pasted line's own `NAME=value` pairs over it; a patch
    without the switch (eagle3-capture-hook) is in force whatever the variable lists."""
    line = ["SGLANG_PATCHKIT_DISABLE=draft-lmhead-placeholder", "python", "-m", "sglang.launch_server",
            *field_launch(q4)]
    off = run("0.5.23", line, states=states, **CARD)
    assert set(STATIC) <= errors(off)
    from patchkit.doctor import switches

    assert switches.with_switches({"eagle3-capture-hook": "applied", PATCH: "applied", OTHER: "pending"},
                                  {"SGLANG_PATCHKIT_DISABLE": f"eagle3-capture-hook,{PATCH},{OTHER}"}) == {
        "eagle3-capture-hook": "applied", PATCH: "disabled", OTHER: "pending"}
