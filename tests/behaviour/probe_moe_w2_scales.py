"""Load one expert's w2 group scales through SGLang's real `FusedMoE._weight_loader_impl` (and so
its `_load_w2`) on CPU tensors at rank 1 of TP 2, for each case in argv, and print per case what
each row of the rank's scale buffer holds afterwards.

The checkpoint tensor is compressed-tensors' `weight_scale` of a down projection, (hidden,
groups), which the loader transposes to (groups, hidden); 2 * ROWS groups in all, ROWS a rank.
Cases: "act_order" (the parameter sized for every group and marked `load_full_w2`, as
compressed-tensors WNA16 with act-order makes it), "full_unmarked" (sized for every group, not
marked: GPTQ-Marlin's w2 scales without desc_act), "per_rank" (sized for the rank's groups, not
marked: the usual grouped scales). A row reads as the index of the checkpoint group it holds,
"one" (the buffer's initial value, never a checkpoint value here) or "zero".

What runs is the release's own `_weight_loader_impl` from its top; stood in: the layer's state
(object.__new__, the attributes the path reads; `use_padded_loading` False as on a GPU without
the FlashInfer TRT-LLM or aiter padding), the quantisation method (an object of the class name
the loader tests for compressed-tensors' transposition) and the GGUF check (answers "not GGUF").
Run inside the behaviour venv with PYTHONPATH pointing at an SGLang tree.
"""

import json
import sys

import torch

from sglang.srt.layers.moe.fused_moe_triton import layer as moe_layer

ROWS, HIDDEN, TP, RANK = 4, 3, 2, 1
CASES = {"act_order": (TP * ROWS, True), "full_unmarked": (TP * ROWS, False), "per_rank": (ROWS, False)}
CompressedTensorsWNA16MoE = type("CompressedTensorsWNA16MoE", (), {})


def label(row: list, checkpoint: list) -> object:
    if row in checkpoint:
        return checkpoint.index(row)
    return "one" if row == [1.0] * HIDDEN else "zero" if row == [0.0] * HIDDEN else row


def case(name: str) -> dict:
    buffer_rows, full = CASES[name]
    moe = object.__new__(moe_layer.FusedMoE)
    method = CompressedTensorsWNA16MoE()
    moe.__dict__.update(quant_config=None, quant_method=method, scheme=method, use_presharded_weights=False,
                        use_triton_kernels=False, use_flashinfer_trtllm_moe=False, use_padded_loading=False,
                        _has_fused_shared=False, moe_tp_size=TP, moe_tp_rank=RANK)
    moe._load_gguf_weight = lambda *args, **kwargs: False
    param = torch.nn.Parameter(torch.ones(1, buffer_rows, HIDDEN), requires_grad=False)
    param.quant_method, param.is_transposed, param.load_full_w2 = "group", True, full
    groups = torch.arange(TP * ROWS * HIDDEN, dtype=torch.float32).view(TP * ROWS, HIDDEN) + 100
    try:
        moe._weight_loader_impl(param, groups.t().contiguous(), "experts.w2_weight_scale", "w2", 0)
    except (RuntimeError, IndexError) as exc:
        return {"outcome": "refused", "message": str(exc)}
    checkpoint = groups.tolist()
    return {"outcome": "loaded", "rows": [label(row, checkpoint) for row in param.data[0].tolist()]}


print(json.dumps({"module": moe_layer.__file__, **{name: case(name) for name in sys.argv[1:]}}))
