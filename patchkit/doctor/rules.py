"""The traps a launch can fall into. Each rule is one function from the gathered facts to
findings; `RULES` lists them by id (the ids are an interface)."""

from __future__ import annotations

import difflib
from dataclasses import dataclass
from typing import Callable, Iterator

from patchkit.doctor.budget import derived_context_length
from patchkit.doctor.context import Context as Context
from patchkit.doctor.launch import REMOVED_FLAGS
from patchkit.doctor.report import Finding, Fix, gib, mib
from patchkit.doctor.switches import DISABLED, NOT_IN_PLACE, switch_on
from patchkit.doctor.triggers import triggered
from patchkit.authoring.launch_trigger import Trigger
from patchkit.base.constants import ENV_DISABLE

Rule = Callable[[Context], Iterator[Finding]]


def spec_max_running_default(ctx: Context) -> Iterator[Finding]:
    b = ctx.budget
    if ctx.algo is None or ctx.launch.is_set("max_running_requests"):
        return
    default = ctx.release.spec_default_max_running or 48
    gets = ""
    if ctx.hybrid and b.effective_max_running_requests is not None and (b.state_slots or 0) > 0:
        gets = (f"; with {b.state_slots} state slots at {b.slots_per_request} per request this launch really "
                f"gets {b.effective_max_running_requests}")
    runs = b.effective_max_running_requests
    if runs is not None and runs <= 0:
        # The launch does not start as it is (the static budget's errors): there is no figure it "really runs"
        # to advise; the fix set (advice.one_set) names it once those errors' fixes are in place.
        yield Finding("spec-max-running-default", "warning",
                      f"speculative decoding ({ctx.algo}) without --max-running-requests sets it to {default}")
        return
    yield Finding.proposing(
        "spec-max-running-default", "warning",
        f"speculative decoding ({ctx.algo}) without --max-running-requests sets it to {default}{gets}",
        ctx.set("max_running_requests", "--max-running-requests", (runs or default) * b.attn_dp_size,
                note="what this launch really runs; set the concurrency you want" if runs else
                "the release's default; set the concurrency you want"))


def mamba_slots_cap(ctx: Context) -> Iterator[Finding]:
    b = ctx.budget
    if (not ctx.hybrid or b.state_cap_requests is None or b.state_cap_requests <= 0
            or b.slots_per_request is None):
        return
    asked = b.requested_max_running_requests
    if asked is None or b.max_running_source == "estimate" or b.state_cap_requests >= asked // b.attn_dp_size:
        return
    # Per GPU: each attention-DP rank serves asked // dp requests from its own pool (state_slots is
    # per rank); --max-mamba-cache-size is divided by the DP size, so the fix names dp x that.
    needed = asked // b.attn_dp_size * b.slots_per_request
    extra_bytes = max(0, needed - (b.state_slots or 0)) * b.state_slot_bytes
    cost = ""
    per_rank = f", {asked} over {b.attn_dp_size} attention-DP ranks" if b.attn_dp_size > 1 else ""
    if b.kv_bytes_per_token:
        lost = extra_bytes // b.kv_bytes_per_token
        cost = f", costing about {lost:,} KV tokens ({gib(extra_bytes)})"
        if b.kv_tokens is not None and lost >= b.kv_tokens:
            cost += ", more than the whole KV pool: lower --max-running-requests instead"
    yield Finding.proposing(
        "mamba-slots-cap", "warning",
        f"concurrency is capped at {b.state_cap_requests} = floor({b.state_slots} state slots / "
        f"{b.slots_per_request} per request), below the {asked // b.attn_dp_size} asked "
        f"({b.max_running_source}{per_rank}); {needed} slots per GPU would lift it{cost}",
        (ctx.set("max_mamba_cache_size", "--max-mamba-cache-size", needed * b.attn_dp_size),
         ctx.set("max_running_requests", "--max-running-requests", b.state_cap_requests * b.attn_dp_size,
                 note="what the state pool holds")))


def _startup_fails(ctx: Context) -> str:
    """"startup fails", said as far as the budget knows it: where the free memory at load is estimated and the launch
    starts somewhere in the estimate's range (budget.kv_tokens_high), at the estimate, not for certain."""
    b, g = ctx.budget, ctx.gpu
    if not b.kv_tokens_high or g.free_high_gib is None or b.free_at_load_gib is None:
        return "startup fails"
    return (f"startup fails at the estimated {b.free_at_load_gib:.2f} GiB free at load, though it may start with up to "
            f"{b.kv_tokens_high:,} KV tokens nearer {g.free_high_gib:.2f} GiB, the estimate's high end (pass --gpu-free)")


def mamba_slots_zero(ctx: Context) -> Iterator[Finding]:
    b = ctx.budget
    if not ctx.hybrid or "mamba-slots-zero" not in b.errors:
        return
    ratio, dp = b.slots_per_request or 1, b.attn_dp_size
    fp32 = b.ssm_state_bytes > 0 and "mamba_ssm_dtype" in ctx.release.flags.dests() \
        and str(ctx.launch.get("mamba_ssm_dtype") or ctx.environ.get("SGLANG_MAMBA_SSM_DTYPE")
                or (ctx.model.text.get("mamba_ssm_dtype") if ctx.model else None) or "float32") == "float32"
    yield Finding.proposing(
        "mamba-slots-zero", "error",
        f"the state pool gets {max(b.state_slots or 0, 0)} slots ({mib(b.state_slot_bytes)} each, "
        f"{b.slots_per_request} per request): {_startup_fails(ctx)} (\"Not enough GPU memory for hybrid state "
        f"cache\" or \"state cache is too small to serve any requests\")",
        (*_pending_patch_fixes(ctx), ctx.fraction_fix(),
         ctx.set("mamba_ssm_dtype", "--mamba-ssm-dtype", "bfloat16", note="half the state per slot") if fp32 else None,
         Fix(args=(ctx.flag("max_mamba_cache_size", "--max-mamba-cache-size"), str(ratio * dp),
                   ctx.flag("max_running_requests", "--max-running-requests"), str(dp)),
             note="one request at a time")),
        otherwise="this checkpoint leaves the state pool nothing on this card: more TP ranks or a smaller checkpoint")


