"""DFLASH's draft KV as each release prices it (issue 21.4): the release's own
`scale_kv_cell_size_per_token_for_dflash` and (0.5.18 on) its draft-cell resolver run in the behaviour
environment (probe_dflash_cell.py) on a real draft config; the target's cell is summed here by hand from
the config, the KV budget from the free memory and the weights. The doctor's KV tokens are within 2% of
budget / the release's fused cell, its cell equal to it, on every release with DFLASH (0.5.11-0.5.23)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from testing.behaviour import run_probe
from testing.doctor import GIB, QWEN38, model_folder, rules, run
from testing.releases import pristine

pytestmark = pytest.mark.behaviour

HERE = Path(__file__).parent
VERSIONS = [f"0.5.{minor}" for minor in range(11, 24)]

# A Qwen3-8B-shaped dense target and a DFlash draft of it (the z-lab drafts' shape: 5 layers, 8 KV heads).
TARGET = {"architectures": ["Qwen3ForCausalLM"], "model_type": "qwen3", "num_hidden_layers": 36,
          "num_attention_heads": 32, "num_key_value_heads": 8, "head_dim": 128, "hidden_size": 4096,
          "intermediate_size": 12288, "vocab_size": 151936, "max_position_embeddings": 40960,
          "torch_dtype": "bfloat16"}
DRAFT = {"architectures": ["DFlashDraftModel"], "model_type": "qwen3", "num_hidden_layers": 5,
         "num_attention_heads": 32, "num_key_value_heads": 8, "head_dim": 128, "hidden_size": 4096,
         "intermediate_size": 12288, "vocab_size": 151936, "torch_dtype": "bfloat16", "block_size": 16,
         "dflash_config": {"mask_token_id": 151669, "target_layer_ids": [1, 9, 17, 25, 33]}}
TARGET_BYTES, DRAFT_BYTES = 16 * GIB, GIB
FREE, FRACTION = 79.0, 0.85

# (kv dtype, TP, extra launch flags, attention-TP size, KV bytes per element)
CASES = [("fp8_e4m3", 1, (), 1, 1), ("auto", 2, (), 2, 2),
         ("auto", 2, ("--dp-size", "2", "--enable-dp-attention"), 1, 2)]


def _target_cell(attn_tp: int, kv_bytes: int) -> int:
    """K and V of every layer: KV heads per attention-TP rank x 2 x head_dim x layers x dtype bytes."""
    return TARGET["num_key_value_heads"] // attn_tp * 2 * TARGET["head_dim"] * TARGET["num_hidden_layers"] * kv_bytes


@pytest.mark.parametrize("version", VERSIONS)
def test_dflash_kv_tokens_follow_the_release_formula(version, tmp_path):
    target = model_folder(tmp_path / "target", config=TARGET, total_size=TARGET_BYTES, mtp=False)
    draft = model_folder(tmp_path / "draft", config=DRAFT, total_size=DRAFT_BYTES, mtp=False)
    cases = [[_target_cell(attn_tp, kv_bytes), TARGET["num_hidden_layers"], kv, tp, attn_tp]
             for kv, tp, _extra, attn_tp, kv_bytes in CASES]
    real = run_probe(pristine(version), HERE / "probe_dflash_cell.py", str(draft), json.dumps(cases))
    assert real["sglang_file"].startswith(str(pristine(version)))
    assert real["draft_layers"] == DRAFT["num_hidden_layers"]
    for (kv, tp, extra, _attn_tp, _kv_bytes), cell in zip(CASES, real["cells"]):
        argv = ["--model-path", str(target), "--speculative-algorithm", "DFLASH", "--speculative-draft-model-path",
                str(draft), "--kv-cache-dtype", kv, "--tp-size", str(tp), *extra,
                "--mem-fraction-static", str(FRACTION), "--max-running-requests", "8"]
        b = run(version, argv, states={}, gpus=tp, gpu_free=FREE).budget
        assert b.kv_bytes_per_token == cell["fused_cell"], (kv, tp, extra)
        assert b.draft_kv_bytes_per_token == cell["draft_cell"], (kv, tp, extra)
        if tp == 1:  # every weight on the one GPU: the budget by hand
            expected = int(FREE * FRACTION * GIB - TARGET_BYTES - DRAFT_BYTES) // cell["fused_cell"]
            assert b.kv_tokens == pytest.approx(expected, rel=0.02)


def test_working_dflash2_launch_on_0_5_19_gets_no_false_error(tmp_path):
    """The field's 0.5.19 DFlash2 launch on the Qwen3.8-27B geometry: a 42 KiB fused cell (16 full-attention
    layers of 4 fp8 KV heads x 512 = 32 KiB, plus 5 draft layers of 8 heads x 256 = 10 KiB) and no error."""
    draft_config = {**DRAFT, "architectures": ["DFlash2DraftModel"], "hidden_size": 5120}
    target = model_folder(tmp_path / "target", total_size=int(27.8 * GIB))
    draft = model_folder(tmp_path / "draft", config=draft_config, total_size=int(3.3 * GIB), mtp=False)
    layer_types = json.loads(QWEN38.read_text())["text_config"]["layer_types"]
    target_cell = 4 * 2 * 256 * layer_types.count("full_attention") * 1
    real = run_probe(pristine("0.5.19"), HERE / "probe_dflash_cell.py", str(draft),
                     json.dumps([[target_cell, layer_types.count("full_attention"), "fp8_e4m3", 1, 1]]))
    assert real["cells"][0]["fused_cell"] == 42 * 1024
    argv = ["--model-path", str(target), "--speculative-algorithm", "DFLASH", "--speculative-draft-model-path",
            str(draft), "--kv-cache-dtype", "fp8_e4m3", "--mem-fraction-static", "0.9", "--context-length", "131072",
            "--max-running-requests", "4"]
    report = run("0.5.19", argv, gpu_memory=95.0, gpu_free=93.0)
    assert report.budget.kv_bytes_per_token == 42 * 1024
    assert report.budget.kv_tokens > 131072
    assert "kv-below-context" not in rules(report)
    assert not [f for f in report.findings if f.level == "error"]
