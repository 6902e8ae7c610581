"""The memory budget of one GPU, computed the way the release's own sizing code computes it.

Every step names the SGLang function it mirrors. Figures are per GPU (per TP rank); SGLang
works in GiB floats ("GB" in its log) for the budget and in bytes for the pools, and so does
this module, so rounding follows the release's code.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

from patchkit.doctor import dflash, mm_feature_pool, non_static, tp_sharding
from patchkit.doctor.gpu import GIB, GpuFacts
from patchkit.doctor.launch import Launch
from patchkit.doctor.model import CONFIG_DTYPE_BYTES, ModelFacts, model_dtype_bytes
from patchkit.doctor.model_classes import ClassWeights, Unavailable
from patchkit.doctor.release import ReleaseCode
from patchkit.doctor.switches import NOT_IN_PLACE

EAGLE_FAMILY = ("EAGLE", "EAGLE3", "NEXTN", "STANDALONE")
_DTYPE_BYTES = CONFIG_DTYPE_BYTES


@dataclass
class Budget:
    """The figures `--json` reports under "budget" (bytes unless named otherwise)."""

    tp_size: int = 1
    attn_dp_size: int = 1  # attention data-parallel groups inside the TP group
    dp_replicas: int = 1  # data-parallel copies of the model, tp x pp GPUs each
    gpus_needed: int = 1  # dp_replicas x tp x pp
    free_at_load_gib: float | None = None
    mem_fraction_static: float | None = None
    mem_fraction_source: str = "flag"  # "flag" or "estimate" (the release's default, approximated)
    weights_bytes: int | None = None  # per GPU
    draft_weights_bytes: int = 0  # per GPU
    # Where the weights per GPU come from: "model classes" (the release's own, built on meta), "headers",
    # "index and config geometry", "index" (its total divided by TP) or "unknown".
    weights_from: str = "unknown"
    weights_estimated: bool = False  # config.json alone: the weights are the config's, not the checkpoint's
    weights_low_bytes: int | None = None  # the range where the weights per GPU are not known exactly
    weights_high_bytes: int | None = None
    # Why the KV budget is not computed, in one line (None: it is): what the report and `bump --launch` say
    # where the budget's figures are missing.
    not_computed: str | None = None
    slack_bytes: int | None = None  # free-at-load x (1 - mem-fraction-static): activations and graphs (None: unknown)
    multimodal_reserve_bytes: int = 0
    # The multimodal feature-transport pool the release allocates after the KV pool is sized, in the rest start-up's
    # capture runs in (mm_feature_pool.py; 0.5.17 for a single-node multimodal launch, or where cuda_ipc is named).
    mm_feature_pool_bytes: int = 0
    hybrid: bool = False
    conv_state_bytes: int = 0  # one slot, all linear layers
    ssm_state_bytes: int = 0  # one slot, all linear layers
    state_slot_bytes: int = 0
    state_slots: int | None = None  # max_mamba_cache_size (the pool holds one more, for padding)
    state_slots_source: str = ""  # "flag", "max-running-requests" or "ratio"
    state_pool_bytes: int = 0
    slots_per_request: int | None = None  # S, from _calculate_mamba_ratio
    intermediate_state_bytes: int = 0
    replayssm_bytes: int = 0
    speculative_algorithm: str | None = None
    draft_tokens: int | None = None
    draft_layers: int | None = None
    full_attention_layers: int | None = None
    kv_dtype_bytes: float | None = None
    kv_bytes_per_token: int | None = None  # the cell: target KV, with a draft's KV priced in
    draft_kv_bytes_per_token: int | None = None  # a DFLASH draft's own pool (None: priced by layer count)
    kv_budget_bytes: int | None = None
    kv_tokens: int | None = None
    kv_tokens_low: int | None = None  # at the low and high ends of an estimated free memory (None: given)
    kv_tokens_high: int | None = None
    context_length: int | None = None
    max_request_tokens: int | None = None
    requested_max_running_requests: int | None = None
    max_running_source: str = ""  # "flag", "speculative default" or "estimate"
    effective_max_running_requests: int | None = None
    state_cap_requests: int | None = None  # floor(slots / S)
    # Outside the static pools (patchkit/doctor/non_static.py): what the launch needs, what
    # (1 - mem_fraction_static) x free leaves, and the highest fraction that leaves enough.
    non_static_needed_bytes: int | None = None
    non_static_available_bytes: int | None = None
    max_safe_mem_fraction_static: float | None = None
    # The one fraction the report advises (patchkit/doctor/advice.py): the highest that leaves the non-static
    # need and still starts; None where none does (or the free memory is not known).
    recommended_mem_fraction_static: float | None = None
    non_static_terms: dict[str, int] = field(default_factory=dict)
    non_static_chunked_prefill_size: int | None = None  # the largest prefill chunk (flag or the release's default)
    non_static_cuda_graph_max_bs: int | None = None  # decode graphs' largest batch (None: graphs off)
    # Start-up's CUDA-graph capture (non_static.py; sglang#35777): what it needs outside the static pools (the
    # release's metadata, the prefill graphs' forward, the decode graphs at their largest batch, the draft's), the
    # decode batch sizes the release captures, how many prefill graphs, and the largest decode max bs whose capture
    # fits the rest where the launch's does not (None: it fits, or no size does).
    cuda_graph_capture_bytes: int | None = None
    cuda_graph_capture_sizes: list[int] = field(default_factory=list)
    cuda_graph_prefill_graphs: int = 0
    cuda_graph_max_bs_fits: int | None = None
    cuda_graph_chunk_fits: int | None = None  # the largest halved --chunked-prefill-size whose capture fits
    # What the budget takes as given rather than from the release's code or a measurement, with its range:
    # [{"term", "value", "low", "high", "why"}] (bytes). --gpu-free is the free memory at load and nothing else.
    assumed: list[dict] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)  # what would make SGLang's sizing raise
    notes: list[str] = field(default_factory=list)

    def to_dict(self) -> dict:
        return asdict(self)


def _int(value: object, default: int | None = None) -> int | None:
    if not isinstance(value, (int, float, str)):
        return default
    try:
        return int(value)
    except ValueError:
        return default


def kv_dtype_bytes(model: ModelFacts, launch: Launch) -> float:
    """`ModelRunner.configure_kv_cache_dtype`: auto = the model dtype; fp8_* = 1 byte; fp4 = half."""
    kv = str(launch.get("kv_cache_dtype", "auto")).lower()
    if kv.startswith("fp8") or kv == "int8":
        return 1
    if kv.startswith("fp4"):
        return 0.5
    if kv in _DTYPE_BYTES:
        return _DTYPE_BYTES[kv]
    return model_dtype_bytes(model, launch)


def hybrid_layers(model: ModelFacts) -> tuple[list[int], list[int]]:
    """(linear, full-attention) layer ids: `Qwen3NextConfig.layers_block_type` (configs/qwen3_next.py),
    which Qwen3.5/3.8's text config inherits: layer l is full attention when (l + 1) is a multiple
    of `full_attention_interval`."""
    n = int(model.text.get("num_hidden_layers") or 0)
    interval = int(model.text.get("full_attention_interval") or 4)
    full = [layer for layer in range(n) if (layer + 1) % interval == 0]
    linear = [layer for layer in range(n) if (layer + 1) % interval != 0]
    return linear, full


def _divide(a: int, b: int) -> int:
    return a // b


def gdn_state_bytes(model: ModelFacts, attn_tp: int, ssm_dtype_bytes: int, conv_dtype_bytes: int) -> tuple[int, int]:
    """(conv, ssm) bytes of one state slot over all linear layers.

    `Mamba2StateShape.create` (configs/mamba_utils.py) with the arguments
    `Qwen3NextConfig.mamba2_cache_params` passes (configs/qwen3_next.py):
    intermediate_size = value heads x value dim, n_groups = key heads (extended to a multiple of
    TP when it does not divide), conv_dim = intermediate + 2 x n_groups x key dim, conv state
    (conv_dim / TP, kernel - 1), temporal state (value heads / TP, value dim, key dim);
    `BaseLinearStateParams.mamba_cache_per_req` sums them per layer in their dtypes.
    """
    t = model.text
    key_heads = int(t["linear_num_key_heads"])
    value_heads = int(t["linear_num_value_heads"])
    key_dim = int(t["linear_key_head_dim"])
    value_dim = int(t["linear_value_head_dim"])
    kernel = int(t.get("linear_conv_kernel_dim") or 4)
    n_groups = key_heads
    if n_groups % attn_tp != 0:  # extra_groups_for_head_shards
        n_groups += attn_tp - n_groups
    conv_dim = value_heads * value_dim + 2 * n_groups * key_dim
    conv_numel = _divide(conv_dim, attn_tp) * (kernel - 1)
    ssm_numel = _divide(value_heads, attn_tp) * value_dim * key_dim
    layers = len(hybrid_layers(model)[0])
    return conv_numel * conv_dtype_bytes * layers, ssm_numel * ssm_dtype_bytes * layers


def replayssm_ring_bytes(model: ModelFacts, attn_tp: int, conv_dtype_bytes: int, record_len: int) -> int:
    """`BaseLinearStateParams.replayssm_ring_bytes_per_req` for GDN (configs/mamba_utils.py, 0.5.19 on)."""
    t = model.text
    hv = _divide(int(t["linear_num_value_heads"]), attn_tp)
    v_dim, k_dim = int(t["linear_value_head_dim"]), int(t["linear_key_head_dim"])
    key_heads = int(t["linear_num_key_heads"])
    h_k = key_heads // attn_tp if key_heads % attn_tp == 0 else -(-key_heads // attn_tp)
    per_layer = hv * record_len * v_dim * conv_dtype_bytes + h_k * record_len * k_dim * conv_dtype_bytes + hv * record_len * 4
    if conv_dtype_bytes != 4:
        per_layer += hv * record_len * v_dim * conv_dtype_bytes + h_k * record_len * k_dim * conv_dtype_bytes
    return per_layer * len(hybrid_layers(model)[0])


def default_mem_fraction(release: ReleaseCode, launch: Launch, model: ModelFacts, gpu_total_gib: float, tp: int,
                         pp: int) -> float:
    """An approximation of `ServerArgs._handle_gpu_memory_settings` (server_args.py; from 0.5.19
    `handle_gpu_memory_settings` in arg_groups/memory_hook.py): reserved MiB = 512 + activations
    (chunked prefill x 1.5) + decode graphs (max bs x 2, where the launch does not turn them off) + attention DP's
    padding (max bs x DP size x 3, x 1.5 more above a max bs of 300, with --enable-dp-attention) + TP x PP / 8 GiB,
    at least 10 GiB above 60 GiB cards, + DeepEP's all-to-all buffers (2 GiB from 0.5.15, with --moe-a2a-backend
    deepep and decode graphs on); then `adjust_mem_fraction_for_vlm` for multimodal models. The card tier's chunked
    prefill and decode max bs are the release's own, and so are the constants (`non_static.graph_defaults`: 2048 and
    24 on a 24 GB card in 0.5.10-0.5.19, 4096 and 48 from 0.5.20). Left out: the prefill graphs' term (`len(prefill
    bs) x 8` where the release charges them and their backend is on at that point of its resolution), 0.5.10-0.5.13's
    speculative reserve (4 GiB, STANDALONE 6 GiB), the post-capture sizing branch (0.5.16 on)."""
    gpu_mem = gpu_total_gib * 1024
    defaults = release.memoized("graph_defaults", non_static.graph_defaults)
    chunked, max_bs = non_static.default_for(defaults, gpu_total_gib, tp)
    chunked = _int(launch.get("chunked_prefill_size"), chunked) or chunked
    max_bs = _int(launch.get("cuda_graph_max_bs_decode") or launch.get("cuda_graph_max_bs"), max_bs) or max_bs
    activation = max(chunked, 2048) if chunked > 0 else max(_int(launch.get("max_prefill_tokens"), 16384) or 16384, 2048)
    graphs = 0.0 if non_static.graphs_off(launch, "decode") else max_bs * defaults.decode_graph_mib_per_bs
    decoding = launch.get("disaggregation_mode") != "prefill"
    if launch.get("enable_dp_attention", False) and decoding:
        # Attention DP's padding, whether or not the decode graphs are captured (0.5.23's memory_hook.py
        # reserve_for_graph_mb: `max_bs * attn_dp_size * 3`, `* 1.5` more above a max bs of 300).
        dp = launch.int_value("dp_size") or 1
        graphs += max_bs * dp * defaults.dp_mib_per_bs
        if defaults.dp_large_above is not None and max_bs > defaults.dp_large_above:
            graphs += max_bs * dp * defaults.dp_large_mib_per_bs
    reserved = defaults.reserve_floor_mib + activation * 1.5 + graphs + tp * pp / 8 * 1024
    if gpu_mem > 60 * 1024:
        reserved = max(reserved, 10 * 1024)
    if launch.get("moe_a2a_backend") == "deepep" and decoding and not non_static.graphs_off(launch, "decode"):
        # DeepEP's all-to-all buffers, on top of the floor (0.5.15 on: 2 GiB; reserve_for_deepep_a2a_mb from 0.5.16).
        reserved += defaults.deepep_mib
    fraction = round((gpu_mem - reserved) / gpu_mem, 3)
    vision = model.config.get("vision_config")
    if isinstance(vision, dict) and not launch.get("language_only", False):
        ratio = int(vision.get("num_hidden_layers", 24)) * int(vision.get("hidden_size", 1024)) ** 2 / (24 * 1024**2)
        fraction *= 0.95 * max(0.8, min(1.05, 1.0 - 0.1 * (ratio - 1.0)))
    return fraction


def resolve_mamba_strategy(release: ReleaseCode, launch: Launch, model: ModelFacts,
                           patch_states: dict[str, str] | None = None) -> tuple[str, bool]:
    """(strategy, disable_overlap_schedule) after `_handle_mamba_radix_cache` (server_args.py; from
    0.5.19 the mamba-radix-cache override in arg_groups/overrides.py): `auto` becomes extra_buffer
    when overlap or paging is wanted and the architecture supports it with the triton linear-attention
    backend, else no_buffer with the overlap scheduler turned off. 0.5.10-0.5.13 read
    `--mamba-scheduler-strategy` and turn `auto` into no_buffer whatever the launch. With
    spec-mamba-lazy-buffer applied, a draft with the overlap scheduler on, one pipeline stage and no
    PD disaggregation gets extra_buffer_lazy instead (its snippet's conditions)."""
    strategy = str(launch.get(release.mamba_strategy_dest, "auto"))
    disable_overlap = bool(launch.get("disable_overlap_schedule", False))
    if launch.get("disable_radix_cache", False) or strategy != "auto":
        return strategy, disable_overlap
    if release.mamba_auto_always_no_buffer:
        return "no_buffer", disable_overlap
    page = _int(launch.get("page_size"), 1) or 1
    supports = model.is_hybrid_gdn and str(launch.get("linear_attn_backend", "triton")) == "triton"
    if (not disable_overlap or page > 1) and supports:
        lazy = ((patch_states or {}).get("spec-mamba-lazy-buffer") == "applied" and launch.get("speculative_algorithm")
                and not disable_overlap and (launch.int_value("pp_size") or 1) == 1
                and str(launch.get("disaggregation_mode", "null")) == "null")
        return "extra_buffer_lazy" if lazy else "extra_buffer", disable_overlap
    return "no_buffer", True


def mamba_ratio(release: ReleaseCode, launch: Launch, strategy: str, disable_overlap: bool, environ: dict) -> int:
    """`_calculate_mamba_ratio` (state slots one running request holds) with the release's constants."""
    if launch.get("disable_radix_cache", False):
        return 1
    c = release.ratio_constants
    skip = release.ratio_reads_skip_decode_lock and bool(release.env("SGLANG_OPT_MAMBA_SKIP_DECODE_LOCK", environ))
    base = c["MAMBA_CACHE_SIZE_MAX_RUNNING_REQUESTS_RATIO"] - (c.get("MAMBA_CACHE_BASE_RATIO_DROP_ON_SKIP", 0) if skip else 0)
    additional = 0
    if strategy in ("extra_buffer", "extra_buffer_lazy"):
        if not disable_overlap:
            additional = (c["MAMBA_CACHE_V2_ADDITIONAL_RATIO_OVERLAP_LAZY"] if strategy == "extra_buffer_lazy"
                          else c["MAMBA_CACHE_V2_ADDITIONAL_RATIO_OVERLAP"])
        else:
            additional = c["MAMBA_CACHE_V2_ADDITIONAL_RATIO_NO_OVERLAP"]
    elif skip:
        additional = c.get("MAMBA_CACHE_V2_ADDITIONAL_RATIO_NO_BUFFER", 0)
    return base + additional


def speculative(launch: Launch, draft: ModelFacts | None = None) -> tuple[str | None, int | None, int | None]:
    """(algorithm, topk, draft tokens) after `_auto_choose_speculative_params` (speculative hook):
    steps/topk/draft tokens default to (3, 1, 4); DFLASH takes its draft's block size (dflash.block_size), DSPARK
    16 draft tokens."""
    algo = launch.get("speculative_algorithm")
    if not algo:
        return None, None, None
    algo = str(algo).upper()
    topk = _int(launch.get("speculative_eagle_topk"))
    tokens = _int(launch.get("speculative_num_draft_tokens"))
    if algo == "DFLASH":
        return algo, topk, tokens or dflash.block_size(launch, draft)
    if algo == "DSPARK":
        return algo, topk, tokens or 16
    if launch.get("speculative_num_steps") is None:
        topk, tokens = topk or 1, tokens or 4
    return algo, topk, tokens or 4


def draft_layer_count(model: ModelFacts, draft: ModelFacts | None, mtp_read_right: bool) -> int | None:
    """`ModelRunner.eagle_draft_num_layers`: the draft config's `num_nextn_predict_layers`, else
    max(num_hidden_layers, num_attention_layers). A Qwen3.5/3.8 MTP draft declares its depth only as
    `mtp_num_hidden_layers`, which ModelConfig reads only where the mtp-layer-detection patch is
    applied (or upstream fixed it); otherwise it falls back to all the model's layers."""
    source = draft or model
    nextn = source.text.get("num_nextn_predict_layers")
    if nextn is not None:
        return int(nextn)
    if source.text.get("mtp_num_hidden_layers") is not None and mtp_read_right:
        return int(source.text["mtp_num_hidden_layers"])
    return int(source.text.get("num_hidden_layers") or 0) or None


def derived_context_length(release: ReleaseCode, model: ModelFacts) -> int:
    """`get_context_length(hf_text_config)`: the first of the release's CONTEXT_LENGTH_KEYS the
    config has, times the rope-scaling factor (1 when `original_max_position_embeddings` is given
    or the rope type is llama3); 2048 when none is there."""
    rope = model.text.get("rope_scaling")
    factor: float = 1
    if isinstance(rope, dict) and rope:
        raw = rope.get("factor", 1)
        factor = raw if isinstance(raw, (int, float)) and not isinstance(raw, bool) else 1
        if "original_max_position_embeddings" in rope or rope.get("rope_type") == "llama3":
            factor = 1
    for key in release.context_length_keys:
        value = model.text.get(key)
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return int(factor * value)
    return 2048


def data_parallel(release: ReleaseCode, launch: Launch) -> tuple[int, int]:
    """(replicas, attention-DP size). The data-parallel controller starts `dp_size` schedulers and
    gives each tp x pp GPUs (`launch_dp_schedulers`: base_gpu_id += tp_size x pp_size), unless
    attention DP runs: then the DP groups live inside one TP group of tp x pp GPUs. Before 0.5.22
    `--enable-dp-attention` makes `--dp-size` the attention-DP size; from 0.5.22 that is
    `--attn-dp-size`, and `_handle_deprecated_dp_attention` turns `--dp-size N --enable-dp-attention`
    into `--attn-dp-size N --dp-size 1`."""
    dp = _int(launch.get("dp_size"), 1) or 1
    dp_attention = bool(launch.get("enable_dp_attention", False))
    if "attn_dp_size" in release.flags.dests():
        attn = _int(launch.get("attn_dp_size"), 1) or 1
        if dp_attention and attn == 1:
            return 1, dp
        return dp, attn
    return (1, dp) if dp_attention else (dp, 1)


# The MTP drafts whose own embed_tokens/lm_head the draft-lmhead-placeholder patch leaves unallocated.
PLACEHOLDER_DRAFTS = ("Qwen3_5ForCausalLMMTP", "Qwen3NextForCausalLMMTP")


def compute(release: ReleaseCode, launch: Launch, model: ModelFacts, draft: ModelFacts | None, gpu: GpuFacts,
            environ: dict, patch_states: dict[str, str], classes: ClassWeights | Unavailable | None = None) -> Budget:
    b = Budget()
    tp = _int(launch.get("tp_size"), 1) or 1
    pp = _int(launch.get("pp_size"), 1) or 1
    replicas, dp = data_parallel(release, launch)
    attn_tp = max(1, tp // dp)
    b.tp_size, b.attn_dp_size, b.dp_replicas, b.gpus_needed = tp, dp, replicas, replicas * tp * pp
    algo, topk, draft_tokens = speculative(launch, draft)
    b.speculative_algorithm, b.draft_tokens = algo, draft_tokens

    # Free memory at weight-load start: `ModelRunner.init_torch_distributed` returns it as
    # pre_model_load_memory (GiB, "avail mem" in the log).
    b.free_at_load_gib = gpu.free_gib
    mem_fraction = launch.float_value("mem_fraction_static")
    if mem_fraction is not None:
        b.mem_fraction_static, b.mem_fraction_source = mem_fraction, "flag"
    elif gpu.total_gib is not None:
        b.mem_fraction_static = default_mem_fraction(release, launch, model, gpu.total_gib, tp, pp)
        b.mem_fraction_source = "estimate"

    # `_handle_attention_backend_compatibility`: aiter (ROCm) with a context over 8192 scales the
    # fraction by 0.85 (from 0.5.20 not when it was explicit and SGLANG_AITER_HONOR_EXPLICIT_MEM_FRACTION is set).
    context = _int(launch.get("context_length")) or derived_context_length(release, model)
    if b.mem_fraction_static is not None and launch.get("attention_backend") == "aiter" and context > 8192:
        honored = b.mem_fraction_source == "flag" and "SGLANG_AITER_HONOR_EXPLICIT_MEM_FRACTION" in release.env_defaults \
            and str(environ.get("SGLANG_AITER_HONOR_EXPLICIT_MEM_FRACTION", "")).lower() in ("1", "true")
        if not honored:
            b.mem_fraction_static *= 0.85
            b.notes.append("aiter with a context over 8192: mem-fraction-static x 0.85")

    # Weights: the target's per TP x PP rank (sharded tensors split, replicated ones whole:
    # tp_sharding), then the draft model's (loaded before the KV pool is sized: "draft weights are
    # now counted" in `_profile_available_bytes`). The target skips the checkpoint's mtp.* tensors
    # (only the MTP draft loads them, with speculative decoding on).
    dp_encoder = bool(launch.get("mm_enable_dp_encoder"))
    mtp_bytes = model.mtp_bytes
    if mtp_bytes is None and model.has_mtp_weights:
        # Only the index names them (no headers, so no sizes): their size from the config's geometry.
        stored = str(model.text.get("torch_dtype") or model.config.get("torch_dtype") or "bfloat16")
        mtp_bytes = None if model.quantization else tp_sharding.mtp_bytes_from_geometry(
            model.text, _DTYPE_BYTES.get(stored, 2))
        if mtp_bytes is None:
            b.notes.append("the index names mtp.* tensors whose size the config does not give: counted as target weights")
        else:
            b.notes.append("mtp.* weights sized from the config (the index gives no tensor sizes)")
    # config.json alone (no index, no safetensors header): every figure below is an estimate from the config.
    config_only = model.weights_bytes is None and not model.tensor_bytes
    if mtp_bytes is None and config_only and model.mtp_layers and not model.quantization:
        stored = str(model.text.get("torch_dtype") or model.config.get("torch_dtype") or "bfloat16")
        mtp_bytes = tp_sharding.mtp_bytes_from_geometry(model.text, _DTYPE_BYTES.get(stored, 2))
    dp_lm_head = bool(launch.get("enable_dp_lm_head")) and dp > 1
    stored_bytes = _DTYPE_BYTES.get(str(model.text.get("torch_dtype") or model.config.get("torch_dtype") or "bfloat16"), 2)
    said = len(b.notes)
    arithmetic = _weights_by_arithmetic(b, model, launch, draft, algo, patch_states, mtp_bytes, stored_bytes,
                                        tp, pp, dp, attn_tp, dp_encoder, dp_lm_head)
    beyond = _beyond_checkpoint(b, classes, model, mtp_bytes) if isinstance(classes, ClassWeights) else None
    if beyond is not None:
        b.notes.append(beyond)  # the checkpoint's own figure stands (the arithmetic's, with its notes)
    elif isinstance(classes, ClassWeights):
        del b.notes[said:]  # the arithmetic's notes are not what the budget uses
        _weights_by_class(b, classes, patch_states, arithmetic)
        if config_only:
            b.weights_estimated = True
            b.notes.append(f"weights are an estimate: {model.path} has config.json alone (no index, no safetensors "
                           f"header), sized as the release's classes allocate it with the config's dtype"
                           + (" and quantization" if model.quantization else ""))
    else:
        if config_only and not model.quantization:
            geometry = tp_sharding.geometry_tensors(model.config, model.text, stored_bytes, whole=True)
            if geometry:
                b.weights_bytes = tp_sharding.per_rank_bytes(geometry, tp, pp, dp_encoder, dp > 1, attn_tp, dp_lm_head)
                b.weights_from, b.weights_estimated = "config geometry", True
                b.notes.append(f"weights are an estimate: {model.path} has config.json alone (no index, no "
                               f"safetensors header), sized from its geometry and dtype by the release's split rules")
        if isinstance(classes, Unavailable):
            b.notes.append(f"weights from the checkpoint's {b.weights_from}, not the release's model classes: "
                           f"{classes.reason}{_missing_fields(model, classes)}")

    b.mm_feature_pool_bytes = mm_feature_pool.late_pool_bytes(release, launch, model, environ)
    if b.free_at_load_gib is not None and b.mem_fraction_static is not None:
        b.slack_bytes = int(b.free_at_load_gib * (1 - b.mem_fraction_static) * GIB)
    if b.free_at_load_gib is None or b.mem_fraction_static is None or b.weights_bytes is None:
        b.not_computed = _not_computed(b, model)
        b.notes.append(f"budget not computed: {b.not_computed}")
        _requests_only(b, release, launch, model, algo)
        return b

    # `_profile_available_bytes`: available after load minus the non-static slack, minus (where the
    # release has `mm_runtime_reservation_gb`) the multimodal reserve.
    pre = b.free_at_load_gib
    available = pre - (b.weights_bytes + b.draft_weights_bytes) / GIB
    slack = pre * (1 - b.mem_fraction_static)
    b.slack_bytes = int(slack * GIB)
    is_multimodal = mm_feature_pool.is_multimodal(release, launch, model)
    mm_gib = 0.0
    if release.multimodal_reservation and is_multimodal:
        mb = release.env_number("SGLANG_VLM_CACHE_SIZE_MB", environ) or 0
        if mm_feature_pool.transport(release, launch, environ) in ("cuda_ipc", "cuda_vmm"):
            mb += release.env_number("SGLANG_MM_FEATURE_CACHE_MB", environ) or 0
        mm_gib = mb / 1024
    b.multimodal_reserve_bytes = int(mm_gib * GIB)
    rest = available - slack - mm_gib

    requested = _int(launch.get("max_running_requests"))
    b.max_running_source = "flag" if requested is not None else ""
    if requested is None and algo is not None:
        requested, b.max_running_source = release.spec_default_max_running or 48, "speculative default"
    b.requested_max_running_requests = requested

    if model.is_hybrid_gdn:
        rest = _hybrid_state(b, release, launch, model, environ, rest, requested, attn_tp, dp, algo, draft_tokens,
                             patch_states)

    if rest <= 0:
        b.errors.append("budget-negative")
    # KV cell: `DefaultPoolConfigurator._compute_cell_size` (model_executor/pool_configurator.py).
    linear, full = hybrid_layers(model) if model.is_hybrid_gdn else ([], list(range(int(model.text.get("num_hidden_layers") or 0))))
    b.full_attention_layers = len(full) // pp
    heads = int(model.text.get("num_attention_heads") or 1)
    kv_heads_total = int(model.text.get("num_key_value_heads") or heads)
    head_dim = int(model.text.get("head_dim") or int(model.text.get("hidden_size") or 0) // heads)
    kv_heads = max(1, kv_heads_total // attn_tp)  # ModelConfig.get_num_kv_heads
    b.kv_dtype_bytes = kv_dtype_bytes(model, launch)
    cell = kv_heads * (head_dim + head_dim) * b.full_attention_layers * b.kv_dtype_bytes
    if b.kv_dtype_bytes == 0.5:  # FP4: half the bytes plus one scale byte per 16 elements
        cell = kv_heads * head_dim * 2 * b.full_attention_layers * 0.5 + kv_heads * head_dim * b.full_attention_layers * 2 // 16
    cell = int(cell)
    if algo in dflash.FAMILY and release.dflash_draft_tp is not None:
        # The draft's own KV pool, priced into the target's cell (patchkit/doctor/dflash.py).
        priced = None if draft is None else dflash.draft_kv(
            release.dflash_draft_tp, launch, draft, model_dtype_bytes(draft, launch), cell, b.full_attention_layers,
            tp, attn_tp)
        if priced is None:
            b.notes.append(f"{algo}'s draft KV is not counted: no local draft config gives its layers")
        else:
            b.draft_layers, b.draft_kv_bytes_per_token, cell = priced.layers, priced.cell_bytes, priced.fused_cell_bytes
    if environ.get("SGLANG_ENABLE_POST_CAPTURE_KV_SIZING", "").lower() in ("1", "true"):
        b.notes.append("SGLANG_ENABLE_POST_CAPTURE_KV_SIZING: SGLang resizes the KV pool after graph capture; not modelled")
    if algo in EAGLE_FAMILY and launch.get("speculative_draft_model_path"):
        mtp_ok = patch_states.get("mtp-layer-detection") not in NOT_IN_PLACE
        b.draft_layers = draft_layer_count(model, draft, mtp_ok)
        if not release.eagle_draft_in_cell:
            b.notes.append("this release's KV pool reserves nothing for the EAGLE draft's KV (no eagle_draft_num_layers "
                           "in pool_configurator.py): the cell is the target's")
        elif b.draft_layers and b.full_attention_layers:
            cell = int(cell * (1 + b.draft_layers / b.full_attention_layers))
    elif algo in EAGLE_FAMILY and patch_states.get("mtp-draft-kv-budget") == "applied" and model.mtp_layers:
        # Without a draft path the release leaves the built-in MTP draft's layers out of the cell
        # (sglang#35566); the mtp-draft-kv-budget patch counts the target's `mtp_num_hidden_layers`.
        b.draft_layers = model.mtp_layers
        if b.full_attention_layers:
            cell = int(cell * (1 + b.draft_layers / b.full_attention_layers))
    b.kv_bytes_per_token = cell

    page = _int(launch.get("page_size"), 1) or 1
    b.kv_budget_bytes = max(0, int(rest * GIB))
    tokens = (b.kv_budget_bytes // cell) // page * page if cell else 0
    # `_apply_token_constraints`: --max-total-tokens only lowers the profiled value.
    user_limit = _int(launch.get("max_total_tokens"))
    if user_limit is not None:
        tokens = min(tokens, user_limit) // page * page
    b.kv_tokens = tokens
    b.context_length = _int(launch.get("context_length")) or derived_context_length(release, model)
    if b.context_length:
        b.max_request_tokens = max(0, min(b.context_length - 1, tokens - 1))

    # `resolve_max_num_reqs` / `_resolve_max_num_reqs`.
    estimated = max(min(int(tokens / (b.context_length or 4096) * 512), 4096), 2048)
    if requested is not None:
        effective = min(requested // dp, estimated if release.requested_capped_by_estimate else tokens // 2)
    else:
        effective = min(estimated, tokens // 2)
        b.max_running_source = "estimate"
        b.requested_max_running_requests = estimated
    if b.state_cap_requests is not None:
        effective = min(effective, b.state_cap_requests)
    b.effective_max_running_requests = effective
    if model.is_hybrid_gdn and effective <= 0 and "mamba-slots-zero" not in b.errors:
        b.errors.append("mamba-slots-zero")
    return b


def _weights_by_arithmetic(b: Budget, model: ModelFacts, launch: Launch, draft: ModelFacts | None, algo: str | None,
                           patch_states: dict[str, str], mtp_bytes: int | None, stored_bytes: int, tp: int, pp: int,
                           dp: int, attn_tp: int, dp_encoder: bool, dp_lm_head: bool) -> int | None:
    """Weights per GPU from the checkpoint's headers or index (patchkit/doctor/tp_sharding.py): into `b`, and
    returned (the cross-check of the model classes' figure)."""
    geometry = {} if model.headers_complete or model.quantization else tp_sharding.geometry_tensors(
        model.config, model.text, stored_bytes)
    if model.weights_bytes is not None and sum(geometry.values()) > model.weights_bytes - (mtp_bytes or 0):
        geometry = {}  # the config sizes more than the index holds: not this checkpoint's tensors
    if model.headers_complete:
        target = {k: v for k, v in model.tensor_bytes.items() if not tp_sharding.is_mtp(k)}
        b.weights_bytes = tp_sharding.per_rank_bytes(target, tp, pp, dp_encoder, dp > 1, attn_tp, dp_lm_head)
    elif model.weights_bytes is not None and geometry:
        # The index's total without every tensor's size: the tensors the config sizes by the release's rules,
        # the rest of the total divided by TP.
        total = model.weights_bytes - (mtp_bytes or 0)
        b.weights_bytes = tp_sharding.per_rank_from_index(total, geometry, tp, pp, dp_encoder, dp > 1, attn_tp,
                                                          dp_lm_head)
        # What the config does not size may be split over TP (as counted) or whole on every rank.
        b.weights_low_bytes = b.weights_bytes
        b.weights_high_bytes = b.weights_bytes + (max(0, total - sum(geometry.values())) - max(
            0, total - sum(geometry.values())) // tp) // pp
        b.notes.append("weights per rank from the index's total and the config's geometry (no tensor headers)")
    elif model.weights_bytes is not None:
        # Neither headers nor a geometry doctor can size: the replicated share is not known; divided by TP.
        b.weights_bytes = (model.weights_bytes - (mtp_bytes or 0)) // (tp * pp)
        b.weights_low_bytes, b.weights_high_bytes = b.weights_bytes, (model.weights_bytes - (mtp_bytes or 0)) // pp
    mtp_draft = algo in EAGLE_FAMILY and (draft is None or draft.path.resolve() == model.path.resolve())
    if algo and draft is not None and not mtp_draft and draft.weights_bytes is not None:
        b.draft_weights_bytes = draft.weights_bytes // tp
    elif mtp_draft and algo:
        mtp_tensors = {k: v for k, v in model.tensor_bytes.items() if tp_sharding.is_mtp(k)}
        b.draft_weights_bytes = (tp_sharding.per_rank_bytes(mtp_tensors, tp) if mtp_tensors and model.mtp_bytes is not None
                               else (mtp_bytes or 0) // tp)
        if patch_states.get("draft-lmhead-placeholder") in NOT_IN_PLACE and model.arch.startswith("Qwen3_5"):
            # Without the patch the MTP draft allocates its own embedding and lm_head before
            # `set_embed_and_head()` swaps in the target's (Qwen3_5MTP, models/qwen3_5_mtp.py).
            vocab, hidden = int(model.text.get("vocab_size") or 0), int(model.text.get("hidden_size") or 0)
            tensors = 1 if model.config.get("tie_word_embeddings") or model.text.get("tie_word_embeddings") else 2
            b.draft_weights_bytes += tensors * vocab * hidden * model_dtype_bytes(model, launch) // tp
            b.notes.append(f"draft-lmhead-placeholder {patch_states['draft-lmhead-placeholder']}: the MTP draft's own "
                           f"vocab tensors count")

    b.weights_from = ("headers" if model.headers_complete else "index and config geometry" if geometry
                      else "index" if model.weights_bytes is not None else "unknown")
    return b.weights_bytes


def _weights_by_class(b: Budget, classes: ClassWeights, patch_states: dict[str, str], arithmetic: int | None) -> None:
    """Weights per GPU as the release's own classes allocate them (patchkit/doctor/model_classes.py). A Qwen3.5 /
    Qwen3-Next MTP draft's own embed/lm_head count unless draft-lmhead-placeholder is in place (then the draft
    allocates none: the patched code built them empty, or the patch is applied before the launch)."""
    from_headers = b.weights_from == "headers"
    b.weights_bytes, b.weights_from = classes.target_bytes, "model classes"
    b.weights_low_bytes = b.weights_high_bytes = None
    b.notes.append(f"weights per GPU from the release's {classes.target_class}"
                   + (f" ({classes.quantization})" if classes.quantization else "")
                   + f" built on meta with this launch's partitioning ({classes.server_args.split(':')[0]} server args)")
    if classes.server_args.startswith("unresolved"):
        b.notes.append(f"the release's own argument checks did not pass in the build (its ServerArgs taken as "
                       f"parsed): {classes.server_args.split(': ', 1)[-1][:300]}")
    if from_headers and arithmetic and abs(arithmetic - classes.target_bytes) > 0.02 * classes.target_bytes:
        b.notes.append(f"the checkpoint's headers size {arithmetic / GIB:.2f} GiB per GPU, the model classes "
                       f"{classes.target_bytes / GIB:.2f} GiB (what the classes allocate is what loads)")
    if classes.draft_error is not None:
        b.notes.append(f"the draft's weights from its checkpoint: its class could not be built on meta "
                       f"({classes.draft_error})")
    if classes.draft_bytes is not None:
        draft_bytes = classes.draft_bytes
        if classes.draft_class in PLACEHOLDER_DRAFTS and classes.draft_own_vocab_bytes:
            if patch_states.get("draft-lmhead-placeholder") in ("applied", "upstream-fixed"):
                draft_bytes -= classes.draft_own_vocab_bytes
            else:
                b.notes.append(f"draft-lmhead-placeholder not applied: the {classes.draft_class} draft's own "
                               f"embed/lm_head count ({classes.draft_own_vocab_bytes / GIB:.2f} GiB per GPU)")
        b.draft_weights_bytes = draft_bytes


def _beyond_checkpoint(b: Budget, classes: ClassWeights, model: ModelFacts, mtp_bytes: int | None) -> str | None:
    """Where the release's classes, built on meta, allocate more parameters on one GPU than the checkpoint holds in
    all (its index's total or its headers, less the MTP head): they did not create the parameters the checkpoint's
    tensors load into (a 4-bit checkpoint built as bf16 comes out about 3x too large), so the checkpoint's own figure
    is taken, and the note says so. None where the classes' figure can be what loads."""
    if model.weights_bytes is None:
        return None
    params = sum(p for p, _ in classes.target_parts.values()) or classes.target_bytes
    whole = model.weights_bytes - (mtp_bytes or 0)
    if params <= whole * 1.02 + (64 << 20):  # vocab padding and the like
        return None
    method = f" ({model.quantization.get('quant_method', 'quantized')})" if model.quantization else ""
    return (f"the release's {classes.target_class} ({classes.quantization or 'no quantization'}) built on meta "
            f"allocates {params / GIB:.2f} GiB of parameters per GPU, more than the checkpoint{method} holds in all "
            f"({whole / GIB:.2f} GiB, its {model.weights_source}): it did not create the parameters the checkpoint's "
            f"tensors load into; weights from the checkpoint's {b.weights_from}, not the model classes")


def _missing_fields(model: ModelFacts, classes: Unavailable) -> str:
    """Where the classes were tried and failed: the hub fields config.json lacks (model.missing_fields)."""
    needed, defaulted = model.missing_fields()
    if not classes.tried or not (needed or defaulted):
        return ""
    parts = ([f"{', '.join(needed)}, which the release's classes need"] if needed else []) + (
        [f"{', '.join(defaulted)} (the release takes its default)"] if defaulted else [])
    return f"; config.json's text_config lacks {' and '.join(parts)}: Qwen3.5/3.8 configs on the hub carry them"


def _not_computed(b: Budget, model: ModelFacts) -> str:
    """What the budget lacks, in words, each with what supplies it."""
    missing = []
    if b.free_at_load_gib is None:
        missing.append("no GPU memory figure (no nvidia-smi; pass --gpu-memory and --gpu-free)")
    elif b.mem_fraction_static is None:
        missing.append("no --mem-fraction-static and no card total to estimate its default from (pass --gpu-memory)")
    if b.weights_bytes is None:
        why = (f"config.json alone of a {model.quantization.get('quant_method', 'quantized')} checkpoint is sized "
               f"only by the release's model classes: pass --python, an interpreter with torch"
               if model.quantization and not model.tensor_bytes and model.weights_bytes is None else
               "no model.safetensors.index.json or safetensors header, and the release's model classes were not built")
        missing.append(f"the weights' size is unknown ({model.path}: {why})")
    return "; ".join(missing)


def _requests_only(b: Budget, release: ReleaseCode, launch: Launch, model: ModelFacts, algo: str | None) -> None:
    requested = _int(launch.get("max_running_requests"))
    b.max_running_source = "flag" if requested is not None else ""
    if requested is None and algo is not None:
        requested, b.max_running_source = release.spec_default_max_running or 48, "speculative default"
    b.requested_max_running_requests = requested
    b.context_length = _int(launch.get("context_length")) or derived_context_length(release, model)


def _hybrid_state(b: Budget, release: ReleaseCode, launch: Launch, model: ModelFacts, environ: dict, rest: float,
                  requested: int | None, attn_tp: int, dp: int, algo: str | None, draft_tokens: int | None,
                  patch_states: dict[str, str]) -> float:
    """`handle_max_mamba_cache` (0.5.14-0.5.15) / `_handle_max_mamba_cache` (0.5.16 on): the state pool
    and the speculative intermediate state come out of the budget before the KV pool is sized."""
    b.hybrid = True
    ssm_name = launch.get("mamba_ssm_dtype") or environ.get("SGLANG_MAMBA_SSM_DTYPE") or model.text.get("mamba_ssm_dtype") or "float32"
    conv_name = release.env("SGLANG_MAMBA_CONV_DTYPE", environ) or "bfloat16"
    conv, ssm = gdn_state_bytes(model, attn_tp, _DTYPE_BYTES.get(str(ssm_name), 4), _DTYPE_BYTES.get(str(conv_name), 2))
    per_req = conv + ssm
    b.conv_state_bytes, b.ssm_state_bytes, b.state_slot_bytes = conv, ssm, per_req
    strategy, disable_overlap = resolve_mamba_strategy(release, launch, model, patch_states)
    ratio = mamba_ratio(release, launch, strategy, disable_overlap, environ)
    b.slots_per_request = ratio
    pad = 1 if release.padding_slot else 0
    has_spec = algo is not None
    replay_flag = launch.get("enable_linear_replayssm_spec") or launch.get("enable_gdn_replayssm_spec")
    replay = bool(replay_flag) and release.replayssm_in_budget
    fixed, ring_slot = 0, 0
    if replay:
        cache_len = _int(launch.get("linear_replayssm_cache_len"), 0)
        record_len = (draft_tokens if release.replayssm_record_len_from_draft else cache_len) or cache_len or draft_tokens or 4
        ring = replayssm_ring_bytes(model, attn_tp, _DTYPE_BYTES.get(str(conv_name), 2), record_len)
        if release.replayssm_fixed_pool:  # one ring per running request (+1)
            fixed = ring * ((requested or 1) // dp + 1)
        else:  # a ring beside every state slot
            ring_slot = ring
    D = draft_tokens or 0
    explicit = _int(launch.get("max_mamba_cache_size"))
    if release.intermediate_before_pool and has_spec and not replay:
        return _legacy_hybrid_state(b, launch, rest, requested, dp, per_req, D, explicit, ratio)
    if explicit is not None:
        slots = explicit // dp
        b.state_slots_source = "flag"
        if has_spec and not replay:
            capped = min((requested or 0) // dp, slots // ratio)
            b.intermediate_state_bytes = per_req * (capped + pad) * D
    elif launch.get("disable_radix_cache", False) and requested is not None:
        slots = requested // dp
        b.state_slots_source = "max-running-requests"
        if has_spec and not replay:
            b.intermediate_state_bytes = per_req * (slots + pad) * D
    else:
        b.state_slots_source = "ratio"
        r = launch.float_value("mamba_full_memory_ratio") or 0.9
        budget_bytes = rest * r / (1 + r) * GIB
        if has_spec and not replay:
            slots = int((budget_bytes - pad * per_req * (1 + D)) // (per_req * (1 + D / ratio)))
            capped = min((requested or 0) // dp, slots // ratio)
            b.intermediate_state_bytes = per_req * (capped + pad) * D
        else:
            per_slot = per_req + ring_slot
            slots = int((budget_bytes - fixed - pad * per_slot) // per_slot)
    b.state_slots = max(0, slots)  # the formula goes negative where nothing is left; SGLang raises
    if slots <= 0:
        # SGLang raises here ("Not enough GPU memory for hybrid (mamba/linear-attention) state cache").
        b.errors.append("mamba-slots-zero")
        b.state_cap_requests = 0
        b.intermediate_state_bytes = max(0, b.intermediate_state_bytes)
        return rest - b.intermediate_state_bytes / GIB
    rest -= b.intermediate_state_bytes / GIB
    b.state_cap_requests = slots // ratio
    b.state_pool_bytes = (slots + pad) * (per_req + ring_slot) + fixed
    b.replayssm_bytes = fixed + (slots + pad) * ring_slot
    return rest - b.state_pool_bytes / GIB


def _legacy_hybrid_state(b: Budget, launch: Launch, rest: float, requested: int | None, dp: int, per_req: int,
                         draft_tokens: int, explicit: int | None, ratio: int) -> float:
    """0.5.10-0.5.12's `handle_max_mamba_cache` with speculative decoding: the intermediate state of every running
    request (per slot x max_running_requests // dp x draft tokens) comes off first, then the pool is sized from what
    is left (explicit size // dp, max_running_requests // dp without the radix cache, or the ratio's share), no
    padding slot."""
    b.intermediate_state_bytes = per_req * ((requested or 0) // dp) * draft_tokens
    rest -= b.intermediate_state_bytes / GIB
    if explicit is not None:
        slots, b.state_slots_source = explicit // dp, "flag"
    elif launch.get("disable_radix_cache", False) and requested is not None:
        slots, b.state_slots_source = requested // dp, "max-running-requests"
    else:
        r = launch.float_value("mamba_full_memory_ratio") or 0.9
        slots, b.state_slots_source = int((rest * r / (1 + r) * GIB) // per_req), "ratio"
    b.state_slots = max(0, slots)  # the formula goes negative where nothing is left; SGLang raises
    if slots <= 0:
        b.errors.append("mamba-slots-zero")
        b.state_cap_requests = 0
        return rest
    b.state_cap_requests = slots // ratio
    b.state_pool_bytes = slots * per_req
    return rest - b.state_pool_bytes / GIB


def fill_non_static(budget: Budget, release: ReleaseCode, launch: Launch, model: ModelFacts,
                    draft: ModelFacts | None, gpu: GpuFacts) -> non_static.NonStatic:
    """Put non_static's estimate for the launch into the budget `--json` reports."""
    result = non_static.estimate(
        release, launch, model, draft, gpu, tp=budget.tp_size, act_bytes=model_dtype_bytes(model, launch),
        free_gib=budget.free_at_load_gib, mem_fraction_static=budget.mem_fraction_static,
        speculative_algorithm=budget.speculative_algorithm, draft_tokens=budget.draft_tokens,
        max_running_requests=budget.requested_max_running_requests if budget.max_running_source in (
            "flag", "speculative default") else None,
        running_requests=budget.effective_max_running_requests or budget.requested_max_running_requests,
        context_length=budget.context_length, late_bytes=budget.mm_feature_pool_bytes)
    budget.non_static_needed_bytes = result.needed_bytes
    budget.non_static_available_bytes = result.available_bytes
    budget.max_safe_mem_fraction_static = result.max_safe_mem_fraction_static
    budget.non_static_terms = dict(result.terms)
    budget.non_static_chunked_prefill_size = result.chunked_prefill_size
    budget.non_static_cuda_graph_max_bs = result.decode_graph_max_bs
    budget.cuda_graph_capture_bytes = result.capture_bytes
    budget.cuda_graph_capture_sizes = list(result.capture_sizes)
    budget.cuda_graph_prefill_graphs = result.prefill_graphs
    budget.cuda_graph_max_bs_fits = result.capture_max_bs_fits
    budget.cuda_graph_chunk_fits = result.capture_chunk_fits
    return result
