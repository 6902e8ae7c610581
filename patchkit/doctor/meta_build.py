"""Build an SGLang release's own model classes on the `meta` device and print what one rank holds.

Run by `patchkit doctor` as a script in the serving interpreter (patchkit/doctor/model_classes.py starts it): it
imports only the standard library, torch and the SGLang tree it is given, never patchkit. The request comes on
stdin as JSON: {"tree": folder to put first on sys.path or null, "sm": [major, minor] or null, "launches": [the
launch's server arguments, ...]}; the answer is one line on stdout, `RESULT_PREFIX` and JSON, one result per
launch.

For each launch the release's own steps run, as its scheduler and ModelRunner take them: its parser and
`ServerArgs` (resolved where the release's resolution runs without a GPU, else the parsed values), the global
server args, `init_distributed_environment`, `initialize_model_parallel` and `initialize_dp_attention` with the
launch's TP/PP/EP/attention-DP sizes, `ModelConfig.from_server_args` (the draft's with `is_draft_model=True`), the
loader's `_get_quantization_config` and `_initialize_model` under the model dtype, on `meta`. Then the parameters
and buffers of the built module are summed: what the rank allocates when the weights load (before
`process_weights_after_loading`, which this runs only where the launch quantizes online, a checkpoint without a
quantization of its own: there the loaded weights are quantized by that step, and it runs on the meta tensors).

No GPU is touched (the parent hides them): single-process stand-ins take the place of what would talk to other
ranks or to a device, and nothing else.
- torch.distributed reports the launch's world size and this rank; a group handle is an object nobody talks to;
  `GroupCoordinator` takes its ranks from the group lists the release computes, with no communicator.
- `torch.cuda.current_device()` answers the meta device (modules that ask for it build their tensors there).
- `vllm`, which one rotary-embedding fallback imports and never calls here, is a module of stand-in kernels.
- SGLang's device-capability helper answers the card's SM (the launch's, from the doctor), so the quantization
  methods pick what they pick on that card.
- The quantization modules' own "on CUDA" flag (`_is_cuda = is_cuda()`, read once at their import, False on this
  process) answers as on the card once they are imported, so a method resolves to what it resolves to there (AWQ
  to awq_marlin: `is_awq_marlin_compatible` refuses off CUDA, and plain AWQ refuses bfloat16). Their imports, which
  load CUDA kernels under that flag, ran as on this interpreter.
One rank is built per pipeline stage (TP rank 0): SGLang sizes the KV pool by the rank with the least free
memory, so the stage holding the most is what a GPU must hold.
"""

import argparse
import importlib.abc
import importlib.machinery
import inspect
import json
import sys
import time
import traceback
import types
from typing import Any, Callable

RESULT_PREFIX = "patchkit-meta-build: "
_STATE = {"world": 1, "rank": 0}


class _Handle:
    """A process group nobody talks to."""

    def __init__(self, size):
        self.size_ = size


def _install_distributed(torch):
    dist = torch.distributed
    dist.is_initialized = lambda: True
    dist.is_available = lambda: True
    dist.init_process_group = lambda *a, **k: None
    dist.destroy_process_group = lambda *a, **k: None
    dist.get_world_size = lambda group=None: _STATE["world"] if group is None else getattr(group, "size_", 1)
    dist.get_rank = lambda group=None: _STATE["rank"]
    dist.get_backend = lambda group=None: "gloo"
    dist.new_group = lambda ranks=None, *a, **k: _Handle(len(ranks) if ranks else _STATE["world"])
    dist.barrier = lambda *a, **k: None


class _Kernel(types.ModuleType):
    """A kernel library no forward here calls: any attribute is a stand-in that refuses to run."""

    __path__ = []

    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)

        def kernel(*args, **kwargs):
            raise RuntimeError(f"{self.__name__}.{name} is a stand-in: nothing runs when sizing weights")
        return kernel


class _KernelFinder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    ROOTS = ("vllm",)  # only the rotary fallback's import; a broader net changes which fallbacks SGLang picks

    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in self.ROOTS:
            return importlib.machinery.ModuleSpec(name, self, is_package=True)
        return None

    def create_module(self, spec):
        return _Kernel(spec.name)

    def exec_module(self, module):
        pass


