"""GPU facts: nvidia-smi's answer, and the flags that override it."""

from __future__ import annotations

import os
import stat

from patchkit.doctor import gpu

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
    # The least free GPU, minus the CUDA context + NCCL baseline of a TP 2 launch.
    assert facts.free_gib == 23000 / 1024 - (gpu.CUDA_CONTEXT_GIB + gpu.NCCL_EXTRA_GIB)
    assert facts.free_source == "nvidia-smi"


def test_flags_override_nvidia_smi(tmp_path, monkeypatch):
    _fake_smi(tmp_path, monkeypatch)
    facts = gpu.facts(gpu.Overrides(gpus=1, gpu_memory=48.0, sm="9.0", interconnect="nvlink"), tp_size=1)
    assert (facts.count, facts.total_gib, facts.sm, facts.interconnect) == (1, 48.0, (9, 0), "nvlink")
    assert (facts.free_gib, facts.free_source) == (48.0 - gpu.CUDA_CONTEXT_GIB, "estimate")
    facts = gpu.facts(gpu.Overrides(gpu_free=40.5), tp_size=1)
    assert (facts.free_gib, facts.free_source) == (40.5, "flag")


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
    assert facts.free_gib == 120000000 / (1024 * 1024) - gpu.CUDA_CONTEXT_GIB
