"""SGLang's real `GDNAttnBackend.forward_extend`, on the CPU, up to its mamba-track write into the
conv-state cache, on every release where the patch applies (0.5.20-0.5.23): unpatched, an fp16
prefill (what `--dtype float16` gives) into the default bfloat16 cache is refused by index_put;
patched, the cache keeps its dtype and holds the tracked window, cast; matching dtypes write as
before; with SGLANG_PATCHKIT_DISABLE=gdn-conv-state-dtype the patched release refuses again.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from testing.behaviour import run_probe
from testing.cli import run
from testing.releases import pristine

pytestmark = pytest.mark.behaviour

PROBE = Path(__file__).parent / "probe_gdn_conv_state.py"
ID = "gdn-conv-state-dtype"
FP16 = "float16:bfloat16"  # --dtype float16, the default conv-state cache
FP32_CACHE = "bfloat16:float32"  # --dtype bfloat16 with SGLANG_MAMBA_CONV_DTYPE=float32
SAME = "bfloat16:bfloat16"
CASES = (FP16, FP32_CACHE, SAME)


@pytest.mark.parametrize("version", [f"0.5.{minor}" for minor in range(20, 24)])
def test_fp16_prefill_tracks_into_the_bf16_conv_cache(release, version, monkeypatch):
    untouched = pristine(version)  # read only: a copy is made where the patch is applied
    before = run_probe(untouched, PROBE, *CASES)
    assert before["module"].startswith(str(untouched))
    assert before[FP16] == {"outcome": "refused", "message": "Index put requires the source and destination dtypes "
                                                            "match, got BFloat16 for the destination and Half for the source."}
    assert before[FP32_CACHE]["outcome"] == "refused"
    written = {"outcome": "written", "slot_holds_window": True, "other_slots_untouched": True}
    assert before[SAME] == {**written, "cache_dtype": "torch.bfloat16"}

    site = release(version, whole=True)
    assert run("apply", "--site-packages", site, "--only", ID).exit_code == 0
    after = run_probe(site, PROBE, *CASES)
    assert after["module"].startswith(str(site))
    assert after[FP16] == {**written, "cache_dtype": "torch.bfloat16"}
    assert after[FP32_CACHE] == {**written, "cache_dtype": "torch.float32"}
    assert after[SAME] == before[SAME]

    monkeypatch.setenv("SGLANG_PATCHKIT_DISABLE", f"symm-mem-kill-switch, {ID}")
    switched_off = run_probe(site, PROBE, *CASES)
    assert {case: switched_off[case] for case in CASES} == {case: before[case] for case in CASES}
