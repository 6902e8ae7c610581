"""Run SGLang's real `FusedMoE._load_w2` (layers/moe/fused_moe_triton/layer.py) on CPU tensors at
rank 1 of TP 2, for each case in argv, and print per case what each row of the rank's w2 buffer
holds afterwards.

The tensors have the layout of the int4 MoE w2 group scales as they reach `_load_w2` (the groups
of the intermediate dimension first, shard_dim 0, as `is_transposed` makes it for
compressed-tensors WNA16 and GPTQ-Marlin): ROWS rows are one rank's share. Cases:
"rank_sized" (buffer ROWS, checkpoint ROWS: a checkpoint sharded per rank already), "global"
(buffer ROWS, checkpoint 2 * ROWS: the usual load), "padded" (buffer ROWS + PAD, checkpoint
2 * ROWS: 0.5.17's padded buffers), "full_buffer" (buffer 2 * ROWS, checkpoint 2 * ROWS: a scale
buffer sized for every group, as compressed-tensors WNA16 with act-order (load_full_w2) and
GPTQ-Marlin without desc_act allocate it).

A row reads as the index of the checkpoint row it holds, "unset" (the -1 it started with, never a
checkpoint value) or "zero". What runs is the release's own `_load_w2`; stood in: the layer's state
(object.__new__, the attributes `_load_w2` reads; `use_padded_loading` False as on a GPU without
the FlashInfer TRT-LLM or aiter padding). Run inside the behaviour venv with PYTHONPATH pointing
at an SGLang tree.
"""

import inspect
import json
import sys

import torch

from sglang.srt.layers.moe.fused_moe_triton import layer as moe_layer

ROWS, HIDDEN, TP, RANK, PAD = 4, 3, 2, 1, 2
SHAPES = {  # case: (buffer rows, checkpoint rows)
    "rank_sized": (ROWS, ROWS), "global": (ROWS, TP * ROWS), "padded": (ROWS + PAD, TP * ROWS),
    "full_buffer": (TP * ROWS, TP * ROWS),
}


def label(row: list, checkpoint: list) -> object:
    if row in checkpoint:
        return checkpoint.index(row)
    return "unset" if row == [-1] * HIDDEN else "zero" if row == [0] * HIDDEN else row


def case(name: str) -> dict:
    buffer_rows, checkpoint_rows = SHAPES[name]
    moe = object.__new__(moe_layer.FusedMoE)
    moe.__dict__.update(quant_config=None, use_presharded_weights=False, use_triton_kernels=False,
                        moe_tp_size=TP, moe_tp_rank=RANK, use_padded_loading=False)
    loaded = torch.arange(checkpoint_rows * HIDDEN, dtype=torch.int32).view(checkpoint_rows, HIDDEN) + 100
    buffer = torch.full((buffer_rows, HIDDEN), -1, dtype=torch.int32)
    kwargs = dict(expert_data=buffer, shard_dim=0, shard_id="w2", loaded_weight=loaded)
    if "tp_rank" in inspect.signature(moe_layer.FusedMoE._load_w2).parameters:
        kwargs["tp_rank"] = RANK  # to 0.5.21; from 0.5.22 it reads self.moe_tp_rank
    try:
        moe._load_w2(**kwargs)
    except (RuntimeError, IndexError) as exc:
        return {"outcome": "refused", "message": str(exc)}
    checkpoint = loaded.tolist()
    return {"outcome": "loaded", "rows": [label(row, checkpoint) for row in buffer.tolist()]}


print(json.dumps({"module": moe_layer.__file__, **{name: case(name) for name in sys.argv[1:]}}))
