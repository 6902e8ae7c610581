"""Construct SGLang's real TritonAttnBackend for each case in argv ("8.6:float8_e4m3fn", or
"9.4:float8_e4m3fn:hip" for a ROCm build): a GPU of that compute capability, a KV cache of that
torch dtype; print, per case, whether it refuses.

Stood in: torch.cuda.is_available (True), torch.cuda.get_device_capability, torch.version.hip,
and the model runner, which carries only
`kv_cache_dtype`: past the refusal, the constructor stops at the first attribute the stand-in
lacks, which shows it went on. Run inside the behaviour venv with PYTHONPATH pointing at an
SGLang tree.
"""

import json
import sys
import types

import torch

from sglang.srt.layers.attention import triton_backend

torch.cuda.is_available = lambda: True


def construct(case: str) -> dict:
    capability, dtype, *rocm = case.split(":")
    torch.cuda.get_device_capability = lambda device=None: tuple(int(part) for part in capability.split("."))
    torch.version.hip = "6.4" if rocm == ["hip"] else None
    runner = types.SimpleNamespace(kv_cache_dtype=getattr(torch, dtype))
    try:
        triton_backend.TritonAttnBackend(runner)
        return {"outcome": "constructed", "message": ""}
    except ValueError as exc:
        if "--kv-cache-dtype" in str(exc):
            return {"outcome": "refused", "message": str(exc)}
        return {"outcome": "went on", "message": f"ValueError: {exc}"}
    except Exception as exc:  # the stand-in runner ends construction past the check
        return {"outcome": "went on", "message": f"{type(exc).__name__}: {exc}"}


print(json.dumps({"sglang_file": triton_backend.__file__, **{case: construct(case) for case in sys.argv[1:]}}))
