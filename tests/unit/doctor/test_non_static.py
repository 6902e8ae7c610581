"""The non-static memory rule's arithmetic (issue 21.9), by hand on the Qwen3.8-27B fixture geometry
(the rule on real releases, the field's figures and the launches the tests hold:
tests/doctor/test_non_static.py)."""

from __future__ import annotations

import json

import pytest

from patchkit.doctor import non_static
from testing.doctor import GIB, QWEN38

TEXT = json.loads(QWEN38.read_text())["text_config"]


def test_activation_bytes_per_token_by_hand():
    # Qwen3.8-27B at TP1, bf16: residual stream 3 x 5120 x 2; the largest layer is Gated DeltaNet:
    # qkvz 2x16x128 + 2x48x128, ba 2x48, conv 2x16x128 + 48x128, core and norm outputs 2x48x128
    # (bf16), plus one fp32 48x128x128 state per 64-token chunk. (MLP: 3 x 17408 x 2 = 104,448.)
    gdn = (16384 + 96 + 10240 + 12288) * 2 + 48 * 128 * 128 * 4 // 64
    assert non_static.activation_bytes_per_token(TEXT, tp=1, act_bytes=2) == 3 * 5120 * 2 + gdn == 157_888
    # TP2 splits the layer's working set, not the residual stream.
    gdn2 = (16384 + 96 + 10240 + 12288) // 2 * 2 + 24 * 128 * 128 * 4 // 64
    assert non_static.activation_bytes_per_token(TEXT, tp=2, act_bytes=2) == 3 * 5120 * 2 + gdn2


def test_logits_and_sampler_bytes():
    # bf16 matmul output + its fp32 copy + fp32 probabilities, per row of the whole vocab.
    assert non_static.logits_bytes(248_320, rows=24, act_bytes=2) == 24 * 248_320 * (2 + 4 + 4)


@pytest.mark.parametrize("needed_gib, free_gib, expected", [(1.0, 23.0, 0.95), (1.0, 20.0, 0.95), (1.52, 23.0, 0.93),
                                                            (22.9, 23.0, None), (30.0, 23.0, None)])
def test_max_safe_fraction_leaves_enough_and_no_more(needed_gib, free_gib, expected):
    needed = int(needed_gib * GIB)
    safe = non_static.max_safe_fraction(needed, free_gib)
    assert safe == expected  # None: no fraction above 0 leaves enough (never a negative fraction)
    if safe is not None:
        assert (1 - safe) * free_gib * GIB >= needed  # the named fraction leaves enough
        assert (1 - (safe + 0.01)) * free_gib * GIB < needed  # and one step more does not


def test_rule_is_registered_under_its_id():
    from patchkit.doctor.rules import RULES

    assert RULES["non-static-short"].__name__ == "non_static_short"