def mamba_ratio_ignored(ctx: Context) -> Iterator[Finding]:
    if not ctx.launch.is_set("mamba_full_memory_ratio"):
        return
    why = None
    if ctx.launch.is_set("max_mamba_cache_size"):
        why = "--max-mamba-cache-size is set"
    elif ctx.launch.get("disable_radix_cache", False) and ctx.launch.is_set("max_running_requests"):
        why = "--disable-radix-cache with --max-running-requests sizes the state pool"
    if why:
        yield Finding.proposing("mamba-ratio-ignored", "warning", f"--mamba-full-memory-ratio has no effect: {why}",
                                ctx.drop("mamba_full_memory_ratio"))


def kv_below_context(ctx: Context) -> Iterator[Finding]:
    b = ctx.budget
    if not b.kv_tokens or not b.context_length or b.kv_tokens >= b.context_length:
        return  # no KV pool at all is budget-negative's finding
    yield Finding.proposing(
        "kv-below-context", "warning",
        f"the KV pool holds {b.kv_tokens:,} tokens, less than the {b.context_length:,}-token context: "
        f"a single request over {b.max_request_tokens:,} tokens is rejected with HTTP 400",
        (ctx.fraction_fix(note="the largest KV pool that leaves enough outside it"),
         ctx.set("context_length", "--context-length", b.kv_tokens, note="what the KV pool holds")))


def context_length_over_model(ctx: Context) -> Iterator[Finding]:
    """`ModelConfig._derive_context_length`: a --context-length above what the model's config gives
    (`get_context_length`) raises ValueError at startup unless SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN
    is set; with it, SGLang warns and serves the longer context."""
    asked = ctx.launch.int_value("context_length")
    if asked is None or ctx.model is None:
        return
    derived = derived_context_length(ctx.release, ctx.model)
    if asked <= derived:
        return
    flag = ctx.flag("context_length", "--context-length")
    if ctx.release.longer_context_raises and not ctx.release.env_flag("SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN", ctx.environ):
        yield Finding.proposing(
            "context-length-over-model", "error",
            f"{flag} {asked:,} is above the model's context length {derived:,} (config.json): "
            f"startup fails (_derive_context_length raises ValueError)",
            ctx.set("context_length", flag, derived,
                    note="SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN=1 in the environment if the model really takes more"))
    else:
        yield Finding.proposing(
            "context-length-over-model", "warning",
            f"{flag} {asked:,} is above the model's context length {derived:,} (config.json): SGLang "
            f"serves it, but outputs past {derived:,} tokens may be wrong or hit CUDA errors",
            ctx.set("context_length", flag, derived))


def max_total_tokens_cap_only(ctx: Context) -> Iterator[Finding]:
    b = ctx.budget
    limit = ctx.launch.int_value("max_total_tokens")
    if limit is None or b.kv_budget_bytes is None or not b.kv_bytes_per_token:
        return
    profiled = b.kv_budget_bytes // b.kv_bytes_per_token
    if limit > profiled:
        yield Finding.proposing(
            "max-total-tokens-cap-only", "warning",
            f"--max-total-tokens {limit:,} only caps the pool, it never grows it: "
            f"the memory budget gives {profiled:,} tokens",
            ctx.drop("max_total_tokens"))


def _replay_flag(ctx: Context) -> str | None:
    for name in ("--enable-linear-replayssm-spec", "--enable-gdn-replayssm-spec"):
        flag = ctx.release.flags.get(name)
        if flag is not None and flag.deprecated_for is None:
            return name
    return None


def replayssm_spec(ctx: Context) -> Iterator[Finding]:
    b = ctx.budget
    if not ctx.hybrid or ctx.algo is None:
        return
    name = _replay_flag(ctx)
    on = bool(ctx.launch.get("enable_linear_replayssm_spec") or ctx.launch.get("enable_gdn_replayssm_spec"))
    topk = ctx.launch.get("speculative_eagle_topk")
    decode = ctx.launch.get("linear_attn_decode_backend") or ctx.launch.get("linear_attn_backend") or "triton"
    if on:
        if topk not in (None, 1):
            yield Finding.proposing("replayssm-spec", "error",
                                    f"{name or 'ReplaySSM'} needs a linear draft chain, --speculative-eagle-topk is {topk}",
                                    ctx.set("speculative_eagle_topk", "--speculative-eagle-topk", 1))
        elif decode not in ("triton", "flashinfer"):
            backends = [u.flag.dest for u in ctx.launch.uses if u.flag is not None
                        and u.flag.dest in ("linear_attn_decode_backend", "linear_attn_backend")] or ["linear_attn_decode_backend"]
            yield Finding.proposing(
                "replayssm-spec", "error",
                f"{name or 'ReplaySSM'} needs the triton or flashinfer linear-attention decode backend, got {decode}",
                Fix(args=tuple(a for dest in dict.fromkeys(backends)
                               for a in (ctx.flag(dest, "--" + dest.replace("_", "-")), "triton"))))
        return
    if b.intermediate_state_bytes <= 0:
        return
    if name is None:
        yield Finding("replayssm-spec", "info",
                      f"speculative decoding reserves {gib(b.intermediate_state_bytes)} of intermediate state "
                      f"({b.draft_tokens} draft tokens); SGLang {ctx.release.version} has no ReplaySSM flag to avoid it "
                      f"(0.5.16: --enable-gdn-replayssm-spec, from 0.5.17: --enable-linear-replayssm-spec)")
        return
    usable = topk in (None, 1) and decode in ("triton", "flashinfer")
    needs = () if usable else (ctx.flag("speculative_eagle_topk", "--speculative-eagle-topk"), "1",
                               ctx.flag("linear_attn_decode_backend", "--linear-attn-decode-backend"), "triton")
    yield Finding.proposing(
        "replayssm-spec", "info",
        f"speculative decoding reserves {gib(b.intermediate_state_bytes)} of intermediate state "
        f"({b.draft_tokens} draft tokens x {mib(b.state_slot_bytes)} per request slot); "
        + ("ReplaySSM drops it (topk 1, triton/flashinfer decode)" if usable else
           "ReplaySSM would drop it but needs --speculative-eagle-topk 1 and a triton/flashinfer decode backend"),
        Fix(args=(name, *needs)))


