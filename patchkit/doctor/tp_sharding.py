"""What each tensor-parallel rank loads of a checkpoint: sharded tensors split by TP, replicated ones whole.

The rules are those of SGLang's Qwen3.5/3.8 model code (`models/qwen3_5.py`, `qwen3_5_mtp.py`, `qwen3_vl.py`,
0.5.10-0.5.23): every `*ParallelLinear`, `VocabParallelEmbedding`/`ParallelLMHead` and the Gated DeltaNet's
`A_log`/`dt_bias` (`sharded_weight_loader(0)`) are split across the TP ranks; the norms (`GemmaRMSNorm`, the
gated `RMSNorm`, the vision tower's `LayerNorm`s), a `RowParallelLinear`'s bias (added after the all-reduce, so
whole on every rank), the vision patch embedding (`Conv3dLayer`), the MTP head's `fc` (`nn.Linear`), and with
`--mm-enable-dp-encoder` the whole vision tower, with attention DP the token embedding
(`VocabParallelEmbedding(..., enable_tp=not is_dp_attention_enabled())`) are loaded whole by every rank.
"""

from __future__ import annotations

# A RowParallelLinear's module name in Qwen3.5/3.8 and its vision tower: its bias is not split.
_ROW_PARALLEL = frozenset({"o_proj", "out_proj", "down_proj", "linear_fc2", "proj"})
_PLAIN_MODULES = ("visual.patch_embed.", "mtp.fc.")  # Conv3dLayer, nn.Linear: no TP split


def is_mtp(name: str) -> bool:
    return name.startswith("mtp.") or ".mtp." in name


def is_replicated(name: str, dp_encoder: bool = False, dp_attention: bool = False) -> bool:
    """Whether every TP rank loads this checkpoint tensor whole."""
    if dp_attention and name.endswith("embed_tokens.weight") and not is_mtp(name):
        return True
    parts = name.split(".")
    module, param = (parts[-2], parts[-1]) if len(parts) >= 2 else ("", name)
    if "norm" in module or module == "ln_q":
        return True
    if param == "bias" and module in _ROW_PARALLEL:
        return True
    if module in ("gate", "shared_expert_gate") and ".mlp." in name:
        return True  # a mixture of experts' router and shared-expert gate: ReplicatedLinear (models/qwen2_moe.py)
    bare = name.split("model.", 1)[-1] if name.startswith("model.") else name
    if any(bare.startswith(prefix) or name.startswith(prefix) for prefix in _PLAIN_MODULES):
        return True
    return dp_encoder and ("visual." in name or name.startswith("visual"))


def split_over(name: str, tp: int, attn_tp: int, dp_lm_head: bool) -> int:
    """How many ranks share a sharded tensor. Under attention DP the attention layers (`Qwen3_5GatedDeltaNet`'s
    and the full attention's projections, conv1d, A_log, dt_bias: `tp_size=self.attn_tp_size`) are split over
    the attention-TP group (TP / DP), and `lm_head` too with `--enable-dp-lm-head`
    (`ParallelLMHead(..., use_attn_tp_group=enable_dp_lm_head)`); the MLPs stay split over the whole TP group."""
    if ".self_attn." in name or ".linear_attn." in name:
        return attn_tp
    if name.startswith("lm_head.") and dp_lm_head:
        return attn_tp
    return tp


