"""What each TP rank loads (issue 21.7) and the MTP head's weight (21.8), on the Qwen3.8-27B fixture geometry:
a header-only checkpoint (names and shapes, no weights) the test writes, against sums computed here by hand
from the release's sharding rules (models/qwen3_5.py, qwen3_5_mtp.py, qwen3_vl.py). The same sums against
the budget on real releases, and the rules read from their code: tests/doctor/test_tp_sharding.py."""

from __future__ import annotations

import json
from pathlib import Path

from patchkit.doctor import tp_sharding
from patchkit.doctor.model import load
from testing.doctor import QWEN38, model_folder

T = json.loads(QWEN38.read_text())["text_config"]
H, V, INTER, HD = T["hidden_size"], T["vocab_size"], T["intermediate_size"], T["head_dim"]
Q, KV = T["num_attention_heads"] * HD, T["num_key_value_heads"] * HD  # 6144, 1024
KEY, VALUE = T["linear_num_key_heads"] * T["linear_key_head_dim"], T["linear_num_value_heads"] * T["linear_value_head_dim"]
VH = T["linear_num_value_heads"]
LM = "model.language_model."


def _full_attention(prefix: str) -> dict:
    return {f"{prefix}input_layernorm.weight": ("BF16", [H]), f"{prefix}post_attention_layernorm.weight": ("BF16", [H]),
            f"{prefix}self_attn.q_proj.weight": ("BF16", [2 * Q, H]), f"{prefix}self_attn.k_proj.weight": ("BF16", [KV, H]),
            f"{prefix}self_attn.v_proj.weight": ("BF16", [KV, H]), f"{prefix}self_attn.o_proj.weight": ("BF16", [H, Q]),
            f"{prefix}self_attn.q_norm.weight": ("BF16", [HD]), f"{prefix}self_attn.k_norm.weight": ("BF16", [HD]),
            f"{prefix}mlp.gate_proj.weight": ("BF16", [INTER, H]), f"{prefix}mlp.up_proj.weight": ("BF16", [INTER, H]),
            f"{prefix}mlp.down_proj.weight": ("BF16", [H, INTER])}


def checkpoint() -> dict:
    """The Qwen3.8-27B checkpoint's tensors (the Hugging Face names), a 2-block vision tower, one MTP layer."""
    tensors = {f"{LM}embed_tokens.weight": ("BF16", [V, H]), "lm_head.weight": ("BF16", [V, H]),
               f"{LM}norm.weight": ("BF16", [H])}
    for i, kind in enumerate(T["layer_types"]):
        p = f"{LM}layers.{i}."
        if kind == "full_attention":
            tensors.update(_full_attention(p))
            continue
        tensors.update({f"{p}input_layernorm.weight": ("BF16", [H]), f"{p}post_attention_layernorm.weight": ("BF16", [H]),
                        f"{p}linear_attn.in_proj_qkv.weight": ("BF16", [2 * KEY + VALUE, H]),
                        f"{p}linear_attn.in_proj_z.weight": ("BF16", [VALUE, H]),
                        f"{p}linear_attn.in_proj_b.weight": ("BF16", [VH, H]),
                        f"{p}linear_attn.in_proj_a.weight": ("BF16", [VH, H]),
                        f"{p}linear_attn.conv1d.weight": ("BF16", [2 * KEY + VALUE, 1, 4]),
                        f"{p}linear_attn.A_log": ("F32", [VH]), f"{p}linear_attn.dt_bias": ("BF16", [VH]),
                        f"{p}linear_attn.norm.weight": ("F32", [T["linear_value_head_dim"]]),
                        f"{p}linear_attn.out_proj.weight": ("BF16", [H, VALUE]),
                        f"{p}mlp.gate_proj.weight": ("BF16", [INTER, H]), f"{p}mlp.up_proj.weight": ("BF16", [INTER, H]),
                        f"{p}mlp.down_proj.weight": ("BF16", [H, INTER])})
    for b in range(2):
        p = f"model.visual.blocks.{b}."
        tensors.update({f"{p}norm1.weight": ("BF16", [64]), f"{p}norm1.bias": ("BF16", [64]),
                        f"{p}norm2.weight": ("BF16", [64]), f"{p}norm2.bias": ("BF16", [64]),
                        f"{p}attn.qkv.weight": ("BF16", [192, 64]), f"{p}attn.qkv.bias": ("BF16", [192]),
                        f"{p}attn.proj.weight": ("BF16", [64, 64]), f"{p}attn.proj.bias": ("BF16", [64]),
                        f"{p}mlp.linear_fc1.weight": ("BF16", [256, 64]), f"{p}mlp.linear_fc1.bias": ("BF16", [256]),
                        f"{p}mlp.linear_fc2.weight": ("BF16", [64, 256]), f"{p}mlp.linear_fc2.bias": ("BF16", [64])})
    tensors.update({"model.visual.patch_embed.proj.weight": ("BF16", [64, 3, 2, 16, 16]),
                    "model.visual.patch_embed.proj.bias": ("BF16", [64]),
                    "model.visual.pos_embed.weight": ("BF16", [2304, 64]),
                    "model.visual.merger.norm.weight": ("BF16", [64]), "model.visual.merger.norm.bias": ("BF16", [64]),
                    "model.visual.merger.linear_fc1.weight": ("BF16", [256, 256]),
                    "model.visual.merger.linear_fc1.bias": ("BF16", [256]),
                    "model.visual.merger.linear_fc2.weight": ("BF16", [H, 256]),
                    "model.visual.merger.linear_fc2.bias": ("BF16", [H])})
    tensors.update({"mtp.fc.weight": ("BF16", [H, 2 * H]), "mtp.pre_fc_norm_embedding.weight": ("BF16", [H]),
                    "mtp.pre_fc_norm_hidden.weight": ("BF16", [H]), "mtp.norm.weight": ("BF16", [H]),
                    **_full_attention("mtp.layers.0.")})
    return tensors


