"""SGLang's real `FusedMoE._weight_loader_impl` (and its `_load_w2`) loading one expert's w2 group
scales on CPU tensors at rank 1 of TP 2, on every release where the patch applies (0.5.17-0.5.23):
unpatched, scales the scheme keeps whole (`load_full_w2`, compressed-tensors WNA16 with act-order)
hold only this rank's groups, first, the rest unset (ones) or zeroed (0.5.23); patched, every
group; GPTQ's full-size, unmarked scales and the usual per-rank scales load as the release loads
them; with SGLANG_PATCHKIT_DISABLE=moe-w2-presharded the patched release loads half again.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from testing.behaviour import run_probe
from testing.cli import run
from testing.releases import pristine

pytestmark = pytest.mark.behaviour

PROBE = Path(__file__).parent / "probe_moe_w2_scales.py"
ID = "moe-w2-presharded"
CASES = ("act_order", "full_unmarked", "per_rank")
RANK_1 = [4, 5, 6, 7]  # the checkpoint groups of rank 1 of 2, 4 groups a rank


@pytest.mark.parametrize("version", [f"0.5.{minor}" for minor in range(17, 24)])
def test_full_w2_scales_load_whole(release, version, monkeypatch):
    untouched = pristine(version)  # read only: a copy is made where the patch is applied
    before = run_probe(untouched, PROBE, *CASES)
    assert before["module"].startswith(str(untouched))
    left = "zero" if version == "0.5.23" else "one"
    half = {"outcome": "loaded", "rows": [*RANK_1, *[left] * 4]}
    assert before["act_order"] == half  # every group wanted, the rank's share loaded
    assert before["full_unmarked"] == half
    assert before["per_rank"] == {"outcome": "loaded", "rows": RANK_1}

    site = release(version, whole=True)
    assert run("apply", "--site-packages", site, "--only", ID).exit_code == 0
    after = run_probe(site, PROBE, *CASES)
    assert after["module"].startswith(str(site))
    assert after["act_order"] == {"outcome": "loaded", "rows": list(range(8))}
    assert after["full_unmarked"] == before["full_unmarked"]
    assert after["per_rank"] == before["per_rank"]

    monkeypatch.setenv("SGLANG_PATCHKIT_DISABLE", f"symm-mem-kill-switch, {ID}")
    switched_off = run_probe(site, PROBE, *CASES)
    assert {case: switched_off[case] for case in CASES} == {case: before[case] for case in CASES}
