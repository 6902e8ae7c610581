"""Resolve the KV cache dtype with SGLang's real resolver for each case in argv ("8.6", or
"8.6:fp8_e5m2" for another --kv-cache-dtype, or "9.4::hip" for a ROCm build): a GPU of that compute
capability; print, per case, the dtype it resolves to or its refusal.

The resolver: `configure_kv_cache_dtype` in sglang/srt/mem_cache/kv_cache_dtype.py where the release
has it (0.5.16+), called with the keyword arguments ModelRunner.configure_kv_cache_dtype passes for a
target worker; else `ModelRunner.configure_kv_cache_dtype` itself (0.5.13-0.5.15) on a stand-in
runner that carries only `server_args.kv_cache_dtype`, `dtype` and `model`. A case without a dtype
asks for the release's FP4 cache: the first of fp4_e2m1, fp4_mx_block16 that this release resolves
to torch.float4_e2m1fn_x2 on SM 10.0 (printed as "fp4").

Stood in: torch.cuda.is_available (True), torch.cuda.get_device_capability, torch.version.hip.
Run inside the behaviour venv with PYTHONPATH pointing at an SGLang tree.
"""

import importlib.util
import inspect
import json
import sys
import types

import torch

if importlib.util.find_spec("sglang.srt.mem_cache.kv_cache_dtype") is not None:
    from sglang.srt.mem_cache import kv_cache_dtype as resolver_module

    def resolve(name: str) -> torch.dtype:
        known = inspect.signature(resolver_module.configure_kv_cache_dtype).parameters
        arguments = dict(server_args_kv_cache_dtype=name, model=None, model_dtype=torch.bfloat16,
                         is_draft_worker=False, is_dflash=False, speculative_draft_attention_backend=None,
                         speculative_draft_kv_cache_dtype=None)
        return resolver_module.configure_kv_cache_dtype(**{k: v for k, v in arguments.items() if k in known})[1]
else:
    from sglang.srt.model_executor import model_runner as resolver_module

    def resolve(name: str) -> torch.dtype:
        runner = types.SimpleNamespace(server_args=types.SimpleNamespace(kv_cache_dtype=name),
                                       dtype=torch.bfloat16, model=None)
        resolver_module.ModelRunner.configure_kv_cache_dtype(runner)
        return runner.kv_cache_dtype


def on(capability: str, rocm: bool = False) -> None:
    torch.cuda.is_available = lambda: True  # set once SGLang is imported: its imports would start CUDA
    torch.cuda.get_device_capability = lambda device=None: tuple(int(part) for part in capability.split("."))
    torch.version.hip = "6.4" if rocm else None


def fp4_name() -> str | None:
    on("10.0")
    for name in ("fp4_e2m1", "fp4_mx_block16"):
        try:
            if resolve(name) == torch.float4_e2m1fn_x2:
                return name
        except ValueError:
            continue
    return None


FP4 = fp4_name()


def case(spec: str) -> dict:
    capability, *rest = spec.split(":")
    on(capability, rocm=rest[1:] == ["hip"])
    name = (rest[0] if rest else "") or FP4
    try:
        return {"outcome": "resolved", "dtype": str(resolve(name))}
    except ValueError as exc:
        return {"outcome": "refused", "message": str(exc)}


print(json.dumps({"module": resolver_module.__file__, "fp4": FP4, **{spec: case(spec) for spec in sys.argv[1:]}}))
