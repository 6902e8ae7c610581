"""GPU facts: nvidia-smi's answer, and the flags that override it."""

from __future__ import annotations

import os
import stat

import pytest

from patchkit.doctor import free_memory, gpu

SMI = """#!/bin/sh
if [ "$1" = "topo" ]; then
  printf '\\tGPU0\\tGPU1\\nGPU0\\t X \\tPHB\\nGPU1\\tPHB\\t X \\n'
else
  printf 'NVIDIA GeForce RTX 4090, 24564, 24000, 8.9\\nNVIDIA GeForce RTX 4090, 24564, 23000, 8.9\\n'
fi
"""


def _fake_smi(tmp_path, monkeypatch, script=SMI):
    exe = tmp_path / "nvidia-smi"
    exe.write_text(script)
    exe.chmod(exe.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ.get('PATH', '')}")


def test_nvidia_smi_is_read(tmp_path, monkeypatch):
    _fake_smi(tmp_path, monkeypatch)
    facts = gpu.facts(gpu.Overrides(), tp_size=2)
    assert (facts.count, facts.sm, facts.interconnect) == (2, (8, 9), "pcie")
    assert facts.total_gib == 24564 / 1024
    # The least free GPU, minus the middles of what a TP 2 launch takes on SM 8.9 over PCIe: the CUDA context
    # (0.40-0.75), NCCL (0.30-0.70), the custom all-reduce's 3 x 8 MiB, the allocator (0-0.05); what others hold
    # on the card is already out of a measured free figure.
    taken = (0.40 + 0.75) / 2 + (0.30 + 0.70) / 2 + 24 / 1024 + 0.05 / 2
    assert facts.free_gib == pytest.approx(23000 / 1024 - taken)
    assert facts.free_low_gib == pytest.approx(23000 / 1024 - (0.75 + 0.70 + 24 / 1024 + 0.05))
    assert facts.free_high_gib == pytest.approx(23000 / 1024 - (0.40 + 0.30 + 24 / 1024))
    assert [t.name for t in facts.free_terms] == ["cuda-context", "nccl", "custom-all-reduce", "allocator"]
    assert facts.free_source == "nvidia-smi"


def test_flags_override_nvidia_smi(tmp_path, monkeypatch):
    _fake_smi(tmp_path, monkeypatch)
    facts = gpu.facts(gpu.Overrides(gpus=1, gpu_memory=48.0, sm="9.0", interconnect="nvlink"), tp_size=1)
    assert (facts.count, facts.total_gib, facts.sm, facts.interconnect) == (1, 48.0, (9, 0), "nvlink")
    # Unmeasured: the CUDA context on SM 9.0 (0.50-0.85), a card of unknown make's reserve (0.05-0.90), the allocator.
    assert facts.free_gib == pytest.approx(48.0 - (0.675 + 0.475 + 0.025)) and facts.free_source == "estimate"
    assert (facts.free_low_gib, facts.free_high_gib) == (pytest.approx(48.0 - 1.8), pytest.approx(48.0 - 0.55))
    facts = gpu.facts(gpu.Overrides(gpu_free=40.5), tp_size=1)
    assert (facts.free_gib, facts.free_source) == (40.5, "flag")
    assert (facts.free_low_gib, facts.free_high_gib, facts.free_terms) == (None, None, ())


def test_failing_or_absent_nvidia_smi(tmp_path, monkeypatch):
    _fake_smi(tmp_path, monkeypatch, "#!/bin/sh\nexit 9\n")
    assert gpu.query() == {}
    facts = gpu.facts(gpu.Overrides(), tp_size=1)
    assert (facts.total_gib, facts.free_gib, facts.free_source) == (None, None, "unknown")
    assert gpu.facts(gpu.Overrides(gpu_memory=119.0), tp_size=1, probe=False).integrated is False
    assert gpu.facts(gpu.Overrides(integrated=True), tp_size=1, probe=False).integrated is True


GB10 = """#!/bin/sh
printf 'NVIDIA GB10, [N/A], [N/A], 12.1\\n'
"""


def test_unified_memory_gpu_reads_host_memory(tmp_path, monkeypatch):
    _fake_smi(tmp_path, monkeypatch, GB10)
    meminfo = tmp_path / "meminfo"
    meminfo.write_text("MemTotal:       127535304 kB\nMemFree:        1000 kB\nMemAvailable:   120000000 kB\n")
    monkeypatch.setattr(gpu, "MEMINFO", str(meminfo))
    facts = gpu.facts(gpu.Overrides(), tp_size=1)
    assert facts.integrated and facts.sm == (12, 1)
    assert facts.total_gib == 127535304 / (1024 * 1024)
    assert facts.free_gib == pytest.approx(120000000 / (1024 * 1024) - (0.60 + 1.10) / 2 - 0.025)


def _terms(**given):
    args = {"sm": (8, 9), "name": None, "parallel": 1, "tp": 1, "interconnect": None, "wsl": False,
            "idle_measured": False, "custom_all_reduce": True, "buffers": free_memory.AllReduceBuffers(25165824, None)}
    return {t.name: t for t in free_memory.terms(**{**args, **given})}


def test_free_memory_terms_follow_the_launch_and_the_card():
    assert set(_terms()) == {"cuda-context", "card-reserve", "allocator"}
    assert _terms(name="NVIDIA H200")["card-reserve"].high_gib == 0.30  # a data-centre card: no desktop
    assert _terms(name="NVIDIA GeForce RTX 4090")["card-reserve"].high_gib == 0.90


@pytest.mark.parametrize("name, datacentre", [
    ("NVIDIA A100-SXM4-80GB", True), ("NVIDIA A10G", True), ("NVIDIA A10", True), ("NVIDIA L40S", True),
    ("NVIDIA H100 80GB HBM3", True), ("Tesla T4", True), ("Tesla V100-SXM2-32GB", True), ("NVIDIA GH200 480GB", True),
    # Workstation and laptop cards whose model number starts like a data-centre one: a display may hold memory.
    ("NVIDIA RTX A4000", False), ("NVIDIA RTX A1000 Laptop GPU", False), ("NVIDIA RTX A2000 12GB", False),
    ("NVIDIA RTX 6000 Ada Generation", False), ("NVIDIA GeForce RTX 4090", False), ("NVIDIA T400", False),
])
def test_data_centre_cards_are_found_by_model_not_substring(name, datacentre):
    assert free_memory.is_datacentre(name) is datacentre
    assert _terms(name=name)["card-reserve"].high_gib == (0.30 if datacentre else 0.90)
    assert "wsl2-host" in _terms(wsl=True) and "wsl2-host" not in _terms(wsl=True, idle_measured=True)
    # CustomAllreduce runs at TP 2, 4, 6, 8 and over PCIe only at TP 2; V2's buffers where the release has it on
    assert _terms(parallel=2, tp=2, interconnect="pcie")["custom-all-reduce"].low_gib == 24 / 1024
    assert "custom-all-reduce" not in _terms(parallel=4, tp=4, interconnect="pcie")
    assert "custom-all-reduce" not in _terms(parallel=2, tp=2, custom_all_reduce=False)
    v2 = _terms(parallel=4, tp=4, interconnect="nvlink", buffers=free_memory.AllReduceBuffers(25165824, 33554432))
    assert v2["custom-all-reduce"].low_gib == 32 / 1024 and v2["nccl"].high_gib == 1.50
    assert "nccl" in _terms(parallel=2, tp=1) and "custom-all-reduce" not in _terms(parallel=2, tp=1)  # PP 2
