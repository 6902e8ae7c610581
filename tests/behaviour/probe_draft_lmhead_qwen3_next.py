"""Run SGLang's real Qwen3NextForCausalLMMTP.__init__ and its inherited (real)
Qwen3NextForCausalLM.set_embed_and_head, and print the draft's vocab tensor shapes.

As in probe_draft_lmhead.py, the class's own methods run as released (patched or not); only its
heavy collaborators, looked up as module globals, are light torch stand-ins with the same
shapes: the decoder (Qwen3NextModel, an nn.Embedding as embed_tokens), ParallelLMHead,
LogitsProcessor, GemmaRMSNorm and the parallel-state / server-args accessors.
Prints one JSON object.
"""

import json
from types import SimpleNamespace

import torch
from torch import nn

import sglang.srt.models.qwen3_next_mtp as mtp

VOCAB, HIDDEN = 512, 64


class Decoder(nn.Module):
    def __init__(self, config, quant_config=None, prefix="", is_nextn=False):
        super().__init__()
        self.embed_tokens = nn.Embedding(config.vocab_size, config.hidden_size)


class LMHead(nn.Module):
    def __init__(self, vocab_size, hidden_size, quant_config=None, prefix="", **kwargs):
        super().__init__()
        self.weight = nn.Parameter(torch.empty(vocab_size, hidden_size), requires_grad=False)


def build(pp_size):
    pp_group = SimpleNamespace(is_last_rank=True, is_first_rank=True, world_size=pp_size)
    settings = SimpleNamespace(enable_dp_lm_head=False, speculative_draft_model_quantization=None, tp_size=1,
                               pp_size=pp_size, pp_group=pp_group)
    stand_ins = {
        "Qwen3NextModel": Decoder,
        "ParallelLMHead": LMHead,
        "LogitsProcessor": lambda config: None,
        "GemmaRMSNorm": lambda hidden, eps: nn.Identity(),
        "get_pp_group": lambda: pp_group,
        "get_parallel": lambda: settings,
        "get_global_server_args": lambda: settings,
        "get_spec": lambda: settings,
        "is_npu": lambda: False,
    }
    for name, value in stand_ins.items():
        if hasattr(mtp, name):
            setattr(mtp, name, value)
    config = SimpleNamespace(hidden_size=HIDDEN, rms_norm_eps=1e-6, vocab_size=VOCAB, tie_word_embeddings=False,
                             num_hidden_layers=48, full_attention_interval=4)
    return mtp.Qwen3NextForCausalLMMTP(config)


def shapes(model):
    return [list(model.model.embed_tokens.weight.shape), list(model.lm_head.weight.shape)]


def main():
    report = {"file": mtp.__file__}
    for pp_size in (1, 2):
        model = build(pp_size)
        case = {"after_init": shapes(model)}
        embed = nn.Parameter(torch.full((VOCAB, HIDDEN), 2.0), requires_grad=False)
        head = nn.Parameter(torch.full((VOCAB, HIDDEN), 3.0), requires_grad=False)
        try:
            model.set_embed_and_head(embed, head)
        except (RuntimeError, AssertionError) as exc:  # torch.cuda.* without a GPU, after the swap
            case["set_embed_and_head_tail"] = type(exc).__name__
        case["after_swap"] = shapes(model)
        case["uses_target_tensors"] = model.model.embed_tokens.weight is embed and model.lm_head.weight is head
        report[f"pp{pp_size}"] = case
    print(json.dumps(report))


main()
