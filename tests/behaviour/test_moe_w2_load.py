"""SGLang's real `FusedMoE._load_w2` on CPU tensors at rank 1 of TP 2: the facts behind
`moe-w2-presharded` keying on the parameter's `load_full_w2` rather than on the shapes
(issue 42.2's guard; docs/patches.md, its section).

To 0.5.16 a w2 whose shard dimension is the buffer's fails loudly in narrow(). From 0.5.17 the
narrow is sized from the checkpoint, so the same call loads the rank's half of it into the
leading rows, silently. And a buffer sized for every group (compressed-tensors WNA16 with
act-order, `load_full_w2`; GPTQ-Marlin without desc_act) reaches `_load_w2` with the same shapes
as a checkpoint of the rank's size: the release loads the rank's own groups into its leading rows,
which is what GPTQ without desc_act needs there, while the act-order scales need every group. A
guard on the shapes cannot tell the two apart; the parameter's `load_full_w2` can, and
`_load_w2` does not get it.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from testing.behaviour import run_probe
from testing.releases import pristine

pytestmark = pytest.mark.behaviour

PROBE = Path(__file__).parent / "probe_moe_w2.py"
CASES = ("rank_sized", "global", "padded", "full_buffer")
RANK_1 = [4, 5, 6, 7]  # the checkpoint rows of rank 1 of 2, 4 rows a rank


def test_up_to_0_5_16_a_rank_sized_w2_fails_loudly():
    found = run_probe(pristine("0.5.16"), PROBE, *CASES)
    assert found["rank_sized"] == {"outcome": "refused", "message": "start (4) + length (4) exceeds dimension size (4)."}
    assert found["full_buffer"] == {"outcome": "refused", "message": "start (8) + length (8) exceeds dimension size (8)."}
    assert found["global"] == {"outcome": "loaded", "rows": RANK_1}


@pytest.mark.parametrize("version, left", [("0.5.17", "unset"), ("0.5.23", "zero")])
def test_from_0_5_17_the_same_w2_loads_half_of_itself_silently(version, left):
    found = run_probe(pristine(version), PROBE, *CASES)
    # The checkpoint's rows 2 and 3 (the second half of what this rank was given) land in rows
    # 0 and 1; rows 2 and 3 keep what the buffer held (0.5.17) or are zeroed (0.5.23).
    assert found["rank_sized"] == {"outcome": "loaded", "rows": [2, 3, left, left]}
    assert found["global"] == {"outcome": "loaded", "rows": RANK_1}
    assert found["padded"] == {"outcome": "loaded", "rows": [*RANK_1, left, left]}
    # A buffer sized for every group: the rank's own groups first, the rest not loaded.
    assert found["full_buffer"] == {"outcome": "loaded", "rows": [*RANK_1, *[left] * 4]}