def _install_group_coordinator(ps, torch):
    def stand_in_init(self, group_ranks, local_rank, torch_distributed_backend, *args, **kwargs):
        if hasattr(ps, "_get_unique_name"):
            self.unique_name = ps._get_unique_name(kwargs.get("group_name") or "anonymous")
            if hasattr(ps, "_register_group"):
                ps._register_group(self)
        rank = _STATE["rank"]
        self.rank, self.local_rank = rank, local_rank
        self.ranks, self.world_size, self.rank_in_group = [rank], 1, 0
        for ranks in group_ranks:
            ranks = list(ranks)
            if rank in ranks:
                self.ranks, self.world_size, self.rank_in_group = ranks, len(ranks), ranks.index(rank)
        self.device_group = self.cpu_group = _Handle(self.world_size)
        self.device = torch.device("cpu")
        self.local_size = 0
        for name in ("use_pynccl", "use_pymscclpp", "use_custom_allreduce", "use_torch_symm_mem_all_reduce",
                     "use_hpu_communicator", "use_xpu_communicator", "use_npu_communicator",
                     "use_message_queue_broadcaster"):
            setattr(self, name, False)
        for name in ("pynccl_comm", "pymscclpp_comm", "ca_comm", "qr_comm", "torch_symm_mem_comm",
                     "hpu_communicator", "xpu_communicator", "npu_communicator", "mq_broadcaster"):
            setattr(self, name, None)
    def no_communicator(self, name):
        # A communicator this release's GroupCoordinator has and the stand-in did not name: there is none.
        if "comm" in name or "broadcaster" in name:
            return None
        raise AttributeError(name)
    ps.GroupCoordinator.__init__ = stand_in_init
    ps.GroupCoordinator.__getattr__ = no_communicator


class _Card:
    """SGLang's device probes answering for the launch's card, wherever a loaded SGLang module holds them (the
    function objects of `sglang.srt.utils.common`, imported by name into many modules): its compute capability
    for the whole build (the quantization methods choose by it); while the release resolves its server arguments
    also CUDA itself and the card's memory (its defaults follow them), restored after, so the model modules
    imported later take the paths that import on this interpreter."""

    def __init__(self, answers, torch_cuda=None):
        self.answers = answers
        self.torch_cuda = torch_cuda or {}  # torch.cuda's own functions, for the code that asks torch directly

    def __enter__(self):
        import torch
        from sglang.srt.utils import common

        self.saved = [(torch.cuda, name, getattr(torch.cuda, name)) for name in self.torch_cuda]
        for name, answer in self.torch_cuda.items():
            setattr(torch.cuda, name, answer)

        originals = {name: getattr(common, name) for name in self.answers if hasattr(common, name)}
        for module in [m for name, m in list(sys.modules.items()) if name.startswith("sglang") and m is not None]:
            for name, function in originals.items():
                if getattr(module, name, None) is function:
                    self.saved.append((module, name, function))
                    setattr(module, name, self.answers[name])
        return self

    def __exit__(self, *exc):
        for module, name, function in self.saved:
            setattr(module, name, function)


def _capability(sm):
    """(SGLang's probe, torch.cuda's) answering the card's compute capability, for the whole build."""
    answer = tuple(sm) if sm else (None, None)
    torch_answer = {} if not sm else {"get_device_capability": lambda device=None: answer}
    return {"get_device_capability": lambda device_id=0: answer}, torch_answer


def _cuda(sm, memory_mib, gpus):
    """(SGLang's probes, torch.cuda's) answering as the launch's card, for the resolution of its arguments."""
    major, minor = tuple(sm) if sm else (9, 0)
    total = int(memory_mib * (1 << 20))
    properties = types.SimpleNamespace(major=major, minor=minor, total_memory=total, name="the launch's GPU",
                                       multi_processor_count=1)
    probes: dict[str, Callable[..., Any]] = {"is_cuda": lambda: True, "is_cuda_alike": lambda: True,
              "get_device_memory_capacity": lambda device=None: memory_mib,
              "get_nvgpu_memory_capacity": lambda: memory_mib,
              "get_device_sm": lambda: major * 10 + minor, "get_device_capability": lambda device_id=0: (major, minor)}
    torch_cuda: dict[str, Callable[..., Any]] = {"is_available": lambda: True, "device_count": lambda: gpus,
                  "get_device_capability": lambda device=None: (major, minor),
                  "get_device_properties": lambda device=None: properties,
                  "get_device_name": lambda device=None: properties.name,
                  "mem_get_info": lambda device=None: (total, total)}
    return probes, torch_cuda