def draft_quantization_inherit(ctx: Context) -> Iterator[Finding]:
    if ctx.algo is None or not ctx.launch.is_set("quantization"):
        return
    if ctx.launch.is_set("speculative_draft_model_quantization"):
        return
    draft = ctx.draft
    if draft is None or ctx.model is None or draft.path.resolve() == ctx.model.path.resolve():
        return  # an MTP head inside the target checkpoint is quantized with it
    if draft.quantization is not None:
        return
    flag = ctx.flag("speculative_draft_model_quantization", "--speculative-draft-model-quantization")
    yield Finding.proposing("draft-quantization-inherit", "warning",
                            f"--quantization {ctx.launch.get('quantization')} also applies to the draft model, whose "
                            f"checkpoint is not quantized: loading it fails or reads garbage",
                            Fix(args=(flag, "unquant")))


def _values_of(ctx: Context, name: str) -> tuple[str, ...]:
    """The values written after `name` on the launch line (its last use)."""
    return next((u.values for u in reversed(ctx.launch.uses) if u.written == name), ())


def _renamed(name: str, new: str, values: tuple[str, ...]) -> Fix:
    """`name VALUES` written as `new VALUES` (a replacement spelled `--flag=value` is taken whole)."""
    return Fix(args=(new,) if "=" in new else (new, *values), remove=(name,))


def _valid_value(ctx: Context, name: str, value: str, why: str) -> Fix:
    """A value the release takes for a flag the launch gave a bad one: the flag alone where it takes none, the
    closest choice, the recommended fraction; else the flag dropped (the release's default)."""
    flag = ctx.release.flags.get(name) or next((u.flag for u in ctx.launch.uses if u.written == name and u.flag), None)
    if flag is None:
        return Fix(remove=(name,))
    if not flag.takes_value:
        return Fix(args=(name,))  # setting the flag replaces every spelling of it on the line
    if flag.choices:
        close = difflib.get_close_matches(value, list(flag.choices), n=1, cutoff=0)
        return Fix(args=(name, close[0]))
    if flag.dest == "mem_fraction_static" and ctx.budget.recommended_mem_fraction_static is not None:
        return Fix(args=(name, f"{ctx.budget.recommended_mem_fraction_static:.2f}"))
    default = flag.default if flag.default is not None else "unset"
    return Fix(remove=(name,), note=f"the release's default: {default}")


def flags(ctx: Context) -> Iterator[Finding]:
    version = ctx.release.version
    current = [n for n, f in ctx.release.flags.by_name.items() if f.deprecated_for is None and f.refusal is None]
    for name in ctx.launch.unknown:
        values = _values_of(ctx, name)
        if name in REMOVED_FLAGS:
            yield Finding.proposing(
                "flag-removed", "error",
                f"{name} is not a flag of SGLang {version} (removed; argparse rejects the launch)",
                (_renamed(name, REMOVED_FLAGS[name], values), Fix(remove=(name,))))
        else:
            close = difflib.get_close_matches(name, current, n=1)
            yield Finding.proposing(
                "flag-unknown", "error",
                f"{name} is not a flag of SGLang {version} (argparse rejects the launch)"
                + (f"; did you mean {close[0]}?" if close else ""),
                (_renamed(name, close[0], values) if close else None, Fix(remove=(name,))))
    for name, message in ctx.launch.refused:
        yield Finding.proposing(
            "flag-removed", "error",
            f"{name} is refused by SGLang {version}'s parser (argparse rejects the launch): {message}",
            Fix(remove=(name,)))
    for name, new in ctx.launch.deprecated:
        yield Finding.proposing("flag-deprecated", "info", f"{name} is deprecated in SGLang {version}; {new} replaces it",
                                _renamed(name, new, _values_of(ctx, name)))
    for name, value, why in ctx.launch.bad_values:
        yield Finding.proposing("flag-value", "error", f"{name} {value}: {why}".replace("  ", " "),
                                (_valid_value(ctx, name, value, why), Fix(remove=(name,))))
    for name, value, choices in ctx.launch.unlisted:
        close = difflib.get_close_matches(value, list(choices), n=1)
        yield Finding.proposing(
            "flag-value", "warning",
            f"{name} {value} is not one of SGLang {version}'s built-in choices (argparse rejects it unless a plugin "
            f"registers it; they are {', '.join(choices[:8])}{', ...' if len(choices) > 8 else ''})",
            (Fix(args=(name, close[0])) if close else None, Fix(remove=(name,))))
    if ctx.launch.stray:
        yield Finding.proposing("flag-value", "error", f"arguments that belong to no flag: {' '.join(ctx.launch.stray)}",
                                Fix(remove=tuple(ctx.launch.stray)))


