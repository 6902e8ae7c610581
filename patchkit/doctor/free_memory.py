"""The free memory at weight-load start when it is not given: what the release takes before "Load weight begin".

SGLang's `pre_model_load_memory` ("avail mem" at "Load weight begin") is `get_available_gpu_memory` after
`init_torch_distributed` (distributed/bootstrap.py from 0.5.19, `ModelRunner.init_torch_distributed` before):
`torch.cuda.empty_cache()` then `mem_get_info`'s free bytes, so it is the card's memory less
- what the driver and other processes (a desktop, WSL2's host) hold before SGLang starts,
- the CUDA context torch creates on the device (`torch.cuda.set_device`),
- with TP/PP > 1, NCCL's communicator buffers (`_init_parallel_groups`, warmed by `--pre-warm-nccl`) and the
  custom all-reduce buffers (`CustomAllreduce`: `meta_size() + max_size`, `max_size` and `rank_data` of
  `max_size` = `_MAX_CAR_SIZE`; `CustomAllreduceV2` where `SGLANG_OPT_USE_CUSTOM_ALL_REDUCE_V2`: pull and push
  workspaces of up to `SGLANG_CUSTOM_ALL_REDUCE_V2_MAX_SIZE_KB`), read from the release,
- the torch allocator's reserve: nothing cached survives the `empty_cache`, only live tensors (NCCL warm-up).
The driver, context and NCCL figures are not in SGLang's code: they are typical ranges (docs/doctor.md names
them), so the estimate is a range; `--gpu-free` replaces all of it with the figure SGLang logs.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

# The CUDA context by compute capability major (GiB, low-high): larger kernels images and more SMs on newer parts.
CONTEXT_GIB = {7: (0.30, 0.55), 8: (0.40, 0.75), 9: (0.50, 0.85), 10: (0.60, 1.10), 12: (0.60, 1.10)}
CONTEXT_UNKNOWN_GIB = (0.40, 1.10)
# Held before SGLang starts on a card nobody measured: driver, ECC and firmware reserve; a desktop on a card with a
# display (GeForce/RTX workstation cards) adds up to ~0.9 GiB.
CARD_DATACENTER_GIB = (0.00, 0.30)
CARD_OTHER_GIB = (0.05, 0.90)
# Data-centre model numbers, matched as whole words of nvidia-smi's name ("NVIDIA A100-SXM4-80GB", "Tesla T4"): a
# substring would take "RTX A4000" for an A40 and "RTX A1000 Laptop" for an A10. A name with "RTX" in it is a
# workstation or desktop card whatever its number.
DATACENTER_MODELS = frozenset({"A2", "A10", "A10G", "A16", "A30", "A40", "A100", "A800", "L4", "L20", "L40", "L40S",
                               "H20", "H100", "H200", "H800", "GH200", "B200", "B300", "GB200", "GB300", "T4", "V100",
                               "P4", "P40", "P100"})
WSL_GIB = (0.30, 1.20)  # the Windows host's share of the card under WSL2
# NCCL's buffers (NCCL_BUFFSIZE 4 MiB per channel and peer, LL/LL128/Simple) for the world and TP communicators.
NCCL_GIB = {"pcie": (0.30, 0.70), "nvlink": (0.50, 1.50), None: (0.30, 1.50)}
ALLOCATOR_GIB = (0.00, 0.05)
CUSTOM_AR_WORLD_SIZES = (2, 4, 6, 8)  # CustomAllreduce._SUPPORTED_WORLD_SIZES
GIB = 1 << 30


@dataclass(frozen=True)
class Term:
    name: str
    low_gib: float
    high_gib: float
    source: str

    @property
    def mid_gib(self) -> float:
        return (self.low_gib + self.high_gib) / 2

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass(frozen=True)
class AllReduceBuffers:
    """The custom all-reduce buffer sizes a release allocates per rank (bytes), read from its code."""

    v1_bytes: int  # 3 x _MAX_CAR_SIZE
    v2_bytes: int | None  # 2 x SGLANG_CUSTOM_ALL_REDUCE_V2_MAX_SIZE_KB, where V2 is on (None: the release has no V2)


def is_datacentre(name: str) -> bool:
    """Whether nvidia-smi's name is a data-centre card (no display, little held before SGLang starts)."""
    words = name.upper().replace("-", " ").replace("_", " ").split()
    return "RTX" not in words and any(word in DATACENTER_MODELS for word in words)


def terms(*, sm: tuple[int, int] | None, name: str | None, parallel: int, tp: int, interconnect: str | None,
          wsl: bool, idle_measured: bool, custom_all_reduce: bool, buffers: AllReduceBuffers) -> list[Term]:
    """What comes off the card before the weights load. `idle_measured`: the free memory was read from the
    card (nvidia-smi, or the host's MemAvailable) rather than its total, so what others hold is already out."""
    found = [Term("cuda-context", *(CONTEXT_GIB.get(sm[0], CONTEXT_UNKNOWN_GIB) if sm else CONTEXT_UNKNOWN_GIB),
                  f"torch's CUDA context on SM {'.'.join(map(str, sm)) if sm else 'unknown'} (typical)")]
    if not idle_measured:
        datacenter = bool(name) and is_datacentre(str(name))
        found.append(Term("card-reserve", *(CARD_DATACENTER_GIB if datacenter else CARD_OTHER_GIB),
                          "driver/firmware and a desktop before SGLang starts (typical)"))
        if wsl:
            found.append(Term("wsl2-host", *WSL_GIB, "the Windows host's share under WSL2 (typical)"))
    if parallel > 1:
        found.append(Term("nccl", *NCCL_GIB.get(interconnect, NCCL_GIB[None]),
                          f"NCCL communicator buffers over {interconnect or 'an unknown interconnect'} (typical)"))
    runs = custom_all_reduce and tp in CUSTOM_AR_WORLD_SIZES and (tp == 2 or interconnect != "pcie")
    if tp > 1 and runs:
        size = (buffers.v2_bytes if buffers.v2_bytes is not None else buffers.v1_bytes) / GIB
        found.append(Term("custom-all-reduce", size, size, "the release's custom all-reduce buffers"))
    found.append(Term("allocator", *ALLOCATOR_GIB, "torch's allocator after empty_cache: live tensors only"))
    return found


def estimate(base_gib: float, found: list[Term]) -> tuple[float, float, float]:
    """(free, low, high) in GiB: the base (total or measured free) less the terms' middles, highs, lows."""
    return (base_gib - sum(t.mid_gib for t in found), base_gib - sum(t.high_gib for t in found),
            base_gib - sum(t.low_gib for t in found))
