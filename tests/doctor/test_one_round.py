"""One round of advice reaches a clean launch (issue 46 items 1-3), on the field's launch shapes: the 4-bit
Qwen3.5-27B-like checkpoint with its MTP head on a 24 GB SM 8.9 card, NEXTN, --mem-fraction-static 0.9 on 0.5.23
(the issue's launch), and its neighbours. The launch line is edited by this file's own hand (test_fixes.applied)."""

from __future__ import annotations

import pytest

from patchkit.doctor.report import Finding, Report
from testing.doctor import GIB, model_folder, run
from tests.doctor.test_fixes import states_after

CARD = dict(gpus=1, gpu_memory=24.0, gpu_free=None, sm="8.9")  # the issue's --gpu-memory 24 --sm 8.9


@pytest.fixture(scope="module")
def q4(tmp_path_factory):
    """The Qwen3.8-27B geometry as a 16 GiB (4-bit) checkpoint with its MTP head (pristine releases count the
    draft's own 4.73 GiB of vocab tensors)."""
    return str(model_folder(tmp_path_factory.mktemp("models") / "qwen3.5-27b-4bit-mtp", total_size=16 * GIB))


def field_launch(model: str, *more: str) -> list[str]:
    return ["--model-path", model, "--speculative-algorithm", "NEXTN", "--mem-fraction-static", "0.9", *more]


def finding(report: Report, rule: str) -> Finding:
    found = [f for f in report.findings if f.rule == rule]
    assert len(found) == 1, (rule, [f.rule for f in report.findings])
    return found[0]


@pytest.mark.integration
def test_the_patch_that_clears_the_static_errors_is_their_first_fix(q4):
    """Item 1: budget-negative and mamba-slots-zero said "more TP ranks or a smaller checkpoint" with no
    machine-applicable fix, while `apply --only draft-lmhead-placeholder` alone clears both."""
    argv = field_launch(q4)
    report = run("0.5.23", argv, **CARD)
    states = dict(report_states(report))
    for rule in ("budget-negative", "mamba-slots-zero"):
        f = finding(report, rule)
        assert f.level == "error"
        assert f.command == ("patchkit", "apply", "--only", "draft-lmhead-placeholder"), (rule, f.fix)
    again = run("0.5.23", argv, states=states_after(states, finding(report, "budget-negative").command), **CARD)
    # Both errors are gone and none the launch did not have came (cuda-graph-capture is the launch's own: its
    # graphs do not fit at 0.9 either way, the fix set's smaller prefill chunk clears it).
    errors_before = {f.rule for f in report.findings if f.level == "error"}
    errors_after = {f.rule for f in again.findings if f.level == "error"}
    assert not {"budget-negative", "mamba-slots-zero"} & errors_after and errors_after <= errors_before, errors_after
    assert again.budget.draft_weights_bytes < 0.2 * GIB and again.budget.kv_tokens > 0


def report_states(report: Report) -> dict[str, str]:
    """The patch states the doctor read for 0.5.23's pristine install (what `patchkit status` says)."""
    from patchkit.doctor import patch_states
    from patchkit.store.target import find_in
    from testing.releases import pristine

    return patch_states(find_in(pristine(str(report.sglang["version"]))))