QUANTIZATION = "sglang.srt.layers.quantization"


def _quantization_on_cuda(sm):
    """The release's quantization modules (those imported by now) answer `_is_cuda` as on the card (`sm` given:
    a CUDA card). Returns the modules changed."""
    changed: list[str] = []
    if not sm:
        return changed
    for name, module in list(sys.modules.items()):
        if module is None or not (name == QUANTIZATION or name.startswith(QUANTIZATION + ".")):
            continue
        if vars(module).get("_is_cuda") is False:
            setattr(module, "_is_cuda", True)
            changed.append(name)
    return changed


def _server_args(sam, rc, argv, card):
    """(ServerArgs published as the scheduler publishes them, how): resolved as on a CUDA device, else on the
    CPU, else the parsed values unresolved (the release's resolution asserts on what it cannot find without a
    GPU)."""
    ServerArgs = sam.ServerArgs
    parser = argparse.ArgumentParser()
    ServerArgs.add_cli_args(parser)
    errors: list[str] = []
    for device in ("cuda", "as-cuda", "cpu", None):
        given = list(argv) + (["--device", device[-4:]] if device and "--device" not in argv else [])
        namespace = parser.parse_args(given)
        try:
            if device == "as-cuda":
                with _Card(*card):
                    args = ServerArgs.from_cli_args(namespace)
                    if hasattr(sam, "set_global_server_args_for_scheduler"):
                        sam.set_global_server_args_for_scheduler(args)
                    elif rc is not None and hasattr(rc, "publish"):
                        rc.publish(args, role="scheduler")
                return args, "resolved (as on the launch's CUDA card)"
            if device is None:
                # The release's from_cli_args (its renames: 0.5.10-0.5.13 copy tensor_parallel_size into tp_size)
                # without its __post_init__ resolution.
                resolve = ServerArgs.__dict__.get("__post_init__")
                ServerArgs.__post_init__ = lambda self: None
                try:
                    args = ServerArgs.from_cli_args(namespace)
                finally:
                    if resolve is None:
                        del ServerArgs.__post_init__
                    else:
                        ServerArgs.__post_init__ = resolve
                args.device = "cuda"
                args._resolution_finished = True
                if str(args.speculative_algorithm or "").upper() == "NEXTN":
                    args.speculative_algorithm = "EAGLE"  # what every release's resolution makes of NEXTN
            else:
                args = ServerArgs.from_cli_args(namespace)
            if hasattr(sam, "set_global_server_args_for_scheduler"):
                sam.set_global_server_args_for_scheduler(args)
            elif rc is not None and hasattr(rc, "publish"):
                rc.publish(args, role="scheduler")
            return args, (f"resolved ({device})" if device else "unresolved: " + "; ".join(errors))
        except Exception as exc:  # the release's own validation: try the next way
            errors.append(f"{device}: {type(exc).__name__}: {str(exc)[:200]}")
            if __import__("os").environ.get("PATCHKIT_META_DEBUG"): traceback.print_exc()
            if rc is not None and hasattr(rc, "reset_context"):
                rc.reset_context()
    raise RuntimeError("no ServerArgs: " + "; ".join(errors))


def _sizes(args):
    tp, pp = int(args.tp_size or 1), int(getattr(args, "pp_size", 1) or 1)
    attn_dp = getattr(args, "attn_dp_size", None)
    if not attn_dp or attn_dp == 1:
        attn_dp = int(args.dp_size or 1) if getattr(args, "enable_dp_attention", False) else 1
    ep = int(getattr(args, "ep_size", 1) or getattr(args, "expert_parallel_size", 1) or 1)
    return tp, pp, int(attn_dp), ep


def _call(function, **kwargs):
    """`function` with the keyword arguments this release's version of it takes."""
    accepted = inspect.signature(function).parameters
    return function(**{k: v for k, v in kwargs.items() if k in accepted})


