"""GPU facts: read from `nvidia-smi` when it is there, overridden (or supplied) by flags."""

from __future__ import annotations

import shutil
import subprocess
from dataclasses import asdict, dataclass

GIB = 1 << 30

# Free memory at weight-load start ("avail mem" in SGLang's log) when not measured: the total
# minus what the CUDA context (and, with TP > 1, NCCL's buffers and the custom all-reduce
# workspace) take before the weights load. Typical figures on recent drivers; pass --gpu-free
# with the value SGLang logs for exact numbers.
CUDA_CONTEXT_GIB = 0.55
NCCL_EXTRA_GIB = 0.75

# Names of GPUs whose memory is the host's (unified memory, no separate VRAM).
INTEGRATED_NAMES = ("GB10", "DGX Spark", "Thor", "Orin", "GH200 integrated")


@dataclass(frozen=True)
class GpuFacts:
    count: int | None
    total_gib: float | None
    free_gib: float | None
    free_source: str  # "flag", "nvidia-smi", "estimate" or "unknown"
    sm: tuple[int, int] | None
    name: str | None
    interconnect: str | None  # "nvlink", "pcie" or None
    wsl: bool
    integrated: bool

    def to_dict(self) -> dict:
        data = asdict(self)
        data["sm"] = f"{self.sm[0]}.{self.sm[1]}" if self.sm else None
        return data


@dataclass(frozen=True)
class Overrides:
    """The GPU-fact flags of `patchkit doctor` (None: not given)."""

    gpus: int | None = None
    gpu_memory: float | None = None
    gpu_free: float | None = None
    sm: str | None = None
    interconnect: str | None = None
    wsl: bool = False
    integrated: bool = False


def baseline_gib(tp_size: int) -> float:
    return CUDA_CONTEXT_GIB + (NCCL_EXTRA_GIB if tp_size > 1 else 0.0)


def parse_sm(text: str) -> tuple[int, int] | None:
    major, _, minor = text.strip().partition(".")
    if not major.isdigit() or not (minor or "0").isdigit():
        return None  # also "-1.0", "9.0.1", "nine"
    return int(major), int(minor or 0)


def _nvidia_smi(argv: list[str]) -> str | None:
    exe = shutil.which("nvidia-smi")
    if exe is None:
        return None
    try:
        done = subprocess.run([exe, *argv], capture_output=True, text=True, timeout=20, check=False)
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout if done.returncode == 0 else None


def _float(text: str) -> float | None:
    try:
        return float(text)
    except ValueError:
        return None


def query() -> dict:
    """What nvidia-smi says (empty when it is absent or fails)."""
    out = _nvidia_smi(["--query-gpu=name,memory.total,memory.free,compute_cap", "--format=csv,noheader,nounits"])
    if not out:
        return {}
    rows = [[c.strip() for c in line.split(",")] for line in out.strip().splitlines() if line.strip()]
    rows = [r for r in rows if len(r) >= 4]
    if not rows:
        return {}
    name, total, free, cap = rows[0][:4]
    facts: dict = {"count": len(rows), "name": name, "sm": parse_sm(cap)}
    total_mib, free_mib = _float(total), _float(free)
    if total_mib is not None:
        facts["total_gib"] = total_mib / 1024
    if free_mib is not None:
        facts["free_gib"] = min(_float(r[2]) or free_mib for r in rows) / 1024
    else:
        facts.pop("total_gib", None)
    topo = _nvidia_smi(["topo", "-m"])
    if topo and len(rows) > 1:
        facts["interconnect"] = "nvlink" if any(tok.startswith("NV") and tok[2:].isdigit() for tok in topo.split()) else "pcie"
    return facts


MEMINFO = "/proc/meminfo"


def host_memory_gib(path: str | None = None) -> tuple[float | None, float | None]:
    """(MemTotal, MemAvailable) of the host in GiB: a unified-memory GPU (GB10) reports no memory of
    its own to nvidia-smi ("[N/A]"); its memory is the host's."""
    found: dict[str, float] = {}
    try:
        with open(path or MEMINFO, encoding="utf-8") as handle:
            for line in handle:
                key, _, rest = line.partition(":")
                parts = rest.split()
                if key in ("MemTotal", "MemAvailable") and parts and parts[0].isdigit():
                    found[key] = int(parts[0]) / (1024 * 1024)  # kB -> GiB
    except OSError:
        return None, None
    return found.get("MemTotal"), found.get("MemAvailable")


def _is_wsl() -> bool:
    try:
        with open("/proc/version", encoding="utf-8") as handle:
            return "microsoft" in handle.read().lower()
    except OSError:
        return False


def facts(overrides: Overrides, tp_size: int, probe: bool = True) -> GpuFacts:
    """Flags win over nvidia-smi; free memory falls back to total minus the baseline estimate.

    nvidia-smi's free memory is read now, not at weight-load start; it stands for the free
    memory only when nothing else runs on the GPU (then it already holds no CUDA context of
    SGLang's, so the baseline is still subtracted)."""
    seen = query() if probe else {}
    name = seen.get("name")
    integrated = overrides.integrated or bool(name and any(n.lower() in name.lower() for n in INTEGRATED_NAMES))
    if probe and integrated and seen and seen.get("total_gib") is None:
        host_total, host_free = host_memory_gib()
        seen["total_gib"] = host_total
        if host_free is not None:
            seen["free_gib"] = host_free
    total = overrides.gpu_memory if overrides.gpu_memory is not None else seen.get("total_gib")
    if overrides.gpu_free is not None:
        free, source = overrides.gpu_free, "flag"
    elif overrides.gpu_memory is None and seen.get("free_gib") is not None:
        free, source = seen["free_gib"] - baseline_gib(tp_size), "nvidia-smi"
    elif total is not None:
        free, source = total - baseline_gib(tp_size), "estimate"
    else:
        free, source = None, "unknown"
    sm = parse_sm(overrides.sm) if overrides.sm else seen.get("sm")
    return GpuFacts(
        count=overrides.gpus if overrides.gpus is not None else seen.get("count"),
        total_gib=total,
        free_gib=free,
        free_source=source,
        sm=sm,
        name=name,
        interconnect=overrides.interconnect or seen.get("interconnect"),
        wsl=overrides.wsl or (probe and _is_wsl()),
        integrated=integrated,
    )