def feature_missing(ctx: Context) -> Iterator[Finding]:
    algo = ctx.launch.get("speculative_algorithm")
    if algo and ctx.release.spec_algorithms and str(algo).upper() not in ctx.release.spec_algorithms:
        yield Finding("feature-missing", "error",
                      f"SGLang {ctx.release.version} has no speculative algorithm {algo} (DSpark came in 0.5.16)",
                      "a release that has it: check the launch with patchkit doctor --version of that release")
    for facts, what in ((ctx.model, "model"), (ctx.draft, "draft model")):
        if facts is None or not facts.arch or (what == "draft model" and ctx.model and facts.path == ctx.model.path):
            continue
        if not ctx.release.defines_class("srt/models", facts.arch):
            hint = " (DFlash2 came in 0.5.19)" if "DFlash2" in facts.arch else ""
            yield Finding("feature-missing", "error",
                          f"SGLang {ctx.release.version} has no {what} architecture {facts.arch}{hint}",
                          "a release that has it: check the launch with patchkit doctor --version of that release")


def no_buffer_overlap(ctx: Context) -> Iterator[Finding]:
    if not ctx.hybrid or ctx.launch.get("disable_radix_cache", False):
        return
    dest = ctx.release.mamba_strategy_dest
    if ctx.launch.get(dest) == "no_buffer" and ctx.launch.is_set(dest) and ctx.release.no_buffer_asserts_overlap \
            and not ctx.launch.get("disable_overlap_schedule", False):
        yield Finding.proposing("no-buffer-overlap", "error",
                                "the no_buffer mamba strategy without --disable-overlap-schedule asserts at startup "
                                "(\"no_buffer do not support overlap schedule\")",
                                ctx.set("disable_overlap_schedule", "--disable-overlap-schedule"))


LAZY_BUFFER_PATCH = "spec-mamba-lazy-buffer"


def _lazy_buffer_runs_with_drafts(ctx: Context) -> bool:
    """Whether this release runs extra_buffer_lazy with a draft: the patch spec-mamba-lazy-buffer's
    own reading of the release's extra_buffer validator (its precondition), said once there."""
    from patchkit.base.errors import PatchkitError
    from patchkit.engine import registry

    found = [cls for cls in registry.load_all() if cls.ID == LAZY_BUFFER_PATCH]
    if not found:
        return False
    try:
        return found[0]().precondition(lambda rel: ctx.release.files.read(rel.removeprefix("sglang/"))) is None
    except PatchkitError:
        return False  # no extra_buffer validator to read: nothing to advise


def spec_extra_buffer(ctx: Context) -> Iterator[Finding]:
    """An explicit extra_buffer mamba strategy with speculative decoding (sglang#36537), where the
    release would run extra_buffer_lazy instead (what spec-mamba-lazy-buffer makes `auto` pick)."""
    dest = ctx.release.mamba_strategy_dest
    if (not ctx.hybrid or ctx.algo is None or ctx.launch.get("disable_radix_cache", False)
            or not ctx.launch.is_set(dest) or str(ctx.launch.get(dest)) != "extra_buffer"):
        return
    # The lazy buffer needs the overlap scheduler, one pipeline stage and no PD disaggregation:
    # elsewhere it would not start, and there is nothing better to advise.
    if (ctx.launch.get("disable_overlap_schedule", False) or (ctx.launch.int_value("pp_size") or 1) > 1
            or str(ctx.launch.get("disaggregation_mode", "null")) != "null" or not _lazy_buffer_runs_with_drafts(ctx)):
        return
    yield Finding.proposing("spec-extra-buffer", "warning",
                            f"the extra_buffer mamba strategy with speculative decoding ({ctx.algo}): once the radix cache "
                            f"evicts, the accept length can fall to 1.00 and stay there until a restart (sglang#36537: 92% "
                            f"of samples at KV usage >= 0.6; none with extra_buffer_lazy)",
                            ctx.set(dest, "--mamba-radix-cache-strategy", "extra_buffer_lazy"))


def _backends(ctx: Context, *dests: str) -> set[str]:
    return {str(ctx.launch.get(d)) for d in dests if ctx.launch.get(d)}


@dataclass(frozen=True)
class NeedsCapability:
    """A backend the launch names that this GPU's compute capability cannot run: an error
    finding, "<needs>; this GPU is SM x.y<then>" (one rule of this shape per table row)."""

    rule: str
    backend: str  # the backend value that needs the capability
    flags: tuple[str, ...]  # the launch options that name a backend
    runs_on: Callable[[tuple[int, int]], bool]  # whether a compute capability runs it
    needs: str
    then: str  # what happens, after the GPU's SM
    replacement: str  # the backend to name instead, in every flag that names this one
    applies: Callable[[Context], bool] = lambda ctx: True  # the launch (or model) it concerns
    # (patch id, then): a note instead of the error where that patch is applied
    patched: tuple[str, str] | None = None
    alternative: Callable[[Context], Fix] | None = None  # another fix, tried where the first does not clear it

    def fix(self, ctx: Context) -> Fix:
        named = [d for d in self.flags if str(ctx.launch.get(d)) == self.backend]
        return Fix(args=tuple(a for d in named for a in (ctx.flag(d, "--" + d.replace("_", "-")), self.replacement)))

    def __call__(self, ctx: Context) -> Iterator[Finding]:
        sm = ctx.gpu.sm
        if sm is None or self.runs_on(sm) or not self.applies(ctx) or self.backend not in _backends(ctx, *self.flags):
            return
        level, then = "error", self.then
        if self.patched is not None and ctx.patch_states.get(self.patched[0]) == "applied":
            level, then = "info", self.patched[1]
        yield Finding.proposing(self.rule, level, f"{self.needs}; this GPU is SM {sm[0]}.{sm[1]}{then}",
                                (self.fix(ctx), self.alternative(ctx) if self.alternative and level == "error" else None))


