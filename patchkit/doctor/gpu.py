"""GPU facts: read from `nvidia-smi` when it is there, overridden (or supplied) by flags."""

from __future__ import annotations

import shutil
import subprocess
from dataclasses import asdict, dataclass

from patchkit.doctor import free_memory
from patchkit.doctor.free_memory import AllReduceBuffers, Term

GIB = 1 << 30
# What 0.5.19's CustomAllreduce allocates per rank (3 x 8 MiB) where the release's own figure is not read.
DEFAULT_BUFFERS = AllReduceBuffers(v1_bytes=3 * 8 * 1024 * 1024, v2_bytes=None)

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
    # Without --gpu-free: the range the estimate may be off by, and what was taken off (free_memory.terms).
    free_low_gib: float | None = None
    free_high_gib: float | None = None
    free_terms: tuple[Term, ...] = ()

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


def facts(overrides: Overrides, tp_size: int, probe: bool = True, *, pp_size: int = 1,
          custom_all_reduce: bool = True, buffers: AllReduceBuffers = DEFAULT_BUFFERS,
          seen: dict | None = None) -> GpuFacts:
    """Flags win over nvidia-smi; without --gpu-free the free memory at load is estimated from what the
    release takes before the weights load (free_memory.terms), as a middle figure and a range.

    nvidia-smi's free memory is read now, not at weight-load start; it stands for the free
    memory only when nothing else runs on the GPU (then it already holds no CUDA context of
    SGLang's, so SGLang's own terms are still subtracted; what others hold is already out)."""
    if seen is None:  # what nvidia-smi said, unless the caller asked it already (once per doctor run)
        seen = query() if probe else {}
    seen = dict(seen)
    name = seen.get("name")
    integrated = overrides.integrated or bool(name and any(n.lower() in name.lower() for n in INTEGRATED_NAMES))
    if probe and integrated and seen and seen.get("total_gib") is None:
        host_total, host_free = host_memory_gib()
        seen["total_gib"] = host_total
        if host_free is not None:
            seen["free_gib"] = host_free
    total = overrides.gpu_memory if overrides.gpu_memory is not None else seen.get("total_gib")
    sm = parse_sm(overrides.sm) if overrides.sm else seen.get("sm")
    interconnect = overrides.interconnect or seen.get("interconnect")
    wsl = overrides.wsl or (probe and _is_wsl())
    low = high = None
    taken: tuple[Term, ...] = ()
    if overrides.gpu_free is not None:
        free, source = overrides.gpu_free, "flag"
    else:
        measured = overrides.gpu_memory is None and seen.get("free_gib") is not None
        base = seen["free_gib"] if measured else total
        if base is None:
            free, source = None, "unknown"
        else:
            taken = tuple(free_memory.terms(sm=sm, name=name, parallel=tp_size * pp_size, tp=tp_size,
                                            interconnect=interconnect, wsl=wsl, idle_measured=measured,
                                            custom_all_reduce=custom_all_reduce, buffers=buffers))
            free, low, high = free_memory.estimate(base, list(taken))
            source = "nvidia-smi" if measured else "estimate"
    return GpuFacts(
        count=overrides.gpus if overrides.gpus is not None else seen.get("count"),
        total_gib=total,
        free_gib=free,
        free_source=source,
        sm=sm,
        name=name,
        interconnect=interconnect,
        wsl=wsl,
        integrated=integrated,
        free_low_gib=low,
        free_high_gib=high,
        free_terms=taken,
    )