# Hand sums from the release's rules, bytes (bf16 = 2 unless said): sharded = every *ParallelLinear weight and
# column-parallel bias, VocabParallelEmbedding / ParallelLMHead, A_log (f32) and dt_bias (sharded_weight_loader(0)),
# conv1d (ColumnParallelLinear); replicated = GemmaRMSNorm / gated RMSNorm (f32 here) / LayerNorm, row-parallel
# biases, the Conv3dLayer patch embedding.
LINEAR_LAYERS, FULL_LAYERS = 48, 16
SHARDED = 2 * (2 * V * H
               + LINEAR_LAYERS * ((2 * KEY + VALUE) * H + VALUE * H + 2 * VH * H + (2 * KEY + VALUE) * 4 + VH
                                  + H * VALUE + 3 * H * INTER)
               + FULL_LAYERS * (2 * Q * H + 2 * KV * H + H * Q + 3 * H * INTER)
               + 2 * (192 * 64 + 192 + 64 * 64 + 256 * 64 + 256 + 64 * 256) + 2304 * 64
               + 256 * 256 + 256 + H * 256) + LINEAR_LAYERS * VH * 4
REPLICATED = (2 * (H + LINEAR_LAYERS * 2 * H + FULL_LAYERS * (2 * H + 2 * HD)) + LINEAR_LAYERS * 128 * 4
              + 2 * (2 * (4 * 64 + 64 + 64) + 64 * 3 * 2 * 16 * 16 + 64 + 2 * 64 + H))
MTP = 2 * (H * 2 * H + 3 * H + 2 * H + 2 * Q * H + 2 * KV * H + H * Q + 2 * HD + 3 * H * INTER)
MTP_FC = 2 * H * 2 * H  # nn.Linear in Qwen3_5MTP: whole on every rank


def header_only_model(folder: Path) -> Path:
    tensors = checkpoint()
    model_folder(folder, tensors=tensors, total_size=None)
    index = {"metadata": {"total_size": SHARDED + REPLICATED + MTP},
             "weight_map": {name: "model-00001-of-00001.safetensors" for name in tensors}}
    (folder / "model.safetensors.index.json").write_text(json.dumps(index))
    return folder


def test_each_tp4_rank_loads_the_sharded_quarter_and_the_replicated_whole(tmp_path):
    facts = load(header_only_model(tmp_path / "m"))
    assert facts.headers_complete and facts.weights_bytes == SHARDED + REPLICATED + MTP
    assert facts.mtp_bytes == MTP
    target = {k: v for k, v in facts.tensor_bytes.items() if not tp_sharding.is_mtp(k)}
    assert tp_sharding.per_rank_bytes(target, 4) == SHARDED // 4 + REPLICATED
    assert tp_sharding.per_rank_bytes(target, 1) == SHARDED + REPLICATED
    # --mm-enable-dp-encoder: the vision tower whole on every rank.
    vision = sum(v for k, v in target.items() if ".visual." in k)
    vision_replicated = 2 * (2 * (4 * 64 + 64 + 64) + 64 * 3 * 2 * 16 * 16 + 64 + 2 * 64 + H)
    assert tp_sharding.per_rank_bytes(target, 4, dp_encoder=True) == \
        (SHARDED - (vision - vision_replicated)) // 4 + REPLICATED + (vision - vision_replicated)
    # --enable-dp-attention: the embedding (enable_tp=not is_dp_attention_enabled()) whole on every rank.
    embed = 2 * V * H
    assert tp_sharding.per_rank_bytes(target, 4, dp_attention=True) == (SHARDED - embed) // 4 + REPLICATED + embed
    mtp = {k: v for k, v in facts.tensor_bytes.items() if tp_sharding.is_mtp(k)}
    mtp_norms = 2 * (3 * H + 2 * H + 2 * HD)
    assert tp_sharding.per_rank_bytes(mtp, 4) == (MTP - MTP_FC - mtp_norms) // 4 + MTP_FC + mtp_norms