def _apply_command(ctx: Context, *patch_ids: str, note: str = "") -> Fix:
    """`patchkit apply` on the SGLang the doctor checked (its --python / --site-packages / --target, --patches)."""
    only = tuple(a for pid in patch_ids for a in ("--only", pid))
    return Fix(command=tuple(ctx.naming.argv("apply", *only)), patches=patch_ids, note=note)


_ATTENTION = ("attention_backend", "prefill_attention_backend", "decode_attention_backend")
_LINEAR_ATTENTION = ("linear_attn_backend", "linear_attn_decode_backend", "linear_attn_prefill_backend")

CAPABILITY_RULES = {rule.rule: rule for rule in (
    # Triton has no fp8e4nv below SM 8.9: the first decode dies inside Triton (fp8-kv-triton-sm89
    # turns that into a refusal at start-up; either way the launch does not serve).
    NeedsCapability(
        "fp8-triton-sm89", "triton", ("attention_backend", "decode_attention_backend"), lambda sm: sm >= (8, 9),
        "--kv-cache-dtype fp8_e4m3 with the triton attention backend needs SM 8.9 or newer",
        ", where triton has no fp8e4nv: the first decode fails", "flashinfer",
        applies=lambda ctx: str(ctx.launch.get("kv_cache_dtype", "auto")) == "fp8_e4m3",
        alternative=lambda ctx: ctx.set("kv_cache_dtype", "--kv-cache-dtype", "fp8_e5m2")),
    NeedsCapability(
        "cutedsl-decode-sm90", "cutedsl", ("linear_attn_decode_backend", "linear_attn_backend"), lambda sm: sm >= (9, 0),
        "the cutedsl linear-attention decode kernels need SM 9.0 or newer", ": decode hangs", "triton",
        patched=("gdn-cutedsl-decode-sm90", ": patchkit's gdn-cutedsl-decode-sm90 makes decode fall back to triton"),
        alternative=lambda ctx: _apply_command(ctx, "gdn-cutedsl-decode-sm90")),
    NeedsCapability(
        "flashinfer-gdn-sm90", "flashinfer", _LINEAR_ATTENTION, lambda sm: sm >= (9, 0),
        "FlashInfer's Gated DeltaNet kernels need SM 9.0 or newer", "", "triton",
        applies=lambda ctx: ctx.hybrid),
    NeedsCapability(
        "fa3-sm90", "fa3", _ATTENTION, lambda sm: sm[0] == 9,
        "FlashAttention 3 (fa3) runs on Hopper (SM 9.0) only", "", "flashinfer",
        alternative=lambda ctx: Fix(args=tuple(a for d in _ATTENTION if ctx.launch.get(d) == "fa3"
                                               for a in (ctx.flag(d, "--" + d.replace("_", "-")), "triton")))),
)}


# The FP4 KV cache recipes a GPU below SM 10.0 runs without native FP4 (nvfp4 is refused there
# by the release itself from 0.5.16).
_FP4_KV = ("fp4_e2m1", "fp4_mx_block16")
_FP4_PATCH = "fp4-kv-sm100"


def fp4_kv_below_sm100(ctx: Context) -> Iterator[Finding]:
    """An FP4 KV cache on a GPU without native FP4: it runs, every decode step dequantizing it,
    unless fp4-kv-sm100 is applied, which refuses it at start-up (its switch not set)."""
    kv, sm = str(ctx.launch.get("kv_cache_dtype", "auto")), ctx.gpu.sm
    if kv not in _FP4_KV or sm is None or sm >= (10, 0):
        return
    cost = ("below SM 10.0 there is no native FP4, so every decode step dequantizes the KV cache (FP4 KV decode "
            "measured at 4.4-5.4x the cost of FP8 KV on SM 8.0, flashinfer#4746)")
    switched_off = {item.strip() for item in ctx.environ.get(ENV_DISABLE, "").split(",")}  # as the snippet reads it
    if ctx.patch_states.get(_FP4_PATCH) == "applied" and _FP4_PATCH not in switched_off:
        level, then = "error", (f"; patchkit's {_FP4_PATCH} refuses it at start-up "
                                f"({ENV_DISABLE}={_FP4_PATCH} lets it run at that cost)")
    else:
        level, then = "warning", "; it halves the KV bytes of FP8 at that price"
    yield Finding.proposing("fp4-kv-below-sm100", level, f"--kv-cache-dtype {kv} on SM {sm[0]}.{sm[1]}: {cost}{then}",
                            ctx.set("kv_cache_dtype", "--kv-cache-dtype", "fp8_e5m2"))


def fp8_triton_sm89(ctx: Context) -> Iterator[Finding]:
    below = list(CAPABILITY_RULES["fp8-triton-sm89"](ctx))
    if below:
        yield from below
        return
    kv = str(ctx.launch.get("kv_cache_dtype", "auto"))
    if ctx.gpu.sm != (8, 9) or not kv.startswith("fp8"):
        return
    if "triton" in _backends(ctx, *_ATTENTION):
        yield Finding.proposing(
            "fp8-triton-sm89", "warning",
            f"--kv-cache-dtype {kv} with the triton attention backend on SM 8.9: triton has no FP8 "
            f"tensor-core attention below SM 9.0, decode upcasts every step (slow) and fp8_e4m3 "
            f"kernels may fail to compile",
            Fix(args=tuple(a for d in _ATTENTION if ctx.launch.get(d) == "triton"
                           for a in (ctx.flag(d, "--" + d.replace("_", "-")), "flashinfer"))))


