"""Call SGLang's real set_eagle3_layers_to_capture on the Qwen3.5 classes and print which layers
end up flagged for capture. The classes are SGLang's own; their layers are nn.Identity stand-ins
(capture flags are plain attributes), the config and PP group are stand-ins."""

import importlib
import json
from types import SimpleNamespace

from torch import nn

qwen3_5 = importlib.import_module("sglang.srt.models.qwen3_5")
NUM_LAYERS = 64


def decoder():
    model = qwen3_5.Qwen3_5ForCausalLM.__new__(qwen3_5.Qwen3_5ForCausalLM)
    nn.Module.__init__(model)
    model.layers = nn.ModuleList([nn.Identity() for _ in range(NUM_LAYERS)])
    model.capture_aux_hidden_states = False
    return model


def flagged(model):
    return [i for i, layer in enumerate(model.layers) if getattr(layer, "_is_layer_to_capture", False)]


def wrapped(cls_module, cls_name, config):
    cls = getattr(cls_module, cls_name)
    wrapper = cls.__new__(cls)
    nn.Module.__init__(wrapper)
    wrapper.model = decoder()
    wrapper.config = config
    wrapper.pp_group = SimpleNamespace(is_last_rank=True, world_size=1)
    wrapper.capture_aux_hidden_states = False
    return wrapper


report = {}
for name, module, cls_name in (("vl", qwen3_5, "Qwen3_5ForConditionalGeneration"),
                               ("moe_vl", qwen3_5, "Qwen3_5MoeForConditionalGeneration")):
    for ids_name, ids in (("explicit", [3, 10, 40]), ("default", None)):
        wrapper = wrapped(module, cls_name, SimpleNamespace(num_hidden_layers=NUM_LAYERS))
        try:
            wrapper.set_eagle3_layers_to_capture(ids)
            report[f"{name}_{ids_name}"] = {
                "flagged": flagged(wrapper.model),
                "wrapper_capture": wrapper.capture_aux_hidden_states,
                "decoder_capture": wrapper.model.capture_aux_hidden_states,
            }
        except Exception as exc:
            report[f"{name}_{ids_name}"] = {"error": f"{type(exc).__name__}: {exc}"}

try:
    text = importlib.import_module("sglang.srt.models.qwen3_5_text")
except ModuleNotFoundError:
    text = None
if text is not None:
    for ids_name, ids in (("explicit", [3, 10, 40]), ("default", None)):
        wrapper = wrapped(text, "Qwen3_5ForCausalLM", SimpleNamespace(num_hidden_layers=NUM_LAYERS))
        try:
            wrapper.set_eagle3_layers_to_capture(ids)
            report[f"text_{ids_name}"] = {"flagged": flagged(wrapper.model), "wrapper_capture": wrapper.capture_aux_hidden_states}
        except Exception as exc:
            report[f"text_{ids_name}"] = {"error": f"{type(exc).__name__}: {exc}"}
print(json.dumps(report))
