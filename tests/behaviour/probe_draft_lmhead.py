"""Run an MTP draft's real __init__, set_embed_and_head and (Qwen3.5) load_weights, and print the
draft's vocab tensor shapes: `qwen3_5` (Qwen3_5ForCausalLMMTP, the default) or `qwen3_next`
(Qwen3NextForCausalLMMTP, whose set_embed_and_head is inherited from Qwen3NextForCausalLM).

Building the whole draft on the CPU is not possible here: its layers need sgl_kernel (CPU
engine) or vllm (rotary fallback), neither installable on this machine. So the class's own
methods run as released (patched or not), and only its heavy collaborators, looked up as module
globals, are light torch stand-ins with the same shapes: the decoder (an nn.Embedding as
embed_tokens), ParallelLMHead, LogitsProcessor, GemmaRMSNorm and the parallel-state /
server-args accessors. Prints one JSON object.
"""

import importlib
import json
import sys
from types import SimpleNamespace

import torch
from torch import nn

# module, draft class, its decoder's name, layers, tie_word_embeddings cases, offer a checkpoint embedding
MODELS = {
    "qwen3_5": ("qwen3_5_mtp", "Qwen3_5ForCausalLMMTP", "Qwen3_5ForCausalLM", 64, (False, True), True),
    "qwen3_next": ("qwen3_next_mtp", "Qwen3NextForCausalLMMTP", "Qwen3NextModel", 48, (False,), False),
}
MODULE, CLASS, DECODER, LAYERS, TIES, LOAD = MODELS[sys.argv[1] if len(sys.argv) > 1 else "qwen3_5"]
mtp = importlib.import_module(f"sglang.srt.models.{MODULE}")

VOCAB, HIDDEN = 512, 64


class Decoder(nn.Module):
    def __init__(self, config, quant_config=None, prefix="", is_nextn=False):
        super().__init__()
        self.embed_tokens = nn.Embedding(config.vocab_size, config.hidden_size)


class LMHead(nn.Module):
    def __init__(self, vocab_size, hidden_size, quant_config=None, prefix="", **kwargs):
        super().__init__()
        self.weight = nn.Parameter(torch.empty(vocab_size, hidden_size), requires_grad=False)


def build(pp_size, tie):
    pp_group = SimpleNamespace(is_last_rank=True, is_first_rank=True, world_size=pp_size)
    settings = SimpleNamespace(enable_dp_lm_head=False, speculative_draft_model_quantization=None, tp_size=1,
                               pp_size=pp_size, pp_group=pp_group)
    stand_ins = {
        DECODER: Decoder,
        "ParallelLMHead": LMHead,
        "LogitsProcessor": lambda config: None,
        "GemmaRMSNorm": lambda hidden, eps: nn.Identity(),
        "get_pp_group": lambda: pp_group,
        "get_parallel": lambda: settings,
        "get_global_server_args": lambda: settings,
        "get_spec": lambda: settings,
        "is_npu": lambda: False,  # what it returns on this CPU anyway
    }
    for name, value in stand_ins.items():
        if hasattr(mtp, name):
            setattr(mtp, name, value)
    config = SimpleNamespace(hidden_size=HIDDEN, rms_norm_eps=1e-6, vocab_size=VOCAB, tie_word_embeddings=tie,
                             num_hidden_layers=LAYERS, full_attention_interval=4)
    return getattr(mtp, CLASS)(config)


def shapes(model):
    return [list(model.model.embed_tokens.weight.shape), list(model.lm_head.weight.shape)]


def main():
    report = {"file": mtp.__file__}
    for pp_size in (1, 2):
        for tie in TIES:
            model = build(pp_size, tie)
            case = {"after_init": shapes(model), "lm_head_is_embedding": model.lm_head is model.model.embed_tokens}
            if LOAD and hasattr(model, "load_weights") and pp_size == 1:
                # 0.5.20+: the checkpoint's embedding is offered to the draft before the swap.
                try:
                    model.load_weights([("model.embed_tokens.weight", torch.ones(VOCAB, HIDDEN))])
                    case["load_checkpoint_embedding"] = "ok"
                    case["after_load"] = shapes(model)
                except Exception as exc:
                    case["load_checkpoint_embedding"] = f"{type(exc).__name__}: {exc}"
            embed = nn.Parameter(torch.full((VOCAB, HIDDEN), 2.0), requires_grad=False)
            head = embed if tie else nn.Parameter(torch.full((VOCAB, HIDDEN), 3.0), requires_grad=False)
            try:
                model.set_embed_and_head(embed, head)
            except (RuntimeError, AssertionError) as exc:  # torch.cuda.* without a GPU, after the swap
                case["set_embed_and_head_tail"] = type(exc).__name__
            case["after_swap"] = shapes(model)
            case["uses_target_tensors"] = model.model.embed_tokens.weight is embed and model.lm_head.weight is head
            report[f"pp{pp_size}_{'tied' if tie else 'untied'}"] = case
    print(json.dumps(report))


main()
