"""Price a DFLASH draft's KV into the target's cell with the release's own functions.

argv: the draft folder, then a JSON list of cases [target cell (bytes/token), target KV layers,
--kv-cache-dtype, TP size, attention-TP size]; prints the fused cell of each.
The draft's ModelConfig is the release's (is_draft_model=True); its layers come from the release's
`parse_dflash_draft_config(...).require_num_layers()`; from 0.5.18 its own cell from the release's
resolver (`_resolve_dflash_draft_cell_size` in spec_aux_hidden_state.py, 0.5.23
`resolve_dflash_draft_cell_size` in mem_cache/draft_kv_budget.py: configure_kv_cache_dtype, then
`dflash_draft_cell_size_per_token`), then the release's `scale_kv_cell_size_per_token_for_dflash`.

Stood in: the server arguments / runtime-context accessors the resolver reads (the KV dtype flags and
the parallel sizes), a namespace holding only those. Run inside the behaviour venv with PYTHONPATH
pointing at an SGLang tree.
"""

import importlib
import inspect
import json
import sys
import types

from sglang.srt.configs.model_config import ModelConfig
from sglang.srt.speculative import dflash_utils

draft_path, cases = sys.argv[1], json.loads(sys.argv[2])
draft = ModelConfig(draft_path, is_draft_model=True)
layers = dflash_utils.parse_dflash_draft_config(draft_hf_config=draft.hf_config).require_num_layers()

resolver = None
for module_name, name in (("sglang.srt.mem_cache.draft_kv_budget", "resolve_dflash_draft_cell_size"),
                          ("sglang.srt.model_executor.model_runner_components.spec_aux_hidden_state",
                           "_resolve_dflash_draft_cell_size")):
    try:
        module = importlib.import_module(module_name)
    except ImportError:
        continue
    if hasattr(module, name):
        resolver = (module, getattr(module, name))
        break


def fused_cell(target_cell: int, target_layers: int, kv_dtype: str, tp: int, attn_tp: int) -> dict:
    args = types.SimpleNamespace(kv_cache_dtype=kv_dtype, speculative_draft_kv_cache_dtype=None,
                                 speculative_draft_attention_backend=None, tp_size=tp, attn_tp_size=attn_tp,
                                 attn_dcp_size=1, dcp_size=1)
    draft_cell = None
    if resolver is not None:
        module, fn = resolver
        for accessor in ("get_model", "get_spec", "get_parallel"):
            if hasattr(module, accessor):
                setattr(module, accessor, lambda: args)
        params = inspect.signature(fn).parameters
        kwargs = {"draft_model_config": draft, "draft_num_layers": layers}
        if "server_args" in params:
            kwargs["server_args"] = args
        if "attn_tp_size" in params:
            kwargs["attn_tp_size"] = attn_tp
        draft_cell = fn(**kwargs)
        assert draft_cell is not None, "the release's resolver fell back (it logs why)"
    fused = dflash_utils.scale_kv_cell_size_per_token_for_dflash(
        target_cell_size_per_token=target_cell, target_num_layers=target_layers, draft_num_layers=layers,
        **({"draft_cell_size_per_token": draft_cell} if draft_cell else {}))
    return {"draft_cell": draft_cell, "fused_cell": fused}


print(json.dumps({"sglang_file": dflash_utils.__file__, "draft_layers": layers,
                  "cells": [fused_cell(int(c[0]), int(c[1]), str(c[2]), int(c[3]), int(c[4])) for c in cases]}))
