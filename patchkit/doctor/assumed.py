"""What a doctor's budget assumes rather than reads from the release's code or a measurement, each term with its
range (issue 33): the report states them (`budget.assumed`, the `assumed:` lines)."""

from __future__ import annotations

from patchkit.doctor.budget import Budget
from patchkit.doctor.gpu import GIB, GpuFacts
from patchkit.doctor.non_static import ALLOCATOR_FACTOR, ALLOCATOR_FACTOR_RANGE


def _bytes(gib: float) -> int:
    """A figure in GiB as bytes that read back as the same GiB to 0.01 as the report prints it elsewhere (22.925 GiB
    is 24,615,531,315.2 B: truncated or rounded to the byte it reads 22.92 beside the budget's 22.93)."""
    return round(round(gib, 2) * GIB)


def terms(b: Budget, gpu: GpuFacts) -> list[dict]:
    """The budget's assumed terms and their ranges: the free memory at load where it is estimated (given with
    --gpu-free it is a measurement, used as the free memory at load only: the release's card-size defaults come
    from the card's total), the weights per GPU where the checkpoint does not size them, the release's default
    fraction where the launch does not set it, and the fitted allocator factor of the non-static estimate."""
    found = []
    if gpu.free_gib is not None and gpu.free_source != "flag" and gpu.free_low_gib is not None \
            and gpu.free_high_gib is not None:
        found.append({"term": "free at load", "value": _bytes(gpu.free_gib), "low": _bytes(gpu.free_low_gib),
                      "high": _bytes(gpu.free_high_gib),
                      "why": f"estimated from {'the card' if gpu.free_source == 'estimate' else gpu.free_source} "
                             f"less typical driver, context and NCCL terms (pass --gpu-free)"})
    if b.weights_bytes is not None and b.weights_low_bytes is not None and b.weights_high_bytes is not None \
            and b.weights_high_bytes != b.weights_low_bytes:
        found.append({"term": "weights per GPU", "value": b.weights_bytes, "low": b.weights_low_bytes,
                      "high": b.weights_high_bytes,
                      "why": f"from the checkpoint's {b.weights_from}: what it does not size may be split over TP "
                             f"or whole on every rank (pass --python, the serving interpreter, for the release's "
                             f"model classes)"})
    if gpu.total_gib is None and gpu.free_gib is not None:
        found.append({"term": "the card's total memory", "value": None, "low": None, "high": None,
                      "why": f"not known (pass --gpu-memory): the release's defaults for an unknown card are taken "
                             f"(chunked prefill {b.non_static_chunked_prefill_size}), never the free memory given"})
    if b.mem_fraction_source == "estimate" and b.mem_fraction_static is not None:
        found.append({"term": "mem-fraction-static", "value": b.mem_fraction_static, "low": b.mem_fraction_static,
                      "high": b.mem_fraction_static,
                      "why": "the release's default, approximated from the card's total (set --mem-fraction-static)"})
    prefill = b.non_static_terms.get("prefill_activations")
    if b.non_static_needed_bytes is not None and prefill:
        low, high = (int(b.non_static_needed_bytes + prefill * (f / ALLOCATOR_FACTOR - 1)) for f in ALLOCATOR_FACTOR_RANGE)
        found.append({"term": "outside the static pools", "value": b.non_static_needed_bytes, "low": low,
                      "high": high, "why": f"the prefill's allocator factor {ALLOCATOR_FACTOR} fitted on the field's "
                                            f"figures, {ALLOCATOR_FACTOR_RANGE[0]}-{ALLOCATOR_FACTOR_RANGE[1]} allowed"})
    return found
