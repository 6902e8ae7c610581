"""The kill switch in a spawned child process, on SGLang's real triton_symm_mem_ag and
torch_symm_mem modules (CPU; the TP group and CUDA device are stood in)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from testing.behaviour import run_probe
from testing.cli import run

pytestmark = pytest.mark.behaviour

PROBE = Path(__file__).parent / "probe_symm_mem.py"
SWITCH = "patchkit's symm-mem kill switch"


def probe(site, **env):
    saved = {key: os.environ.get(key) for key in env}
    os.environ.update(env)
    try:
        return run_probe(site, PROBE)
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


@pytest.mark.parametrize("version", ["0.5.15", "0.5.23"])
def test_kill_switch_in_a_spawned_child(release, version):
    site = release(version, whole=True)
    before = probe(site)
    assert SWITCH not in before["empty"] and SWITCH not in " ".join(before["build_warnings"])
    assert before["enable_torch_symm_mem"] == "constructed"

    assert run("apply", "--site-packages", site, "--only", "symm-mem-kill-switch").exit_code == 0
    on = probe(site)
    assert on["child_exitcode"] == 0
    assert not on["torch_loaded_at_start"]  # nothing imports torch at interpreter start
    for call in ("empty", "rendezvous"):
        assert on[call].startswith("RuntimeError: torch symmetric memory is off") and SWITCH in on[call]
    assert on["build"] == "None"  # _build() falls back to NCCL ...
    assert any(SWITCH in w for w in on["build_warnings"])  # ... because of the switch
    assert on["enable_torch_symm_mem"].startswith("RuntimeError: --enable-torch-symm-mem")
    assert "SGLANG_PATCH_DISABLE_SYMM_MEM=0" in on["enable_torch_symm_mem"]

    off = probe(site, SGLANG_PATCH_DISABLE_SYMM_MEM="0")
    assert SWITCH not in off["empty"] and SWITCH not in off["rendezvous"]
    assert not any(SWITCH in w for w in off["build_warnings"])
    assert off["enable_torch_symm_mem"] == "constructed"


AUTO_PROBE = Path(__file__).parent / "probe_symm_mem_auto.py"
ALLOWED_NVSWITCH = "auto: 8 GPU(s) with multicast and peer access, not WSL2"


def test_auto_mode_decides_from_device_facts(release):
    """The default (auto) blocks only where the rendezvous would crash; device facts stood in."""
    site = release("0.5.23", whole=True)
    assert run("apply", "--site-packages", site, "--only", "symm-mem-kill-switch").exit_code == 0
    report = run_probe(site, AUTO_PROBE)
    assert report["sglang_file"].startswith(str(site))
    expected = {
        "nvswitch_auto": "",
        "nvswitch_explicit_auto": "",
        "pcie_auto": "auto: GPU 0 has no multicast support",
        "no_peer_auto": "auto: GPU 0 has no peer access to GPU 1",
        "wsl2_auto": "auto: WSL2 host",
        "no_cuda_yet_auto": "auto: no initialised CUDA device whose facts could be read",
        "nvswitch_forced_on": "SGLANG_PATCH_DISABLE_SYMM_MEM=1",
        "pcie_forced_off": "",
    }
    for name, reason in expected.items():
        case = report[name]
        assert case["blocked"] == reason, name
        assert len(case["log"]) == 1, (name, case["log"])  # one line, however often it is asked
        if reason:
            assert case["log"][0].startswith("patchkit symm-mem-kill-switch: torch symmetric memory blocked")
            assert reason in case["log"][0]
            assert case["empty"].startswith("RuntimeError: torch symmetric memory is off") and SWITCH in case["empty"]
            assert reason in case["empty"]
            assert case["enable_torch_symm_mem"].startswith("RuntimeError: --enable-torch-symm-mem")
            assert "SGLANG_PATCH_DISABLE_SYMM_MEM=0" in case["enable_torch_symm_mem"]
        else:
            assert "torch symmetric memory allowed" in case["log"][0], name
            assert SWITCH not in case["empty"]  # torch's own empty ran
            assert case["enable_torch_symm_mem"] == "constructed"
    assert ALLOWED_NVSWITCH in report["nvswitch_auto"]["log"][0]
    assert report["nvswitch_auto"]["peer_queries"] == 8 * 7  # every pair of visible GPUs
    assert "SGLANG_PATCH_DISABLE_SYMM_MEM=0" in report["pcie_forced_off"]["log"][0]
    for name in ("wsl2_auto", "no_cuda_yet_auto", "nvswitch_forced_on"):
        assert report[name]["peer_queries"] == 0, name  # decided without reading (or initialising) devices