def per_rank_bytes(tensors: dict[str, int], tp: int, pp: int = 1, dp_encoder: bool = False,
                   dp_attention: bool = False, attn_tp: int | None = None, dp_lm_head: bool = False) -> int:
    """Bytes one TP x PP rank loads of these tensors. PP splits the layers: both kinds are divided by it."""
    groups = attn_tp or tp
    by_split: dict[int, int] = {}  # ranks sharing a tensor -> bytes (1: loaded whole)
    for name, size in tensors.items():
        ranks = 1 if is_replicated(name, dp_encoder, dp_attention) else split_over(name, tp, groups, dp_lm_head)
        by_split[ranks] = by_split.get(ranks, 0) + size
    return sum(size // ranks for ranks, size in by_split.items()) // pp


def per_rank_from_index(total: int, geometry: dict[str, int], tp: int, pp: int = 1, dp_encoder: bool = False,
                        dp_attention: bool = False, attn_tp: int | None = None, dp_lm_head: bool = False) -> int:
    """Bytes one rank loads where the index gives only the total: the tensors the config's geometry sizes
    (`geometry_tensors`) are counted by the rules above, and what the total holds beyond them (a vision tower
    the config does not size, quantization scales) is divided by TP."""
    known = sum(geometry.values())
    rest = max(0, total - known)
    return (per_rank_bytes(geometry, tp, 1, dp_encoder, dp_attention, attn_tp, dp_lm_head) + rest // tp) // pp


def geometry_tensors(config: dict, text: dict, dtype_bytes: int, whole: bool = False) -> dict[str, int]:
    """The target's checkpoint tensors (Hugging Face names, bytes) as a Qwen3.5/3.8 config.json describes them:
    the embedding, `lm_head` (unless tied), the final norm, per layer the two norms and the MLP (dense), the
    Gated DeltaNet layers' projections, conv1d, A_log / dt_bias (f32 / the dtype) and gated norm (f32), the full
    attention layers' gated q, k, v, o and q/k norms; and of the vision tower (`vision_config` with `patch_size`)
    the patch embedding, the blocks' LayerNorms and row-parallel biases and the merger's. Empty where the config is
    not that shape (no GDN geometry, a mixture of experts, a missing number): the index's total is then divided by TP.
    `whole` (config.json alone, no index: every tensor is sized here): also a mixture of experts' MLPs (each
    expert's gate, up and down, the router, the shared expert and its gate) and the vision blocks' and merger's
    linear layers and position embedding."""
    keys = ("hidden_size", "num_hidden_layers", "num_attention_heads", "num_key_value_heads", "vocab_size",
            "linear_num_key_heads", "linear_num_value_heads", "linear_key_head_dim", "linear_value_head_dim")
    experts = text.get("num_experts")
    mlp_keys = ("moe_intermediate_size",) if experts else ("intermediate_size",)
    if any(not isinstance(text.get(key), int) for key in (*keys, *mlp_keys)) or (experts and not whole):
        return {}
    h, vocab, inter = text["hidden_size"], text["vocab_size"], text.get("intermediate_size") or 0
    heads, kv = text["num_attention_heads"], text["num_key_value_heads"]
    head_dim = int(text.get("head_dim") or h // heads)
    key = text["linear_num_key_heads"] * text["linear_key_head_dim"]
    value = text["linear_num_value_heads"] * text["linear_value_head_dim"]
    value_heads, kernel = text["linear_num_value_heads"], int(text.get("linear_conv_kernel_dim") or 4)
    gate = 2 if text.get("attn_output_gate", True) else 1
    interval = int(text.get("full_attention_interval") or 4)
    d, lm = dtype_bytes, "model.language_model."
    found = {f"{lm}embed_tokens.weight": vocab * h * d, f"{lm}norm.weight": h * d}
    if not (config.get("tie_word_embeddings") or text.get("tie_word_embeddings")):
        found["lm_head.weight"] = vocab * h * d
    for layer in range(text["num_hidden_layers"]):
        p = f"{lm}layers.{layer}."
        found.update({f"{p}input_layernorm.weight": h * d, f"{p}post_attention_layernorm.weight": h * d})
        if experts:
            found.update(_experts(text, f"{p}mlp.", d))
        else:
            found.update({f"{p}mlp.gate_proj.weight": inter * h * d, f"{p}mlp.up_proj.weight": inter * h * d,
                          f"{p}mlp.down_proj.weight": h * inter * d})
        if (layer + 1) % interval == 0:
            a = f"{p}self_attn."
            found.update({f"{a}q_proj.weight": gate * heads * head_dim * h * d, f"{a}k_proj.weight": kv * head_dim * h * d,
                          f"{a}v_proj.weight": kv * head_dim * h * d, f"{a}o_proj.weight": h * heads * head_dim * d,
                          f"{a}q_norm.weight": head_dim * d, f"{a}k_norm.weight": head_dim * d})
        else:
            a = f"{p}linear_attn."
            found.update({f"{a}in_proj_qkv.weight": (2 * key + value) * h * d, f"{a}in_proj_z.weight": value * h * d,
                          f"{a}in_proj_b.weight": value_heads * h * d, f"{a}in_proj_a.weight": value_heads * h * d,
                          f"{a}conv1d.weight": (2 * key + value) * kernel * d, f"{a}A_log": value_heads * 4,
                          f"{a}dt_bias": value_heads * d, f"{a}norm.weight": text["linear_value_head_dim"] * 4,
                          f"{a}out_proj.weight": h * value * d})
    vision = config.get("vision_config")
    if isinstance(vision, dict) and all(isinstance(vision.get(k), int) for k in ("depth", "hidden_size", "patch_size")):
        vh, patch = vision["hidden_size"], vision["patch_size"]
        channels, temporal = int(vision.get("in_channels") or 3), int(vision.get("temporal_patch_size") or 2)
        out = int(vision.get("out_hidden_size") or h)
        found.update({"model.visual.patch_embed.proj.weight": vh * channels * temporal * patch * patch * d,
                      "model.visual.patch_embed.proj.bias": vh * d, "model.visual.merger.norm.weight": vh * d,
                      "model.visual.merger.norm.bias": vh * d, "model.visual.merger.linear_fc2.bias": out * d})
        vi, merged = int(vision.get("intermediate_size") or 4 * vh), vh * int(vision.get("spatial_merge_size") or 2) ** 2
        if whole:
            found.update({"model.visual.pos_embed.weight": int(vision.get("num_position_embeddings") or 0) * vh * d,
                          "model.visual.merger.linear_fc1.weight": merged * merged * d,
                          "model.visual.merger.linear_fc1.bias": merged * d,
                          "model.visual.merger.linear_fc2.weight": out * merged * d})
        for block in range(vision["depth"]):
            p = f"model.visual.blocks.{block}."
            found.update({f"{p}{norm}.{param}": vh * d for norm in ("norm1", "norm2") for param in ("weight", "bias")})
            found.update({f"{p}attn.proj.bias": vh * d, f"{p}mlp.linear_fc2.bias": vh * d})
            if whole:
                found.update({f"{p}attn.qkv.weight": 3 * vh * vh * d, f"{p}attn.qkv.bias": 3 * vh * d,
                              f"{p}attn.proj.weight": vh * vh * d, f"{p}mlp.linear_fc1.weight": vi * vh * d,
                              f"{p}mlp.linear_fc1.bias": vi * d, f"{p}mlp.linear_fc2.weight": vh * vi * d})
    return found


def _experts(text: dict, prefix: str, d: int) -> dict[str, int]:
    """A Qwen3.5 MoE layer's MLP tensors: each expert's gate, up and down, the router (`gate`), the shared expert
    and its gate (where the config gives `shared_expert_intermediate_size`)."""
    h, inter, n = text["hidden_size"], text["moe_intermediate_size"], text["num_experts"]
    found = {f"{prefix}gate.weight": n * h * d}
    for e in range(n):
        found.update({f"{prefix}experts.{e}.{name}.weight": inter * h * d for name in ("gate_proj", "up_proj", "down_proj")})
    shared = text.get("shared_expert_intermediate_size")
    if isinstance(shared, int) and shared:
        found.update({f"{prefix}shared_expert.{name}.weight": shared * h * d for name in ("gate_proj", "up_proj", "down_proj")})
        found[f"{prefix}shared_expert_gate.weight"] = h * d
    return found


def mtp_bytes_from_geometry(text: dict, dtype_bytes: int) -> int | None:
    """The MTP head's bytes from the config where only an index names its tensors (no sizes): `Qwen3_5MTP`
    is fc (2h -> h), pre_fc_norm_embedding, pre_fc_norm_hidden, final norm, and mtp_num_hidden_layers
    full-attention decoder layers (gated q: 2 x heads x head_dim; dense MLP). None where that does not
    describe the head (a mixture-of-experts MLP) or the geometry is missing."""
    keys = ("hidden_size", "num_attention_heads", "num_key_value_heads", "intermediate_size")
    if any(not isinstance(text.get(key), int) for key in keys) or text.get("num_experts"):
        return None
    layers = int(text.get("mtp_num_hidden_layers") or text.get("num_nextn_predict_layers") or 0)
    h, heads, kv = text["hidden_size"], text["num_attention_heads"], text["num_key_value_heads"]
    head_dim = int(text.get("head_dim") or h // heads)
    gate = 2 if text.get("attn_output_gate", True) else 1
    attention = h * (heads * head_dim * gate + 2 * kv * head_dim) + heads * head_dim * h + 2 * head_dim
    layer = attention + 3 * h * text["intermediate_size"] + 2 * h
    return (2 * h * h + 3 * h + layers * layer) * dtype_bytes
