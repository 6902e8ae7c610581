"""Run SGLang's real OffloaderV1 forward hook on a CPU module whose dt_bias / A_log are tied
through SGLang's real RadixLinearAttention (as on every Gated-DeltaNet layer), and print what
happens on the first forward, beside the same module without offload.

Stood in: only the "already on the CPU, nothing to offload" shortcut of maybe_offload_to_cpu()
(`device == torch.device("cpu")`), since there is no accelerator here; the copy to CPU, the
forward hook and torch's functional_call are the release's and torch's own.
Run inside the behaviour venv with PYTHONPATH pointing at an SGLang tree (patched or not).
"""

import copy
import json
import sys
import types

import torch

from sglang.srt.layers.radix_linear_attention import RadixLinearAttention
from sglang.srt.utils import offloader


class GatedDeltaNetLike(torch.nn.Module):
    """Owns dt_bias and A_log and hands them to RadixLinearAttention, as Qwen3.5's and
    Qwen3-Next's GatedDeltaNet layers do (RadixLinearAttention registers them again)."""

    def __init__(self) -> None:
        super().__init__()
        self.in_proj = torch.nn.Linear(8, 8)
        self.dt_bias = torch.nn.Parameter(torch.randn(4))
        self.A_log = torch.nn.Parameter(torch.randn(4))
        self.attn = RadixLinearAttention(
            layer_id=0, num_q_heads=4, num_k_heads=4, num_v_heads=4, head_q_dim=2, head_k_dim=2, head_v_dim=2,
            A_log=self.A_log, dt_bias=self.dt_bias,
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        gate = torch.nn.functional.softplus(self.attn.dt_bias).repeat(2)
        return self.in_proj(x) * gate - self.attn.A_log.exp().repeat(2)


class _AcceleratorTorch(types.ModuleType):
    """offloader's `torch`, except that `torch.device("cpu")` never equals the module's device."""

    def __getattr__(self, name):
        return getattr(torch, name)

    @staticmethod
    def device(spec, *args):
        return torch.device("meta") if spec == "cpu" else torch.device(spec, *args)


torch.manual_seed(0)
module = GatedDeltaNetLike()
reference = copy.deepcopy(module)
x = torch.randn(3, 8)
expected = reference(x)

names = list(module.state_dict(keep_vars=True))
by_tensor = {}
for name, value in module.state_dict(keep_vars=True).items():
    by_tensor.setdefault(id(value), []).append(name)
tied = sorted(sorted(group) for group in by_tensor.values() if len(group) > 1)

offloader.torch = _AcceleratorTorch("torch")
wrapped = offloader.OffloaderV1(cpu_offload_max_bytes=1 << 30).maybe_offload_to_cpu(module)
hooked = wrapped.forward is not GatedDeltaNetLike.forward.__get__(wrapped)
try:
    out = wrapped(x)
    result = {"forward": "ok", "same_as_without_offload": bool(torch.equal(out, expected))}
except Exception as exc:  # the release's own failure is what is reported
    result = {"forward": f"{type(exc).__name__}: {exc}"}

print(json.dumps({
    "sglang_file": sys.modules["sglang.srt.utils.offloader"].__file__,
    "tied": tied,
    "hooked": hooked,
    **result,
}))
