"""Which loaded patches a launch depends on: every patch's `LAUNCH` declaration
(patchkit/authoring/launch_trigger.py) checked against the launch's flags, model and hardware."""

from __future__ import annotations

from typing import TYPE_CHECKING

from patchkit.authoring.launch_trigger import Trigger

if TYPE_CHECKING:
    from patchkit.doctor.context import Context
    from patchkit.doctor.model import ModelFacts


def _number(value: object) -> float | None:
    try:
        return float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return None


def _flag_holds(ctx: Context, condition: str) -> bool:
    if condition.startswith("!"):
        return not ctx.launch.get(condition[1:])
    dest, above, bound = condition.partition(">")
    if not above:
        return bool(ctx.launch.get(dest))
    value: object = ctx.launch.get(dest)
    if dest == "max_running_requests":  # the figure SGLang resolves (unset: estimated from the pool)
        value = ctx.budget.effective_max_running_requests if ctx.budget.effective_max_running_requests is not None \
            else (value if value is not None else 2)
    number = _number(value)
    return number is not None and number > float(bound)


def mtp_draft_source(ctx: Context) -> ModelFacts | None:
    """The checkpoint SGLang loads as the draft when it is a Qwen3.5/3.8 MTP head (the
    Qwen3_5ForCausalLMMTP draft rewrite in ModelConfig), else None: the one named by
    --speculative-draft-model-path, else the target's own."""
    source = ctx.draft if ctx.launch.get("speculative_draft_model_path") else ctx.model
    if source is None or not source.arch.startswith("Qwen3_5") or source.text.get("mtp_num_hidden_layers") is None:
        return None
    return source


def _model_holds(ctx: Context, feature: str) -> bool:
    m = ctx.model
    if m is None:
        return False
    if feature == "hybrid-gdn":
        return m.is_hybrid_gdn
    if feature == "qwen3.5":
        return m.arch.startswith("Qwen3_5")
    if feature == "qwen3.5-mtp":
        return m.arch.startswith("Qwen3_5") and m.text.get("mtp_num_hidden_layers") is not None
    if feature == "mtp-draft":
        return mtp_draft_source(ctx) is not None
    if feature == "mtp-depth-unread":  # the MTP draft declares its depth only as mtp_num_hidden_layers
        source = mtp_draft_source(ctx)
        return source is not None and source.text.get("num_nextn_predict_layers") is None
    if feature == "auto-round":
        quant = m.quantization or {}
        return str(quant.get("quant_method", "")).replace("_", "-") in ("auto-round", "autoround")
    raise ValueError(f"unknown model feature {feature!r} in a patch's LAUNCH")


def _hardware_holds(ctx: Context, feature: str) -> bool:
    if feature == "tp>1":
        return ctx.budget.tp_size > 1
    if feature == "pcie-or-wsl":
        return ctx.gpu.interconnect == "pcie" or ctx.gpu.wsl
    raise ValueError(f"unknown hardware feature {feature!r} in a patch's LAUNCH")


def holds(ctx: Context, trigger: Trigger) -> bool:
    """Whether the launch takes the code path the patch fixes."""
    if trigger.speculative and ctx.algo not in trigger.speculative:
        return False
    return (all(_flag_holds(ctx, c) for c in trigger.flags) and all(_model_holds(ctx, f) for f in trigger.model)
            and all(_hardware_holds(ctx, f) for f in trigger.hardware))


def why(ctx: Context, trigger: Trigger) -> str:
    """The declaration's `why` with the launch's figures filled in."""
    source = mtp_draft_source(ctx)
    layers = int(source.text.get("num_hidden_layers") or 0) if source is not None else (ctx.budget.draft_layers or 0)
    full = ctx.budget.full_attention_layers or 1
    return trigger.why.format(draft_layers=layers, full_attention_layers=full, kv_scale=f"{1 + layers / full:g}")


def triggered(ctx: Context, declarations: dict[str, Trigger]) -> list[tuple[str, str, str]]:
    """(patch id, level, why) for every declaration the launch meets."""
    return [(pid, t.level, why(ctx, t)) for pid, t in declarations.items() if holds(ctx, t)]
