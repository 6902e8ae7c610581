"""What each TP rank loads (issue 21.7) and the MTP head's weight (21.8) on real releases: the budget's
per-rank figures against the hand sums of tests/unit/doctor/test_tp_sharding.py (its header-only
checkpoint of the Qwen3.8-27B geometry), and tp_sharding's rules read from each release's model code."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from testing.doctor import run
from tests.unit.doctor.test_tp_sharding import (HD, MTP, MTP_FC, REPLICATED, SHARDED, H, config_with_patch_size,
                                                header_only_model)


@pytest.mark.integration  # reads a real release (testing.releases.pristine): slow tier
@pytest.mark.parametrize("version", ["0.5.12", "0.5.20"])
def test_budget_per_rank_weights_and_the_mtp_head(version, tmp_path):
    folder = header_only_model(tmp_path / "m")
    base = ["--model-path", str(folder), "--mem-fraction-static", "0.88", "--tp-size", "4"]
    b = run(version, base, gpus=4).budget
    assert b.weights_bytes == SHARDED // 4 + REPLICATED and b.draft_weights_bytes == 0
    mtp_norms = 2 * (3 * H + 2 * H + 2 * HD)
    spec = [*base, "--speculative-algorithm", "NEXTN", "--speculative-draft-model-path", str(folder)]
    b = run(version, spec, gpus=4, states={"draft-lmhead-placeholder": "applied"}).budget
    assert b.weights_bytes == SHARDED // 4 + REPLICATED
    assert b.draft_weights_bytes == (MTP - MTP_FC - mtp_norms) // 4 + MTP_FC + mtp_norms
    # Only the index: mtp.* sized from the config and left out of the target; the text tower's replicated tensors
    # sized from the config too, the vision tower's (this config gives no patch_size) divided by TP with the rest.
    (folder / "model-00001-of-00001.safetensors").unlink()
    vision_replicated = 2 * (2 * (4 * 64 + 64 + 64) + 64 * 3 * 2 * 16 * 16 + 64 + 2 * 64 + H)
    index_only = (SHARDED + vision_replicated) // 4 + REPLICATED - vision_replicated
    b = run(version, base, gpus=4).budget
    assert b.weights_bytes is not None and abs(b.weights_bytes - index_only) <= 1
    b = run(version, spec, gpus=4, states={"draft-lmhead-placeholder": "applied"}).budget
    assert b.weights_bytes is not None and abs(b.weights_bytes - index_only) <= 1 and b.draft_weights_bytes == MTP // 4


def _constructors(source: Path) -> dict[str, set[str]]:
    """`self.NAME = Class(...)` in a module: the classes each attribute is built from."""
    import ast

    built: dict[str, set[str]] = {}
    for node in ast.walk(ast.parse(source.read_text())):
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Call):
            func = node.value.func
            cls = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
            for target in node.targets:
                if isinstance(target, ast.Attribute) and isinstance(target.value, ast.Name) and target.value.id == "self":
                    built.setdefault(target.attr, set()).add(cls)
    return built


@pytest.mark.integration  # reads the real releases (testing.releases.pristine): slow tier
@pytest.mark.parametrize("version", [f"0.5.{n}" for n in range(10, 24)])
def test_the_sharding_rules_are_the_releases(version):
    """tp_sharding's rules hold in each release's Qwen3.5/3.8 code: what it splits and what it keeps whole."""
    from testing.releases import pristine

    models = next(pristine(version).rglob("sglang/srt/models"))
    built = _constructors(models / "qwen3_5.py")
    for name in ("input_layernorm", "post_attention_layernorm", "q_norm", "k_norm"):
        assert built[name] == {"GemmaRMSNorm"}, name  # replicated
    assert "RMSNormGated" in built["norm"]  # the gated DeltaNet's norm: replicated
    assert built["conv1d"] == {"ColumnParallelLinear"} and built["out_proj"] == {"RowParallelLinear"}
    assert built["o_proj"] == {"RowParallelLinear"} and built["qkv_proj"] == {"QKVParallelLinear"}
    source = (models / "qwen3_5.py").read_text()
    # VocabParallelEmbedding, split unless attention DP is on (then whole on every rank).
    assert "VocabParallelEmbedding(" in source and "enable_tp=not is_dp_attention_enabled()" in source
    for param in ("A_log", "dt_bias"):  # split along dim 0 (0.5.22 adds a parallel_group argument)
        assert re.search(r'set_weight_attrs\(\s*self\.%s,\s*\{"weight_loader": sharded_weight_loader\(0' % param, source)
    mtp = _constructors(models / "qwen3_5_mtp.py")
    assert mtp["fc"] == {"Linear"} and "ParallelLMHead" in mtp["lm_head"]  # nn.Linear: whole on every rank


@pytest.mark.integration  # reads a real release (testing.releases.pristine): slow tier
def test_index_only_checkpoint_gets_the_header_figure(tmp_path):
    """The same checkpoint once with its headers and once as an index only (no shapes): the same bytes per rank."""
    config, _text = config_with_patch_size()
    with_headers = header_only_model(tmp_path / "headers")
    (with_headers / "config.json").write_text(json.dumps(config))
    index_only = header_only_model(tmp_path / "index")
    (index_only / "config.json").write_text(json.dumps(config))
    (index_only / "model-00001-of-00001.safetensors").unlink()
    for extra in ((), ("--enable-dp-attention", "--dp-size", "2")):
        argv = ["--tp-size", "4", "--mem-fraction-static", "0.85", *extra]
        full = run("0.5.19", ["--model-path", str(with_headers), *argv], states={}, gpus=4).budget
        bare = run("0.5.19", ["--model-path", str(index_only), *argv], states={}, gpus=4).budget
        if not extra:
            assert full.weights_bytes == SHARDED // 4 + REPLICATED
        assert bare.weights_bytes is not None and abs(bare.weights_bytes - full.weights_bytes) <= 1, extra
