"""Cold and warm `patchkit matrix` against downloading the same wheels alone.

Usage: python bench/matrix.py [--from 0.5.10] [--to 0.5.23] [--warm-runs 3]

Everything happens in a fresh temporary folder: the wheels are downloaded twice from the package
index (once alone with pip, once by the cold `matrix` into its own empty PATCHKIT_HOME). Goals
(issue 14): cold matrix <= downloading alone + 10 s; warm matrix <= 5 s; disk = the wheels.
Wall time on a shared machine includes waiting for the CPU, so CPU time is reported beside it.
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

from patchkit import upstream


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


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--from", dest="first", default="0.5.10")
    parser.add_argument("--to", dest="last", default="0.5.23")
    parser.add_argument("--warm-runs", type=int, default=3)
    args = parser.parse_args()
    versions = upstream.versions_between(args.first, args.last)
    root = Path(tempfile.mkdtemp(prefix="patchkit-bench-"))
    try:
        alone = root / "alone"
        wall_dl = cpu_dl = 0.0
        for version in versions:
            wall, cpu, _ = timed([sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--only-binary=:all:",
                                  "--disable-pip-version-check", "-d", str(alone), f"sglang=={version}"])
            wall_dl, cpu_dl = wall_dl + wall, cpu_dl + cpu
        env = {**os.environ, "PATCHKIT_HOME": str(root / "home")}
        matrix = [str(Path(sys.executable).with_name("patchkit")), "matrix", "--json", "--from", args.first, "--to", args.last]
        wall_cold, cpu_cold, cold = timed(matrix, env)
        progress = [line for line in cold.stderr.splitlines() if line.startswith("downloaded SGLang")]
        warm = [timed(matrix, env) for _ in range(args.warm_runs)]
        wall_warm = statistics.median(w for w, _, _ in warm)
        cpu_warm = statistics.median(c for _, c, _ in warm)
        assert all(proc.stdout == cold.stdout for _, _, proc in warm), "warm matrix differs from cold"
        home, wheels = size_mb(root / "home"), size_mb(root / "home" / "wheels")
        print(f"matrix over {len(versions)} releases ({versions[0]} .. {versions[-1]}); wall s (CPU s)")
        print(f"  download alone (pip)   {wall_dl:7.1f} ({cpu_dl:5.1f})   {size_mb(alone):.0f} MB of wheels")
        print(f"  cold matrix            {wall_cold:7.1f} ({cpu_cold:5.1f})   = download x {wall_cold / wall_dl:.2f}, "
              f"{wall_cold - wall_dl:+.1f} s (goal <= +10 s); {len(progress)} progress lines on stderr")
        print(f"  warm matrix (median)   {wall_warm:7.1f} ({cpu_warm:5.1f})   goal <= 5 s")
        print(f"  disk                   PATCHKIT_HOME {home:.0f} MB, of which wheels {wheels:.0f} MB")
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
