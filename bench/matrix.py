"""Time of `patchkit matrix` over the cached releases, and its cost per release x target file.

Usage: python bench/matrix.py [--runs 5]   (releases are fetched into the cache first, untimed)
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time

from patchkit import manifest, registry, releases


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    versions = manifest.available()
    target_files = 0
    for version in versions:
        tree = releases.pristine_tree(version)  # warm the cache: downloads are not what we time
        target_files += len({t for p in registry.load_all() for t in p.TARGETS if (tree / t).exists()})
    samples = []
    for _ in range(args.runs):
        start = time.perf_counter()
        subprocess.run([sys.executable, "-m", "patchkit", "matrix", "--json"], check=True, stdout=subprocess.DEVNULL)
        samples.append(time.perf_counter() - start)
    total = statistics.median(samples)
    print(f"matrix over {len(versions)} cached releases ({versions[0]} .. {versions[-1]}), median of {args.runs} runs")
    print(f"  total                          {total:8.2f} s")
    print(f"  release x target files         {target_files:8d}")
    print(f"  per release x target file      {total / target_files * 1000:8.1f} ms")


if __name__ == "__main__":
    main()