def dtype_fp16_gdn(ctx: Context) -> Iterator[Finding]:
    if not ctx.hybrid or str(ctx.launch.get("dtype", "auto")) not in ("float16", "half"):
        return
    conv = ctx.release.env("SGLANG_MAMBA_CONV_DTYPE", ctx.environ) or "bfloat16"
    yield Finding("dtype-fp16-gdn", "warning",
                  f"--dtype {ctx.launch.get('dtype')} on a Gated DeltaNet model: the conv state is kept in {conv} "
                  f"(SGLANG_MAMBA_CONV_DTYPE), so the linear layers mix float16 activations with {conv} state",
                  "--dtype bfloat16", args=(ctx.flag("dtype", "--dtype"), "bfloat16"))


def reasoning_parser_forced(ctx: Context) -> Iterator[Finding]:
    if ctx.launch.get("reasoning_parser") != "qwen3-thinking":
        return
    yield Finding("reasoning-parser-forced", "warning",
                  "--reasoning-parser qwen3-thinking treats every reply as reasoning (force_reasoning): "
                  "requests with enable_thinking=false get their answer in reasoning_content",
                  "--reasoning-parser qwen3", args=("--reasoning-parser", "qwen3"))


def tool_parser_name(ctx: Context) -> Iterator[Finding]:
    name = ctx.launch.get("tool_call_parser")
    known = ctx.release.tool_call_parsers
    if not name or not known or name in known or name == "auto":
        return
    fix = "qwen3_coder" if name in ("qwen3_xml", "qwen3-xml") and "qwen3_coder" in known else None
    close = difflib.get_close_matches(str(name), sorted(known), n=1)
    yield Finding.proposing("tool-parser-name", "error",
                            f"--tool-call-parser {name} is not a parser of SGLang {ctx.release.version}"
                            + (" (vLLM's qwen3_xml is SGLang's qwen3_coder)" if fix else ""),
                            ctx.set("tool_call_parser", "--tool-call-parser", fix or (close[0] if close else "auto")))


def mtp_weights_missing(ctx: Context) -> Iterator[Finding]:
    if ctx.algo not in ("NEXTN", "EAGLE") or ctx.model is None or not ctx.model.mtp_layers:
        return
    draft = ctx.draft
    if draft is not None and draft.path.resolve() != ctx.model.path.resolve():
        return
    if ctx.model.has_mtp_weights is False:
        speculative = tuple(dict.fromkeys(u.written for u in ctx.launch.uses
                                          if u.flag is not None and u.flag.dest.startswith("speculative_")))
        yield Finding.proposing(
            "mtp-weights-missing", "error",
            f"{ctx.algo} uses the checkpoint's MTP head, but {ctx.model.path} has no mtp.* weights "
            f"(a quantized or pruned export dropped them): the draft runs on random weights",
            Fix(remove=speculative, note="no speculative decoding; or a checkpoint with its mtp.* tensors"))


def pcie_custom_allreduce(ctx: Context) -> Iterator[Finding]:
    if ctx.budget.tp_size <= 1 or ctx.gpu.interconnect != "pcie" or ctx.launch.get("disable_custom_all_reduce", False):
        return
    yield Finding("pcie-custom-allreduce", "warning",
                  f"TP {ctx.budget.tp_size} over PCIe with SGLang's custom all-reduce: it needs peer-to-peer "
                  f"access and hangs or is slower than NCCL without NVLink",
                  "--disable-custom-all-reduce", args=(ctx.flag("disable_custom_all_reduce", "--disable-custom-all-reduce"),))


def integrated_gpu_headroom(ctx: Context) -> Iterator[Finding]:
    f = ctx.budget.mem_fraction_static
    if not ctx.gpu.integrated or f is None or f <= 0.80:
        return
    yield Finding.proposing(
        "integrated-gpu-headroom", "warning",
        f"unified-memory GPU (GB10 class): --mem-fraction-static {f:.3f} takes the host's RAM too; "
        f"the OS and the tokenizer processes need headroom (at most 0.80)",
        ctx.fraction_fix(),
        otherwise="no fraction up to 0.80 leaves this launch enough outside the static pools on this memory")


def launch_declarations() -> dict[str, Trigger]:
    """The `LAUNCH` declaration of every loaded patch (built-in and `--patches` sets), by id."""
    from patchkit.engine import registry

    return {cls.ID: cls.LAUNCH for cls in registry.load_all() if cls.LAUNCH is not None}


def _put_in_place(ctx: Context, pid: str, note: str = "") -> Fix:
    """The fix that puts a patch not in force in place: switching it back on where SGLANG_PATCHKIT_DISABLE
    switches it off (patchkit/doctor/switches.py), else `patchkit apply --only ID`."""
    if ctx.patch_states.get(pid) == DISABLED:
        return Fix(command=switch_on(ctx.environ, (pid,)), patches=(pid,), note=note)
    return _apply_command(ctx, pid, note=note)


