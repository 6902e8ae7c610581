"""SGLang's real TritonAttnBackend constructor, on the CPU with the GPU stood in: fp8_e4m3 KV
below SM 8.9 is refused at start-up with both remedies named; other GPUs, dtypes and ROCm go on.
0.5.13 is the oldest release whose triton_backend imports on the CPU (0.5.10-0.5.12's import chain
needs sgl_kernel, a GPU-only package).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from testing.behaviour import run_probe
from testing.cli import run

pytestmark = pytest.mark.behaviour

PROBE = Path(__file__).parent / "probe_triton_fp8.py"
AMPERE_E4M3 = "8.6:float8_e4m3fn"
CASES = (AMPERE_E4M3, "8.0:float8_e4m3fn", "8.9:float8_e4m3fn", "9.0:float8_e4m3fn", "8.6:float8_e5m2", "8.6:bfloat16",
         "9.4:float8_e4m3fn:hip")


@pytest.mark.parametrize("version", ["0.5.13", "0.5.23"])
def test_fp8_e4m3_on_ampere_refused_at_start(release, version):
    site = release(version, whole=True)
    before = run_probe(site, PROBE, *CASES)
    assert before["sglang_file"].startswith(str(site))
    assert all(before[case]["outcome"] == "went on" for case in CASES), before  # nothing refuses: Triton dies later

    assert run("apply", "--site-packages", site, "--only", "fp8-kv-triton-sm89").exit_code == 0
    after = run_probe(site, PROBE, *CASES)
    for case in (AMPERE_E4M3, "8.0:float8_e4m3fn"):
        assert after[case]["outcome"] == "refused"
        message = after[case]["message"]
        assert "--attention-backend flashinfer" in message and "--kv-cache-dtype fp8_e5m2" in message
        assert f"SM{case.split(':')[0].replace('.', '')}" in message
    for case in CASES[2:]:
        assert after[case] == before[case], case  # constructed exactly as far as before
