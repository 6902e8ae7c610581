"""`patchkit bump`: the built-in set plus four diffs of 20-40 files moved to a new release.

Usage: PATCHKIT_TEST_CACHE=... python bench/bump.py [--from 0.5.15.post1] [--to 0.5.23] [--warm-runs 3]
       [--rounds 1] [--no-cold]

The four diffs are made here from real releases (testing.field_diffs.disjoint_diffs: upstream's
next-release changes merged onto `--from`, no file in two of them). Then:
  - warm: `patchkit --patches SET bump --from A --to B -o DIR --json` with both wheels in the
    cache (a home whose wheels/ links the tests' cached wheels), each run into a new DIR;
  - download alone: `pip download` of A and B, one after the other, into an empty folder (as
    patchkit downloads them);
  - cold: the same bump in an empty PATCHKIT_HOME (it downloads both wheels, asks the index for
    its releases once).
Goals (issue 30): warm <= 10 s, cold <= downloads + 15 s. Prints ratios (<= 1.00 meets the goal);
wall time on a shared machine includes waiting for the CPU: CPU time and the load are beside it.
`bump` exits 1 when conflicts remain (a result, not an error).
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.diffs import timed  # noqa: E402
from bench.matrix import download_alone  # noqa: E402
from testing.checkout import wheel_home  # noqa: E402
from testing.field_diffs import disjoint_diffs  # noqa: E402

WARM_GOAL, COLD_MARGIN = 10.0, 15.0  # seconds


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--from", dest="first", default="0.5.15.post1")
    parser.add_argument("--to", dest="last", default="0.5.23")
    parser.add_argument("--warm-runs", type=int, default=3)
    parser.add_argument("--rounds", type=int, default=1, help="pairs of (download alone, cold bump)")
    parser.add_argument("--no-cold", action="store_true")
    args = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="patchkit-bench-bump-"))
    exe = str(Path(sys.executable).with_name("patchkit"))
    load_before = os.getloadavg()
    try:
        patch_set = root / "set"
        patch_set.mkdir()
        diffs = disjoint_diffs(args.first)
        for diff in diffs:
            diff.write(patch_set)
        sizes = [len(diff.after) for diff in diffs]
        print(f"patch set: the built-in patches + {len(diffs)} diffs of {', '.join(map(str, sizes))} files "
              f"(made on {args.first}); bump {args.first} -> {args.last}")

        def bump(home: Path, out: Path) -> tuple[float, float, int]:
            env = {**os.environ, "PATCHKIT_HOME": str(home)}
            wall, cpu, proc = timed([exe, "--patches", str(patch_set), "bump", "--from", args.first, "--to",
                                     args.last, "-o", str(out), "--json"], env, ok=(0, 1))
            return wall, cpu, proc.returncode

        warm_home = wheel_home(root / "warm-home", (args.first, args.last))
        warm = [bump(warm_home, root / f"warm-{i}") for i in range(args.warm_runs + 1)][1:]  # the first fills the caches
        wall = statistics.median(w for w, _, _ in warm)
        cpu = statistics.median(c for _, c, _ in warm)
        print(f"warm bump: median {wall:.2f} s wall, {cpu:.2f} s CPU over {len(warm)} runs (exit {warm[0][2]}); "
              f"goal {WARM_GOAL:.0f} s: ratio {wall / WARM_GOAL:.2f}")
        for round_ in range(0 if args.no_cold else args.rounds):
            folder = root / f"downloads-{round_}"
            folder.mkdir()
            d_wall, d_cpu = download_alone([args.first, args.last], folder)
            c_wall, c_cpu, code = bump(root / f"cold-home-{round_}", root / f"cold-{round_}")
            goal = d_wall + COLD_MARGIN
            print(f"cold bump: {c_wall:.2f} s wall, {c_cpu:.2f} s CPU (exit {code}); downloads alone {d_wall:.2f} s "
                  f"wall, {d_cpu:.2f} s CPU; goal downloads + {COLD_MARGIN:.0f} s = {goal:.2f} s: "
                  f"ratio {c_wall / goal:.2f} (bump less downloads: {c_wall - d_wall:.2f} s)")
    finally:
        shutil.rmtree(root, ignore_errors=True)
    print(f"load average before {load_before[0]:.2f}, after {os.getloadavg()[0]:.2f}; {os.cpu_count()} CPUs")


if __name__ == "__main__":
    main()
