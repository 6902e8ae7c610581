"""SGLang's real AutoRoundConfig.from_config + get_layer_config for a fused Qwen3.5 module whose
parts are kept at 16 bits; the mapping is SGLang's own Qwen3.5 packed_modules_mapping."""

import json

import torch

from sglang.srt.layers.quantization.auto_round import AutoRoundConfig
from sglang.srt.models.qwen3_5 import Qwen3_5ForCausalLM

mapping = dict(Qwen3_5ForCausalLM.packed_modules_mapping)
parts = mapping["in_proj_qkvz"]
config = {
    "bits": 4, "group_size": 128, "sym": True,
    "extra_config": {f"model.layers.0.linear_attn.{part}": {"bits": 16, "group_size": -1} for part in parts},
    "packed_modules_mapping": mapping,
}
quant = AutoRoundConfig.from_config(config)
bits, group_size, _ = quant.get_layer_config(torch.nn.Linear(4, 4), "model.layers.0.linear_attn.in_proj_qkvz")
# A model that sets its own mapping later keeps the last word.
later = {"in_proj_qkvz": parts}
if hasattr(quant, "update_packed_modules_mapping"):
    quant.update_packed_modules_mapping(later)
else:
    quant.packed_modules_mapping = later
print(json.dumps({"parts": parts, "bits": bits, "group_size": group_size,
                  "mapping_kept": sorted(quant.packed_modules_mapping) == ["in_proj_qkvz"]}))
