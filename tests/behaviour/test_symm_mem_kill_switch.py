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
    site = release(version)
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