def _pending_patch_fixes(ctx: Context) -> tuple[Fix, ...]:
    """For each patch this launch depends on that is not in force, `patchkit apply --only ID` (or, where the
    launch's SGLANG_PATCHKIT_DISABLE switches it off, switching it back on): proposed first for the static budget's
    errors, as a patch may free what they lack (draft-lmhead-placeholder drops an MTP draft's own vocab tensors).
    The doctor checks each with the patch in force and keeps those that clear the error."""
    return tuple(_put_in_place(ctx, pid, note=why) for pid, _level, why in triggered(ctx, launch_declarations())
                 if ctx.patch_states.get(pid) in NOT_IN_PLACE)


def patch_needed(ctx: Context) -> Iterator[Finding]:
    triggers = triggered(ctx, launch_declarations())
    for pid, level, why in triggers:
        state = ctx.patch_states.get(pid)
        if state == DISABLED:
            yield Finding.proposing("patch-needed", level, f"patchkit patch {pid} is applied in this SGLang but "
                                    f"switched off by the launch's {ENV_DISABLE} (this environment's, or the "
                                    f"line's own): {why}", _put_in_place(ctx, pid))
        elif state in NOT_IN_PLACE:
            yield Finding.proposing("patch-needed", level, f"patchkit patch {pid} is {state} in this SGLang: {why}",
                                    _apply_command(ctx, pid),
                                    otherwise=f"`{ctx.naming.command('status')}` names why {pid} is {state}")
    # Patches this module has no launch trigger for (e.g. ones added after it) are listed once; one switched off
    # that the launch does not depend on is the user's choice.
    known = {pid for pid, _, _ in triggers}
    others = sorted(pid for pid, state in ctx.patch_states.items()
                    if state in NOT_IN_PLACE and state != DISABLED and pid not in known)
    if others:
        yield Finding.proposing(
            "patch-needed", "info",
            f"also not applied in this SGLang: {', '.join(others)} (`patchkit list` says what each fixes)",
            Fix(command=tuple(ctx.naming.argv("apply")), patches=tuple(others)))


def budget_negative(ctx: Context) -> Iterator[Finding]:
    b = ctx.budget
    if "budget-negative" not in b.errors:
        return
    more_tp = None
    if ctx.gpu.count is not None and b.tp_size * 2 * (ctx.launch.int_value("pp_size") or 1) * b.dp_replicas <= ctx.gpu.count:
        more_tp = ctx.set("tp_size", "--tp-size", b.tp_size * 2)
    yield Finding.proposing(
        "budget-negative", "error",
        f"weights ({gib(b.weights_bytes)} + draft {gib(b.draft_weights_bytes)}) and the state pool leave "
        f"no memory for the KV cache under mem-fraction-static {b.mem_fraction_static:.3f}: {_startup_fails(ctx)}",
        (*_pending_patch_fixes(ctx), ctx.fraction_fix(), more_tp),
        otherwise="no --mem-fraction-static leaves both the weights and what runs outside the static pools room on "
                  "this card: more TP ranks or a smaller checkpoint")