def _parallel(ps, rc, dp_attention, args, model_config, pp_rank):
    """The release's parallel groups for TP rank 0 of pipeline stage `pp_rank`, as its bootstrap builds them."""
    tp, pp, attn_dp, ep = _sizes(args)
    _STATE["world"], _STATE["rank"] = tp * pp, pp_rank * tp
    if hasattr(ps, "destroy_model_parallel"):
        ps.destroy_model_parallel()
    if hasattr(ps, "destroy_distributed_environment"):
        ps.destroy_distributed_environment()
    publish = getattr(rc, "publish", None)  # 0.5.14-0.5.17 have runtime_context without it
    if publish is not None and "ranks" in inspect.signature(publish).parameters:
        # 0.5.21 on: the launcher's placement is published with the config; the groups read it from there.
        rc.publish(args, role="scheduler", ranks=rc.SpawnRanks(world_rank=_STATE["rank"], dp_rank=None, gpu_id=0))
    _call(ps.init_distributed_environment, world_size=tp * pp, rank=_STATE["rank"], local_rank=0,
          distributed_init_method="tcp://127.0.0.1:1", backend="gloo")
    _call(ps.initialize_model_parallel, tensor_model_parallel_size=tp, pipeline_model_parallel_size=pp,
          expert_model_parallel_size=ep, attention_data_parallel_size=attn_dp)
    _call(dp_attention.initialize_dp_attention, server_args=args, model_config=model_config)


def _bytes(tensors):
    return sum(t.numel() * t.element_size() for t in tensors)


def _buffer_bytes(module):
    """The buffers' bytes as on CUDA: every release keeps the rotary `cos_sin_cache` in fp32 there ("needs to be
    in FP32 for numerical stability") and casts it to the model dtype only off CUDA, as in this process."""
    return sum(b.numel() * (4 if name.rsplit(".", 1)[-1] == "cos_sin_cache" else b.element_size())
               for name, b in module.named_buffers())


def _parts(model):
    """[parameter bytes, buffer bytes] of each top-level submodule (`model`, `visual`, `lm_head`, ...)."""
    return {name: [_bytes(child.parameters()), _buffer_bytes(child)] for name, child in model.named_children()}


def _build(torch, loader, set_default_torch_dtype, LoadConfig, model_config):
    load_config = LoadConfig(load_format="dummy")
    quant_config = loader._get_quantization_config(model_config, load_config)
    with set_default_torch_dtype(model_config.dtype), torch.device("meta"):
        model = loader._initialize_model(model_config, load_config, quant_config)
    return model, quant_config


def _online(model_config):
    """Whether the launch quantizes a checkpoint that carries no quantization of its own (`--quantization fp8` of a
    bf16 checkpoint): the method's create_weights then makes the checkpoint's dtype, and its
    process_weights_after_loading quantizes them after loading."""
    if not getattr(model_config, "quantization", None):
        return False
    parse = getattr(model_config, "_parse_quant_hf_config", None)
    own = parse() if callable(parse) else getattr(model_config.hf_config, "quantization_config", None)
    return not own


def _after_loading(model):
    """Each quantized module's process_weights_after_loading, as the loader runs it once the weights are in, on
    the meta tensors (a quantization of the weights changes their dtype and shape only). Returns the modules whose
    step could not run here (they keep what create_weights made): {method and error: [module names]}."""
    failed: dict[str, list[str]] = {}
    for name, module in model.named_modules():
        method = getattr(module, "quant_method", None)
        if method is None or not hasattr(method, "process_weights_after_loading"):
            continue
        if type(method).__name__.endswith("KVCacheMethod"):
            continue  # the KV cache's scales, not weights (it reads them with .item(), which meta has no value for)
        try:
            method.process_weights_after_loading(module)
        except Exception as exc:
            failed.setdefault(f"{type(method).__name__}: {type(exc).__name__}: {str(exc)[:120]}", []).append(name)
    return failed


def _vocab_own(model):
    """Bytes of the draft's own embedding and lm_head (what `set_embed_and_head` replaces with the target's)."""
    found = 0
    for name, param in model.named_parameters():
        if name.endswith(("embed_tokens.weight", "lm_head.weight")):
            found += param.numel() * param.element_size()
    return found


def _forget_configs():
    """The release's cached checkpoint configs emptied (`get_config` and what sits beside it): a launch built after
    another must not see what the one before left there (0.5.11-0.5.13 rewrite a checkpoint's cached config when
    they make its MTP draft's)."""
    for name, module in list(sys.modules.items()):
        if module is None or not ("hf_transformers" in name or name.startswith("sglang.srt.configs")):
            continue
        for value in list(vars(module).values()):
            clear = getattr(value, "cache_clear", None)
            if callable(clear):
                clear()


