"""Resolve the mamba radix-cache strategy with SGLang's real `_mamba_radix_cache_resolution`
(arg_groups/overrides.py) for a Qwen3.5 hybrid model, and validate the result with the release's
real extra_buffer validator (`validate_mamba_extra_buffer` in arg_groups/mamba_hook.py, or
`ServerArgs._validate_mamba_extra_buffer` before 0.5.19).

Stood in: the launch's resolved fields (a namespace the functions read as their view), the model
config (its architecture only), and the platform checks the validator makes (a CUDA GPU). Prints,
per launch case, the strategy the resolution declares (None: it declares none) and what the
validator says of it, and what the validator says of extra_buffer_lazy with a NEXTN and a DFLASH draft. Run in the
behaviour venv with PYTHONPATH at an SGLang tree; prints one JSON object.
"""

import json
from types import SimpleNamespace

from sglang.srt.arg_groups import overrides

ARCH = "Qwen3_5ForConditionalGeneration"
HF_CONFIG = SimpleNamespace(architectures=[ARCH], model_type="qwen3_5", layer_types=[])
LAUNCH = dict(mamba_radix_cache_strategy="auto", disable_radix_cache=False, disable_overlap_schedule=False,
              page_size=None, linear_attn_backend="triton", speculative_algorithm="NEXTN",
              speculative_num_draft_tokens=4, disaggregation_mode="null", pp_size=1, device="cuda",
              mamba_track_interval=256, chunked_prefill_size=8192)
CASES = {
    "nextn": {},
    "eagle3": {"speculative_algorithm": "EAGLE3"},
    "no_draft": {"speculative_algorithm": None, "speculative_num_draft_tokens": None},
    "pd_prefill": {"disaggregation_mode": "prefill"},
    "no_overlap_paged": {"disable_overlap_schedule": True, "page_size": 64},
    "pipeline_stages": {"pp_size": 2},
    "explicit_extra_buffer": {"mamba_radix_cache_strategy": "extra_buffer"},
}


class CudaPlatform:
    """The release's platform object, but a CUDA GPU."""

    is_cuda = True

    def __init__(self, real):
        self.real = real

    def __getattr__(self, name):
        return getattr(self.real, name)


def view(**fields):
    made = SimpleNamespace(**{**LAUNCH, **fields})
    made.get_model_config = lambda: SimpleNamespace(hf_config=HF_CONFIG)  # <= 0.5.18
    return made


def validator():
    """The release's extra_buffer validator as one call on a view, the platform stood in (CUDA)."""
    import inspect

    try:
        from sglang.srt.arg_groups import mamba_hook
    except ImportError:
        mamba_hook = None
    if mamba_hook is not None and hasattr(mamba_hook, "validate_mamba_extra_buffer"):  # 0.5.19+
        platform = mamba_hook.get_platform()
        mamba_hook.get_platform = lambda: CudaPlatform(platform)  # 0.5.19-0.5.20 ask it inline
        mamba_hook._platform_supports_mamba_cache_extra_buffer = lambda: True  # 0.5.21+
        # 0.5.19-0.5.20 take the architecture, 0.5.21+ the HF config.
        model = ARCH if "model_arch" in inspect.signature(mamba_hook.validate_mamba_extra_buffer).parameters else HF_CONFIG
        return lambda v: mamba_hook.validate_mamba_extra_buffer(v, model, mamba_cache_chunk_size_of=lambda: 64)
    from sglang.srt import server_args

    server_args.is_cuda = lambda: True
    self = SimpleNamespace(mamba_cache_chunk_size=64, _support_mamba_cache_extra_buffer=lambda arch: True)
    return lambda v: server_args.ServerArgs._validate_mamba_extra_buffer(self, v, ARCH)


def validated(check, strategy, **fields):
    if strategy is None:
        return None
    try:
        check(view(**{**fields, "mamba_radix_cache_strategy": strategy}))
    except AssertionError as exc:
        return f"refused: {exc}"
    return "accepted"


def main():
    if hasattr(overrides, "model_config_of"):  # 0.5.19+ builds the ModelConfig from the record
        overrides.model_config_of = lambda v: SimpleNamespace(hf_config=HF_CONFIG)
    check = validator()
    results = {}
    for name, fields in CASES.items():
        strategy = overrides._mamba_radix_cache_resolution(view(**fields)).get("mamba_radix_cache_strategy")
        results[name] = {"strategy": strategy, "validator": validated(check, strategy, **fields)}
    for draft in ("NEXTN", "DFLASH"):
        results[f"lazy_with_{draft.lower()}"] = validated(check, "extra_buffer_lazy", speculative_algorithm=draft)
    results["module"] = overrides.__file__
    print(json.dumps(results))


main()
