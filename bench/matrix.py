"""Cold and warm `patchkit matrix` against downloading the same wheels alone.

Usage: python bench/matrix.py [--from 0.5.10] [--to 0.5.23] [--warm-runs 3] [--rounds 2]

Everything happens in a fresh temporary folder: the wheels are downloaded from the package index
by both sides the same way (`pip download --no-deps --only-binary=:all:`, one release after the
other): alone into an empty folder, and by a cold `matrix` into its own empty PATCHKIT_HOME. With
--rounds N the two sides alternate (A B B A ...) and medians are compared. Goals (issue 14): cold
matrix <= downloading alone + 10 s; warm matrix <= 5 s; disk = the wheels. Wall time on a shared
machine includes waiting for the CPU, so CPU time is reported beside it, and the load average.
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from patchkit.engine import upstream


def timed(argv: list[str], env: dict | None = None) -> tuple[float, float, subprocess.CompletedProcess]:
    """(wall s, CPU s of the child) of one command."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    proc = subprocess.run(argv, env=env, capture_output=True, text=True, check=False)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode != 0:
        sys.exit(f"{' '.join(argv[:4])} ... failed:\n{proc.stderr[-2000:]}")
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime), proc


def size_mb(folder: Path) -> float:
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file() and not p.is_symlink()) / 1e6


def download_alone(versions: list[str], folder: Path) -> tuple[float, float]:
    """Each wheel downloaded with pip, one after the other, as `matrix` does (same pip command)."""
    wall = cpu = 0.0
    for version in versions:
        w, c, _ = timed([sys.executable, "-m", "pip", "download", "--no-deps", "--disable-pip-version-check",
                         "--only-binary=:all:", "-d", str(folder), f"sglang=={version}"])
        wall, cpu = wall + w, cpu + c
    return wall, cpu


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--from", dest="first", default="0.5.10")
    parser.add_argument("--to", dest="last", default="0.5.23")
    parser.add_argument("--warm-runs", type=int, default=3)
    parser.add_argument("--rounds", type=int, default=1,
                        help="pairs of (download alone, cold matrix), interleaved A B B A ... against drift")
    args = parser.parse_args()
    versions = upstream.versions_between(args.first, args.last)
    root = Path(tempfile.mkdtemp(prefix="patchkit-bench-"))
    exe = str(Path(sys.executable).with_name("patchkit"))
    matrix = [exe, "matrix", "--json", "--from", args.first, "--to", args.last]
    load_before = os.getloadavg()
    try:
        alone: list[tuple[float, float]] = []
        cold: list[tuple[float, float]] = []
        order = [side for n in range(args.rounds) for side in (("alone", "cold") if n % 2 == 0 else ("cold", "alone"))]
        first_cold = None
        for n, side in enumerate(order):
            if side == "alone":  # an empty folder each time: every wheel comes from the index
                alone.append(download_alone(versions, root / f"alone-{n}"))
                print(f"  round {n}: download alone {alone[-1][0]:6.1f} s (CPU {alone[-1][1]:5.1f})", flush=True)
                continue
            home = root / f"home-{n}"  # an empty PATCHKIT_HOME each time: cold
            wall, cpu, proc = timed(matrix, {**os.environ, "PATCHKIT_HOME": str(home)})
            cold.append((wall, cpu))
            print(f"  round {n}: cold matrix    {wall:6.1f} s (CPU {cpu:5.1f})", flush=True)
            if first_cold is None:
                first_cold = (home, proc)
        assert first_cold is not None
        home, proc = first_cold
        progress = [line for line in proc.stderr.splitlines() if line.startswith("downloaded SGLang")]
        env = {**os.environ, "PATCHKIT_HOME": str(home)}
        warm = [timed(matrix, env) for _ in range(args.warm_runs)]
        assert all(w.stdout == proc.stdout for _, _, w in warm), "warm matrix differs from cold"
        wall_warm = statistics.median(w for w, _, _ in warm)
        cpu_warm = statistics.median(c for _, c, _ in warm)
        wall_dl, cpu_dl = statistics.median(w for w, _ in alone), statistics.median(c for _, c in alone)
        wall_cold, cpu_cold = statistics.median(w for w, _ in cold), statistics.median(c for _, c in cold)
        home_mb, wheels_mb = size_mb(home), size_mb(home / "wheels")
        print(f"matrix over {len(versions)} releases ({versions[0]} .. {versions[-1]}); wall s (CPU s), "
              f"median of {len(alone)} round(s); load average {load_before[0]:.1f} before, {os.getloadavg()[0]:.1f} after "
              f"on {os.cpu_count()} CPUs")
        print(f"  download alone (pip)   {wall_dl:7.1f} ({cpu_dl:5.1f})   {size_mb(root / 'alone-0'):.0f} MB of wheels")
        print(f"  cold matrix            {wall_cold:7.1f} ({cpu_cold:5.1f})   = download x {wall_cold / wall_dl:.2f}, "
              f"{wall_cold - wall_dl:+.1f} s (goal <= +10 s); {len(progress)} progress lines on stderr")
        print(f"  warm matrix (median)   {wall_warm:7.1f} ({cpu_warm:5.1f})   goal <= 5 s")
        print(f"  disk                   PATCHKIT_HOME {home_mb:.0f} MB, of which wheels {wheels_mb:.0f} MB")
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
