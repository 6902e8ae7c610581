"""SGLang's real GDNKernelDispatcher, on the CPU with the GPU's compute capability stood in:
`--linear-attn-decode-backend cutedsl` below SM90 chose the CuTe-DSL decode kernel (which hangs
there); patched, it falls back to Triton with one warning naming the flag. SM90 is unchanged.
Run on 0.5.13 and 0.5.17: gdn_backend imports model_runner, whose import chain needs sgl_kernel
(GPU-only) on 0.5.10-0.5.12 and uvicorn/fastapi (not in the behaviour venv; adding them would
rebuild it) from 0.5.19 on.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from testing.behaviour import run_probe
from testing.cli import run

pytestmark = pytest.mark.behaviour

PROBE = Path(__file__).parent / "probe_gdn_decode.py"
FLAG = "--linear-attn-decode-backend cutedsl"


@pytest.mark.parametrize("version", ["0.5.13", "0.5.17"])
def test_cutedsl_decode_below_sm90_falls_back_to_triton(release, version):
    site = release(version, whole=True)
    before = run_probe(site, PROBE, "8.6", "9.0")
    assert before["sglang_file"].startswith(str(site))
    assert before["8.6"]["decode_kernel"] == "CuteDSLGDNKernel"  # RTX 3090: the kernel that hangs
    assert not any(FLAG in line for line in before["8.6"]["log"])
    assert before["9.0"]["decode_kernel"] == "CuteDSLGDNKernel"

    assert run("apply", "--site-packages", site, "--only", "gdn-cutedsl-decode-sm90").exit_code == 0
    after = run_probe(site, PROBE, "8.6", "8.9", "9.0")
    for below in ("8.6", "8.9"):
        assert after[below]["decode_kernel"] == "TritonGDNKernel"
        warnings = [line for line in after[below]["log"] if line.startswith("WARNING:")]
        assert len(warnings) == 1 and FLAG in warnings[0] and "Triton" in warnings[0]
        assert f"SM{below.replace('.', '')}" in warnings[0]
    assert after["9.0"]["decode_kernel"] == "CuteDSLGDNKernel"  # Hopper keeps the CuTe-DSL kernel
    assert not any(FLAG in line for line in after["9.0"]["log"])
    assert after["8.6"]["extend_kernel"] == before["8.6"]["extend_kernel"] == "TritonGDNKernel"