def build_launch(argv, env, card, sm=None):
    torch, sam, rc, ps, dp_attention, ModelConfig, loader, set_default_torch_dtype, LoadConfig = env
    _forget_configs()
    _quantization_on_cuda(sm)  # the modules a launch before this one imported too
    began = time.time()
    result = {"ok": False, "stage": "server args"}
    try:
        args, how = _server_args(sam, rc, argv, card)
        result["server_args"] = how
        tp, pp, attn_dp, ep = _sizes(args)
        result.update(tp=tp, pp=pp, attn_dp=attn_dp, ep=ep, stage="model config")
        model_config = ModelConfig.from_server_args(args)
        stages = []
        for pp_rank in range(pp):
            result["stage"] = f"parallel groups (PP rank {pp_rank})"
            _parallel(ps, rc, dp_attention, args, model_config, pp_rank)
            result["stage"] = f"target model (PP rank {pp_rank})"
            model, quant = _build(torch, loader, set_default_torch_dtype, LoadConfig, model_config)
            if _online(model_config):
                # Online quantization: what the rank holds is what process_weights_after_loading leaves.
                failed = _after_loading(model)
                result["after_loading"] = {"failed": {k: len(v) for k, v in failed.items()}}
            stages.append({"pp_rank": pp_rank, "params": _bytes(model.parameters()), "buffers": _buffer_bytes(model),
                           "parts": _parts(model)})
            result["target_class"], result["quantization"] = type(model).__name__, type(quant).__name__ if quant else None
            del model
        result["target"] = stages
        result["ok"] = True
        result.pop("stage")
        algo = str(getattr(args, "speculative_algorithm", None) or "").upper()
        if algo:
            try:  # a draft that does not build leaves the target's figure standing
                path = getattr(args, "speculative_draft_model_path", None) or args.model_path
                draft_config = ModelConfig.from_server_args(args, model_path=path, is_draft_model=True)
                _parallel(ps, rc, dp_attention, args, model_config, pp - 1)  # the draft runs on the last stage
                draft, _ = _build(torch, loader, set_default_torch_dtype, LoadConfig, draft_config)
                if _online(draft_config):
                    _after_loading(draft)
                result["draft"] = {"class": type(draft).__name__, "params": _bytes(draft.parameters()),
                                   "buffers": _buffer_bytes(draft), "own_vocab": _vocab_own(draft),
                                   "parts": _parts(draft)}
                del draft
            except Exception as exc:
                result["draft_error"] = f"{type(exc).__name__}: {str(exc)[:300]}"
    except BaseException as exc:  # a failure is the parent's fallback, never a crash of the doctor
        result["error"] = f"{type(exc).__name__}: {str(exc)[:300]}"
        result["trace"] = traceback.format_exc()[-2000:]
    result["seconds"] = round(time.time() - began, 2)
    return result


def main():
    request = json.loads(sys.stdin.read())
    if request.get("tree"):
        sys.path.insert(0, request["tree"])
    import torch

    _install_distributed(torch)
    torch.cuda.current_device = lambda: torch.device("meta")
    sys.meta_path.append(_KernelFinder())
    import sglang.srt.utils.common  # noqa: F401  (the probes _Card answers for)

    _Card(*_capability(request.get("sm"))).__enter__()  # for the whole build: never restored
    from sglang.srt.distributed import parallel_state as ps

    _install_group_coordinator(ps, torch)
    import sglang.srt.server_args as sam
    try:
        import sglang.srt.runtime_context as rc
    except ImportError:
        rc = None
    from sglang.srt.configs.load_config import LoadConfig
    from sglang.srt.configs.model_config import ModelConfig
    from sglang.srt.layers import dp_attention
    from sglang.srt.model_loader import loader
    from sglang.srt.model_loader.utils import set_default_torch_dtype

    try:  # every model module imported now, on this interpreter's platform: not inside a resolution as on CUDA
        import sglang.srt.models.registry as registry

        getattr(registry.ModelRegistry, "models", None)
    except ImportError:
        pass

    env = (torch, sam, rc, ps, dp_attention, ModelConfig, loader, set_default_torch_dtype, LoadConfig)
    card = _cuda(request.get("sm"), float(request.get("gpu_memory_mib") or 80 * 1024), int(request.get("gpus") or 8))
    results = [build_launch(argv, env, card, request.get("sm")) for argv in request["launches"]]
    sys.stdout.write(RESULT_PREFIX + json.dumps({"results": results}) + "\n")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
