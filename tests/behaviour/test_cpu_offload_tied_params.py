"""SGLang's real OffloaderV1 forward hook, on the CPU, on a module whose dt_bias / A_log are tied
through SGLang's real RadixLinearAttention: before the patch the first forward raises
functional_call's ValueError, after it the forward gives the same output as without offload."""

from __future__ import annotations

from pathlib import Path

import pytest

from testing.behaviour import run_probe
from testing.cli import run

pytestmark = pytest.mark.behaviour

PROBE = Path(__file__).parent / "probe_offload_tied.py"
TIED = [["A_log", "attn.A_log"], ["attn.dt_bias", "dt_bias"]]


@pytest.mark.parametrize("version", ["0.5.14", "0.5.20"])
def test_offloaded_forward_with_tied_parameters(release, version):
    site = release(version, whole=True)
    before = run_probe(site, PROBE)
    assert before["sglang_file"].startswith(str(site))
    assert before["tied"] == TIED and before["hooked"]  # RadixLinearAttention re-registered both
    assert before["forward"].startswith("ValueError: functional_call got multiple values for keys")
    assert "which are tied" in before["forward"]

    assert run("apply", "--site-packages", site, "--only", "cpu-offload-tied-params").exit_code == 0
    after = run_probe(site, PROBE)
    assert after["tied"] == TIED and after["hooked"]
    assert after["forward"] == "ok" and after["same_as_without_offload"]


def test_0_5_21_needs_no_patch(release):
    """0.5.21's own helper (the shape the upstream probe recognises) runs the same forward."""
    site = release("0.5.21", whole=True)
    assert run("apply", "--site-packages", site, "--only", "cpu-offload-tied-params").exit_code == 0
    assert not (site / ".patchkit").exists()  # upstream-fixed: nothing written
    fixed = run_probe(site, PROBE)
    assert fixed["forward"] == "ok" and fixed["same_as_without_offload"]
