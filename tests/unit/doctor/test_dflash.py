"""DFLASH's draft KV arithmetic (patchkit/doctor/dflash.py) by hand; the releases' own functions are run
against it in tests/behaviour/test_doctor_dflash_kv.py."""

from __future__ import annotations

from pathlib import Path

from patchkit.doctor import dflash
from patchkit.doctor.launch import Launch
from patchkit.doctor.model import ModelFacts

DRAFT = {"num_hidden_layers": 5, "num_attention_heads": 32, "num_key_value_heads": 8, "head_dim": 128,
         "hidden_size": 4096}


def _launch(**values: object) -> Launch:
    return Launch(argv=(), values=dict(values))


def _draft(**text: object) -> ModelFacts:
    config = {**DRAFT, **text}
    return ModelFacts(path=Path("/nonexistent"), config=config, text=config)


def test_layer_scaling_rounds_up():
    assert dflash.layer_scaled(73728, 36, 5) == 83968  # 73728 x 41 / 36, exact
    assert dflash.layer_scaled(1000, 3, 1) == 1334  # 1333.3 rounded up, as the release's integer ceiling
    assert dflash.layer_scaled(1000, 0, 5) == 1000


def test_draft_cell_from_the_draft_geometry():
    fp8 = dflash.draft_kv("tp_size", _launch(kv_cache_dtype="fp8_e4m3"), _draft(), 2, 32768, 16, 1, 1)
    assert fp8 is not None and fp8.cell_bytes == 8 * 256 * 5 and fp8.fused_cell_bytes == 32768 + 10240
    # auto: the draft's own dtype; heads over TP (0.5.18-0.5.21) or attention TP (0.5.22 on)
    assert dflash.draft_kv("tp_size", _launch(), _draft(), 2, 1000, 16, 2, 1).cell_bytes == 4 * 256 * 5 * 2
    assert dflash.draft_kv("attn_tp_size", _launch(), _draft(), 2, 1000, 16, 2, 1).cell_bytes == 8 * 256 * 5 * 2
    # fa4 cannot read quantized KV: the draft keeps bf16
    fa4 = _launch(kv_cache_dtype="fp8_e4m3", speculative_draft_attention_backend="fa4")
    assert dflash.draft_kv("tp_size", fa4, _draft(), 2, 1000, 16, 1, 1).cell_bytes == 8 * 256 * 5 * 2
    # a release that prices by layer count, and a draft without a layer count
    layers = dflash.draft_kv("layers", _launch(), _draft(), 2, 32768, 16, 1, 1)
    assert layers is not None and layers.cell_bytes is None and layers.fused_cell_bytes == 43008
    assert dflash.draft_kv("tp_size", _launch(), _draft(num_hidden_layers=None), 2, 1000, 16, 1, 1) is None



def test_draft_tokens_are_the_drafts_block_size():
    """Every release with DFLASH (0.5.11-0.5.23, `_handle_dflash`) takes --speculative-num-draft-tokens, else
    --speculative-dflash-block-size, else the draft config's block size (`parse_dflash_draft_config`:
    dflash_config.block_size, else a top-level block_size), else 16; the budget's intermediate state and verify rows
    follow it."""
    from patchkit.doctor.budget import speculative

    algo = dict(speculative_algorithm="DFLASH")
    nested, top = _draft(dflash_config={"block_size": 8}), _draft(block_size=10)
    assert speculative(_launch(**algo), nested) == ("DFLASH", None, 8)
    assert speculative(_launch(**algo), top) == ("DFLASH", None, 10)
    assert speculative(_launch(**algo), _draft()) == ("DFLASH", None, 16)
    assert speculative(_launch(**algo), None) == ("DFLASH", None, 16)
    assert speculative(_launch(**algo, speculative_dflash_block_size=12), nested)[2] == 12
    assert speculative(_launch(**algo, speculative_num_draft_tokens=6), nested)[2] == 6
    # DSPARK is not read from the draft config here.
    assert speculative(_launch(speculative_algorithm="DSPARK"), nested)[2] == 16
