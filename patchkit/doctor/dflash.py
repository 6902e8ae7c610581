"""DFLASH's draft KV: the per-token bytes a DFLASH/DSPARK draft's own KV pool adds to the target's cell.

A DFLASH draft runs its own runner with its own KV pool, allocated at the target's token capacity, so
`DefaultPoolConfigurator.__init__` (model_executor/pool_configurator.py) prices it into the target's
cell with `scale_kv_cell_size_per_token_for_dflash` (speculative/dflash_utils.py):
- 0.5.11-0.5.17: by layer count, ceil(cell x (target layers + draft layers) / target layers), the
  target layers being the KV layers of the cell (the full-attention layers of a hybrid);
- 0.5.18 on: target cell + `dflash_draft_cell_size_per_token` = the draft's KV heads per rank
  (`get_num_kv_heads(tp)`: 0.5.18-0.5.21 over `tp_size`, 0.5.22 on over the attention-TP size)
  x (head_dim + v_head_dim) x draft layers x the draft's KV dtype size, where the draft's KV dtype is
  `configure_kv_cache_dtype(..., is_draft_worker=True, is_dflash=True)`: `--speculative-draft-kv-cache-dtype`
  (where the release has it) over `--kv-cache-dtype`, `auto` the draft's dtype, and an `fa4` draft backend
  back to the draft's dtype. Where that cannot be resolved the release falls back to the layer count.
The draft layers are `parse_dflash_draft_config(...).require_num_layers()`: the draft config's
`num_hidden_layers`.
"""

from __future__ import annotations

from dataclasses import dataclass

from patchkit.doctor.launch import Launch
from patchkit.doctor.model import ModelFacts

FAMILY = ("DFLASH", "DSPARK")


DEFAULT_BLOCK_SIZE = 16


def block_size(launch: Launch, draft: ModelFacts | None) -> int:
    """DFLASH's draft tokens per verify (`_handle_dflash`, every release 0.5.11-0.5.23): --speculative-dflash-block-size
    where set, else the draft config's block size (`parse_dflash_draft_config(...).resolve_block_size`:
    `dflash_config.block_size`, else a top-level `block_size`), else 16. An explicit --speculative-num-draft-tokens
    comes first (the caller's)."""
    flag = launch.get("speculative_dflash_block_size")
    if isinstance(flag, (int, str)) and str(flag).isdigit() and int(flag) > 0:
        return int(flag)
    if draft is not None:
        nested = draft.config.get("dflash_config")
        raw = nested.get("block_size") if isinstance(nested, dict) else None
        raw = draft.config.get("block_size") if raw is None else raw
        if isinstance(raw, int) and not isinstance(raw, bool) and raw > 0:
            return raw
    return DEFAULT_BLOCK_SIZE


@dataclass(frozen=True)
class DraftKv:
    layers: int
    cell_bytes: int | None  # the draft pool's own bytes per token (None: priced by layer count)
    fused_cell_bytes: int  # target + draft bytes per token


def layer_scaled(target_cell: int, target_layers: int, draft_layers: int) -> int:
    """`scale_kv_cell_size_per_token_for_dflash` without a draft cell: the ceiling of the scaled cell."""
    if target_layers <= 0 or draft_layers <= 0:
        return target_cell
    return (target_cell * (target_layers + draft_layers) + target_layers - 1) // target_layers


def _kv_dtype_bytes(kv: str, draft_dtype_bytes: int) -> float:
    kv = kv.lower()
    if kv == "auto":
        return draft_dtype_bytes  # model=None: no checkpoint KV quantization is consulted for the draft
    if kv.startswith("fp8") or kv == "mxfp8":
        return 1
    if kv.startswith(("fp4", "nvfp4")):
        return 0.5
    return 2


def draft_kv(tp_source: str | None, launch: Launch, draft: ModelFacts, draft_dtype_bytes: int, target_cell: int,
             target_layers: int, tp: int, attn_tp: int) -> DraftKv | None:
    """What this release's sizing does with a DFLASH draft (None: the draft gives no layer count, so the
    release leaves the cell alone). `tp_source` is `ReleaseCode.dflash_draft_tp`: "layers" where the
    release prices the draft by layer count, else the parallel size its draft cell divides heads by;
    `draft_dtype_bytes` is the draft's serving dtype (`ModelConfig.dtype`)."""
    text = draft.text
    layers = text.get("num_hidden_layers")
    if not isinstance(layers, int) or layers <= 0:
        return None
    heads = text.get("num_attention_heads")
    kv_heads = text.get("num_key_value_heads", heads)
    hidden = text.get("hidden_size")
    head_dim = text.get("head_dim") or (hidden // heads if isinstance(hidden, int) and isinstance(heads, int) else None)
    if tp_source in (None, "layers") or not isinstance(kv_heads, int) or not isinstance(head_dim, int):
        return DraftKv(layers, None, layer_scaled(target_cell, target_layers, layers))
    v_head_dim = text.get("v_head_dim") or head_dim
    kv = str(launch.get("speculative_draft_kv_cache_dtype") or "auto")
    if kv == "auto":
        kv = str(launch.get("kv_cache_dtype") or "auto")
    size = _kv_dtype_bytes(kv, draft_dtype_bytes)
    if launch.get("speculative_draft_attention_backend") == "fa4" and size != draft_dtype_bytes:
        size = draft_dtype_bytes  # fa4 cannot read quantized KV: the draft keeps its compute dtype
    ranks = tp if tp_source == "tp_size" else attn_tp
    cell = int(max(1, kv_heads // ranks) * (head_dim + v_head_dim) * layers * size)
    if cell <= 0:
        return DraftKv(layers, None, layer_scaled(target_cell, target_layers, layers))
    return DraftKv(layers, cell, target_cell + cell)
