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
    bare = name.split("model.", 1)[-1] if name.startswith("model.") else name
    if any(bare.startswith(prefix) or name.startswith(prefix) for prefix in _PLAIN_MODULES):
        return True
    return dp_encoder and ("visual." in name or name.startswith("visual"))


def per_rank_bytes(tensors: dict[str, int], tp: int, pp: int = 1, dp_encoder: bool = False,
                   dp_attention: bool = False) -> int:
    """Bytes one TP x PP rank loads of these tensors. PP splits the layers: both kinds are divided by it."""
    whole = {name for name in tensors if is_replicated(name, dp_encoder, dp_attention)}
    sharded = sum(size for name, size in tensors.items() if name not in whole)
    replicated = sum(tensors[name] for name in whole)
    return (sharded // tp + replicated) // pp


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