def gpu_count(ctx: Context) -> Iterator[Finding]:
    pp = ctx.launch.int_value("pp_size") or 1
    b = ctx.budget
    needed = b.gpus_needed
    if ctx.gpu.count is None or needed <= ctx.gpu.count:
        return
    shape = f"TP {b.tp_size} x PP {pp}"
    dp_flag, tp_flag = ctx.flag("dp_size", "--dp-size"), ctx.flag("tp_size", "--tp-size")
    if b.dp_replicas > 1:
        shape = f"DP {b.dp_replicas} x {shape} (each data-parallel replica gets its own TP x PP GPUs)"
        fix = Fix(args=(dp_flag, str(max(1, ctx.gpu.count // (b.tp_size * pp)))))
        if ctx.gpu.count < b.tp_size * pp:
            fix = Fix(args=(dp_flag, "1", tp_flag, str(max(1, ctx.gpu.count // pp))))
    else:
        fix = Fix(args=(tp_flag, str(max(1, ctx.gpu.count // pp))))
    yield Finding.proposing("gpu-count", "error", f"{shape} needs {needed} GPUs, this machine has {ctx.gpu.count}",
                            fix, otherwise=f"this launch does not fit {ctx.gpu.count} GPU(s) of this size")


_TERM_WORDS = {"fixed": "fixed", "prefill_activations": "prefill chunk", "logits_sampler": "logits and sampler",
               "cuda_graphs": "CUDA graphs", "draft_forward": "draft"}


def non_static_short(ctx: Context) -> Iterator[Finding]:
    """What runs outside the static pools (patchkit/doctor/non_static.py) does not fit in
    (1 - mem_fraction_static) x free: the launch starts, then runs out of memory in a prefill, at
    graph capture or in cuBLAS."""
    b = ctx.budget
    needed, available = b.non_static_needed_bytes, b.non_static_available_bytes
    if needed is None or available is None or needed <= available or b.mem_fraction_static is None:
        return
    parts = ", ".join(f"{_TERM_WORDS.get(k, k)} {gib(v)}" for k, v in b.non_static_terms.items() if v)
    flag = ctx.flag("mem_fraction_static", "--mem-fraction-static")
    rec = b.recommended_mem_fraction_static
    chunk_flag = ctx.flag("chunked_prefill_size", "--chunked-prefill-size")
    chunk = b.non_static_chunked_prefill_size or 0
    smaller = [Fix(args=(chunk_flag, str(chunk // k))) for k in (2, 4) if chunk // k >= 256]
    if b.non_static_cuda_graph_max_bs and b.non_static_cuda_graph_max_bs > 1:
        graphs = ctx.flag("cuda_graph_max_bs_decode", "") or ctx.flag("cuda_graph_max_bs", "--cuda-graph-max-bs")
        smaller.append(Fix(args=(chunk_flag, str(max(256, chunk // 4)), graphs,
                                 str(max(1, b.non_static_cuda_graph_max_bs // 2)))))
    yield Finding.proposing(
        "non-static-short", "warning",
        f"outside the static pools this launch needs about {gib(needed)} ({parts}), but "
        f"(1 - {b.mem_fraction_static:.3f}) x {b.free_at_load_gib:.2f} GiB free leaves {gib(available)}: "
        f"it runs out of memory in a large prefill, at CUDA-graph capture or in cuBLAS"
        + (f"; {flag} {rec:.2f} leaves enough" if rec is not None else ""),
        (ctx.fraction_fix(), *smaller),
        otherwise="no fraction, smaller prefill chunk or smaller decode graphs found that leave this launch enough "
                  "on this card: more TP ranks or a smaller checkpoint")


def _sizes(sizes: list[int]) -> str:
    return ", ".join(map(str, sizes)) if len(sizes) <= 8 else f"{', '.join(map(str, sizes[:4]))}, ..., {sizes[-1]}"


def cuda_graph_capture(ctx: Context) -> Iterator[Finding]:
    """Start-up's CUDA-graph capture does not fit in (1 - mem_fraction_static) x free (sglang#35777): the static
    pools are allocated first, then the release captures its graphs in what is left, and the launch dies there."""
    b = ctx.budget
    need, available = b.cuda_graph_capture_bytes, b.non_static_available_bytes
    if need is None or available is None or need <= available or b.mem_fraction_static is None:
        return
    sizes = b.cuda_graph_capture_sizes
    what = []
    if sizes:
        what.append(f"{len(sizes)} decode graphs (batch {_sizes(sizes)})")
    if b.cuda_graph_prefill_graphs:
        what.append(f"{b.cuda_graph_prefill_graphs} prefill graphs up to {b.non_static_chunked_prefill_size} tokens")
    # The multimodal feature pool (cuda_ipc) lands in the same rest: --mm-feature-transport cpu leaves it out, where
    # the release has the flag (0.5.16 on).
    pool, beside = None, ""
    if b.mm_feature_pool_bytes:
        beside = f" and the multimodal feature pool ({b.mm_feature_pool_bytes >> 20} MiB, cuda_ipc) lands beside them"
        if ctx.release.flags.names_for("mm_feature_transport"):
            pool = ctx.set("mm_feature_transport", "--mm-feature-transport", "cpu")
    graphs = ctx.flag("cuda_graph_max_bs_decode", "") or ctx.flag("cuda_graph_max_bs", "--cuda-graph-max-bs")
    smaller = Fix(args=(graphs, str(b.cuda_graph_max_bs_fits))) if b.cuda_graph_max_bs_fits else None
    # The prefill graphs are captured up to the chunk: a smaller chunk captures fewer and smaller ones.
    chunk_flag = ctx.flag("chunked_prefill_size", "--chunked-prefill-size")
    chunk = Fix(args=(chunk_flag, str(b.cuda_graph_chunk_fits))) if b.cuda_graph_chunk_fits else None
    yield Finding.proposing(
        "cuda-graph-capture", "error",
        f"start-up captures {' and '.join(what) or 'its CUDA graphs'} after the static pools are allocated{beside}: about "
        f"{gib(need)} (an estimate), but (1 - {b.mem_fraction_static:.3f}) x {b.free_at_load_gib:.2f} GiB free "
        f"leaves {gib(available)}: the launch dies at graph capture",
        (ctx.fraction_fix(), pool, chunk, smaller),
        otherwise="no fraction, smaller prefill chunk or smaller decode graphs found whose capture fits on this card")


RULES: dict[str, Rule] = {
    "gpu-count": gpu_count,
    "flag-unknown": flags,  # also flag-removed, flag-deprecated and flag-value
    "feature-missing": feature_missing,
    "budget-negative": budget_negative,
    "cuda-graph-capture": cuda_graph_capture,
    "non-static-short": non_static_short,
    "mamba-slots-zero": mamba_slots_zero,
    "mamba-slots-cap": mamba_slots_cap,
    "spec-max-running-default": spec_max_running_default,
    "mamba-ratio-ignored": mamba_ratio_ignored,
    "kv-below-context": kv_below_context,
    "context-length-over-model": context_length_over_model,
    "max-total-tokens-cap-only": max_total_tokens_cap_only,
    "replayssm-spec": replayssm_spec,
    "draft-quantization-inherit": draft_quantization_inherit,
    "no-buffer-overlap": no_buffer_overlap,
    "spec-extra-buffer": spec_extra_buffer,
    "fp8-triton-sm89": fp8_triton_sm89,
    "fp4-kv-below-sm100": fp4_kv_below_sm100,
    "cutedsl-decode-sm90": CAPABILITY_RULES["cutedsl-decode-sm90"],
    "flashinfer-gdn-sm90": CAPABILITY_RULES["flashinfer-gdn-sm90"],
    "fa3-sm90": CAPABILITY_RULES["fa3-sm90"],
    "dtype-fp16-gdn": dtype_fp16_gdn,
    "reasoning-parser-forced": reasoning_parser_forced,
    "tool-parser-name": tool_parser_name,
    "mtp-weights-missing": mtp_weights_missing,
    "pcie-custom-allreduce": pcie_custom_allreduce,
    "integrated-gpu-headroom": integrated_gpu_headroom,
    "patch-needed": patch_needed,
}


def run(ctx: Context) -> list[Finding]:
    found = [finding for rule in RULES.values() for finding in rule(ctx)]
    order = {level: i for i, level in enumerate(("error", "warning", "info"))}
    return sorted(found, key=lambda f: order[f.level])