def test_mtp_size_from_the_geometry_matches_the_headers():
    # Where only the index names mtp.* (no sizes), the head is sized from config.json: the same bytes.
    assert tp_sharding.mtp_bytes_from_geometry(T, 2) == MTP
    assert tp_sharding.mtp_bytes_from_geometry({**T, "num_experts": 256}, 2) is None


def test_index_without_headers_leaves_the_mtp_size_unknown(tmp_path):
    folder = header_only_model(tmp_path / "m")
    (folder / "model-00001-of-00001.safetensors").unlink()
    facts = load(folder)
    assert facts.has_mtp_weights and facts.mtp_bytes is None and not facts.headers_complete


# The attention layers' sharded bytes (split over the attention-TP group under attention DP), by hand.
ATTENTION = (2 * (LINEAR_LAYERS * ((2 * KEY + VALUE) * H + VALUE * H + 2 * VH * H + (2 * KEY + VALUE) * 4 + VH + H * VALUE)
                  + FULL_LAYERS * (2 * Q * H + 2 * KV * H + H * Q)) + LINEAR_LAYERS * VH * 4)


def test_attention_dp_splits_the_attention_layers_over_the_attention_tp_group(tmp_path):
    facts = load(header_only_model(tmp_path / "m"))
    target = {k: v for k, v in facts.tensor_bytes.items() if not tp_sharding.is_mtp(k)}
    embed, lm_head = 2 * V * H, 2 * V * H
    # TP 4, attention DP 2: attention over 2 ranks, the embedding whole, lm_head and the MLPs over 4.
    assert tp_sharding.per_rank_bytes(target, 4, dp_attention=True, attn_tp=2) == \
        ATTENTION // 2 + (SHARDED - embed - ATTENTION) // 4 + REPLICATED + embed
    # --enable-dp-lm-head: lm_head over the attention-TP group too.
    assert tp_sharding.per_rank_bytes(target, 4, dp_attention=True, attn_tp=2, dp_lm_head=True) == \
        ATTENTION // 2 + lm_head // 2 + (SHARDED - embed - ATTENTION - lm_head) // 4 + REPLICATED + embed


def config_with_patch_size() -> tuple[dict, dict]:
    config = json.loads(QWEN38.read_text())
    config["vision_config"]["patch_size"] = 16  # the hand checkpoint's Conv3d patch embedding: [64, 3, 2, 16, 16]
    return config, config["text_config"]


def test_geometry_sizes_the_checkpoint_tensors_it_names():
    config, text = config_with_patch_size()
    geometry = tp_sharding.geometry_tensors(config, text, 2)
    sizes = {name: 4 if dtype == "F32" else 2 for name, (dtype, _shape) in checkpoint().items()}
    for name, (_dtype, shape) in checkpoint().items():
        for dim in shape:
            sizes[name] *= dim
    assert geometry and set(geometry) <= set(sizes)
    assert {name: sizes[name] for name in geometry} == geometry
    # Every replicated tensor of the checkpoint is among them: the rest of an index's total is sharded.
    assert {n for n in sizes if tp_sharding.is_replicated(n) and not tp_sharding.is_mtp(n)} <= set(geometry)
    assert tp_sharding.geometry_tensors(config, {**text, "num_experts": 256}, 2) == {}


def test_index_only_rank_figure_follows_the_rules():
    config, text = config_with_patch_size()
    geometry = tp_sharding.geometry_tensors(config, text, 2)
    for tp in (1, 2, 4):
        assert abs(tp_sharding.per_rank_from_index(SHARDED + REPLICATED, geometry, tp)
                   - (SHARDED // tp + REPLICATED)) <= 1
    embed = 2 * V * H
    assert abs(tp_sharding.per_rank_from_index(SHARDED + REPLICATED, geometry, 4, dp_attention=True, attn_tp=2)
               - (ATTENTION // 2 + (SHARDED - embed - ATTENTION) // 4 + REPLICATED + embed)) <= 1
