"""The budget's arithmetic on the Qwen3.8-27B fixture geometry, worked by hand (the figures against
each release's own sizing code: tests/doctor/test_budget.py)."""

from __future__ import annotations

import json

import pytest

from patchkit.doctor import budget
from patchkit.doctor.model import load
from testing.doctor import QWEN38, model_folder

MIB = 1 << 20


@pytest.fixture
def qwen38(tmp_path):
    return load(model_folder(tmp_path / "qwen3.8-27b"))


def test_fixture_config_is_the_shared_geometry():
    text = json.loads(QWEN38.read_text())["text_config"]
    assert (text["num_hidden_layers"], text["full_attention_interval"], text["mtp_num_hidden_layers"]) == (64, 4, 1)
    assert (text["linear_num_key_heads"], text["linear_num_value_heads"], text["linear_key_head_dim"]) == (16, 48, 128)


def test_worked_check_state_per_slot(qwen38):
    # The worked check: fp32 state at TP1 146.81 MiB per slot, 74.81 MiB bf16, TP4 36.70 MiB.
    conv, ssm = budget.gdn_state_bytes(qwen38, attn_tp=1, ssm_dtype_bytes=4, conv_dtype_bytes=2)
    # Mamba2StateShape.create: conv (48*128 + 2*16*128) x (4 - 1) bf16; temporal 48 x 128 x 128 fp32; 48 layers.
    assert conv == (48 * 128 + 2 * 16 * 128) * 3 * 2 * 48
    assert ssm == 48 * 128 * 128 * 4 * 48
    assert round((conv + ssm) / MIB, 2) == 146.81
    conv16, ssm16 = budget.gdn_state_bytes(qwen38, attn_tp=1, ssm_dtype_bytes=2, conv_dtype_bytes=2)
    assert round((conv16 + ssm16) / MIB, 2) == 74.81
    conv4, ssm4 = budget.gdn_state_bytes(qwen38, attn_tp=4, ssm_dtype_bytes=4, conv_dtype_bytes=2)
    assert round((conv4 + ssm4) / MIB, 2) == 36.70
