"""The default --mem-fraction-static as the release's own `_handle_gpu_memory_settings` (server_args.py, 0.5.10-0.5.18)
or `handle_gpu_memory_settings` (arg_groups/memory_hook.py, 0.5.19) gives it for the GPU memory figure it takes as its
argument.

Stood in: the ServerArgs is the release's own class holding its fields' defaults, made without __post_init__ (no
model read, no device probe), with the launch's fields set; 0.5.16 on, the per-phase CUDA-graph config is parsed from
them by the release's own parser first, as __post_init__ does; the model config the hooks read is a plain, non-MLA,
non-multimodal one. Argument: JSON {case: {"gpu_mib": N, "fields": {...}}}; "prefill_graphs_off" in fields sets the
release's own switch (disable_piecewise_cuda_graph to 0.5.15, disable_prefill_cuda_graph from 0.5.16). Prints one JSON
object: per case, the fraction (or the error). Run in the behaviour venv with PYTHONPATH at an SGLang tree."""

import dataclasses
import inspect
import json
import sys
from types import SimpleNamespace

from sglang.srt import server_args as sa_mod

CASES = json.loads(sys.argv[1])
CONFIG = SimpleNamespace(is_multimodal=False, hf_config=SimpleNamespace(architectures=["LlamaForCausalLM"]))
PREFILL_SWITCHES = ("disable_piecewise_cuda_graph", "disable_prefill_cuda_graph")


def made(fields):
    cls = sa_mod.ServerArgs
    args = object.__new__(cls)
    for f in dataclasses.fields(cls):
        if f.default is not dataclasses.MISSING:
            object.__setattr__(args, f.name, f.default)
        elif f.default_factory is not dataclasses.MISSING:
            object.__setattr__(args, f.name, f.default_factory())
    for name, value in fields.items():
        object.__setattr__(args, name, value)
    object.__setattr__(args, "get_model_config", lambda: CONFIG)  # to 0.5.18
    object.__setattr__(args, "use_mla_backend", lambda: False)
    return args


def fraction(gpu_mib, fields):
    fields = dict(fields)
    names = {f.name for f in dataclasses.fields(sa_mod.ServerArgs)}
    if fields.pop("prefill_graphs_off", False):
        fields.update({n: True for n in PREFILL_SWITCHES if n in names})
    args = made({"model_path": "/nonexistent/model", "device": "cuda", **fields})
    if hasattr(sa_mod.ServerArgs, "_handle_gpu_memory_settings"):
        if hasattr(sa_mod.ServerArgs, "_parse_cuda_graph_config"):  # 0.5.16-0.5.18
            args._parse_cuda_graph_config()
        sa_mod.ServerArgs._handle_gpu_memory_settings(args, gpu_mib)
    else:
        from sglang.srt.arg_groups import cuda_graph_hook, memory_hook

        for module in [m for name, m in sys.modules.items() if name.startswith("sglang.srt.arg_groups")]:
            if hasattr(module, "model_config_of"):
                module.model_config_of = lambda server_args: CONFIG
            if hasattr(module, "use_mla_backend"):
                module.use_mla_backend = lambda server_args: False
        cuda_graph_hook.parse_cuda_graph_config(args)
        if "gpu_mem" not in inspect.signature(memory_hook.handle_gpu_memory_settings).parameters:
            raise TypeError("this release's handle_gpu_memory_settings reads the card itself (0.5.20 on)")
        memory_hook.handle_gpu_memory_settings(args, gpu_mib)
    # 0.5.19 declares its resolutions into a stash rather than writing the field: the last one is the value.
    declared = [f["mem_fraction_static"] for _source, f in getattr(args, "_resolved_overrides", None) or []
                if "mem_fraction_static" in f]
    return declared[-1] if declared else args.mem_fraction_static


out = {}
for name, case in CASES.items():
    try:
        out[name] = fraction(case["gpu_mib"], case["fields"])
    except Exception as exc:  # noqa: BLE001 - said in the output
        out[name] = f"{type(exc).__name__}: {exc}"
print(json.dumps(out))
