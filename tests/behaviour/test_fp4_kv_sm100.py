"""SGLang's real KV cache dtype resolver, on the CPU with the GPU stood in, on every release whose
resolver imports there (0.5.13-0.5.23; 0.5.10-0.5.12's model_runner import chain needs sgl_kernel, a
GPU-only package): unpatched, the release's FP4 cache (fp4_e2m1 to 0.5.15, fp4_mx_block16 from
0.5.16) resolves to torch.float4_e2m1fn_x2 below SM 10.0; patched, it is refused in one line naming
fp8 and the switch, and SM 10.0 / 12.0, ROCm, fp8_e5m2 and bf16 resolve as before; with
SGLANG_PATCHKIT_DISABLE=fp4-kv-sm100 the patched release resolves as the release does.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from testing.behaviour import run_probe
from testing.cli import run
from testing.releases import pristine

pytestmark = pytest.mark.behaviour

PROBE = Path(__file__).parent / "probe_fp4_kv.py"
ID = "fp4-kv-sm100"
BELOW = ("8.0", "8.6", "8.9", "9.0")
CASES = (*BELOW, "10.0", "12.0", "9.4::hip", "8.6:fp8_e5m2", "8.6:bf16")


@pytest.mark.parametrize("version", [f"0.5.{minor}" for minor in range(13, 24)])
def test_fp4_kv_below_sm100_refused_at_start(release, version, monkeypatch):
    untouched = pristine(version)  # read only: a copy is made where the patch is applied
    before = run_probe(untouched, PROBE, *CASES)
    assert before["module"].startswith(str(untouched))
    assert before["fp4"] in ("fp4_e2m1", "fp4_mx_block16")
    for case in CASES[:-2]:  # the defect: an FP4 cache on every GPU, below SM 10.0 too
        assert before[case] == {"outcome": "resolved", "dtype": "torch.float4_e2m1fn_x2"}, case

    site = release(version, whole=True)
    assert run("apply", "--site-packages", site, "--only", ID).exit_code == 0
    after = run_probe(site, PROBE, *CASES)
    for case in BELOW:
        assert after[case]["outcome"] == "refused", case
        message = after[case]["message"]
        assert message.startswith(f"--kv-cache-dtype {before['fp4']} on SM{case.replace('.', '')}:")
        assert "--kv-cache-dtype fp8_e5m2 (or fp8_e4m3)" in message and f"SGLANG_PATCHKIT_DISABLE={ID}" in message
        assert "\n" not in message
    for case in CASES[len(BELOW):]:
        assert after[case] == before[case], case  # resolved exactly as before

    monkeypatch.setenv("SGLANG_PATCHKIT_DISABLE", f"symm-mem-kill-switch, {ID}")
    switched_off = run_probe(site, PROBE, *CASES)
    assert {case: switched_off[case] for case in CASES} == {case: before[case] for case in CASES}
