"""Loading a diff is linear in its number of file sections (issue 29 item 9): the time per
section of `patchkit --patches DIFF status` (and `list`) at 1,000, 4,000 and 16,000 sections,
as a ratio to the time per section at the smallest size (the goal: ~1.0 all along).

Usage: PATCHKIT_TEST_CACHE=... python bench/diff_sections.py [--sizes 1000,4000,16000]
       [--release 0.5.17] [--runs 3]

The diff is made here (testing.diffs.many_sections): N sections, each creating a two-line module
`sglang/srt/section_NNNNN.py` (checkout paths, `new file` and `index` lines as git writes them), judged on a tree of the
release's files patchkit looks at (testing.releases.copy_minimal) in a fresh PATCHKIT_HOME that
holds the test cache's wheels. Times are CPU seconds (wall time on a shared machine is mostly
waiting; wall is printed beside): the run of least CPU of `--runs`. A run's fixed cost (start-up,
the built-in patches) is measured with a one-section diff and taken off, so the time per section
is (CPU(N) - CPU(1)) / N. Below 1,000 sections or so the fixed cost is most of a run, so the
line that tells linear from not is `growth`: the CPU each added section costs from the second
size to the third over that from the first to the second (1.0 linear, ~4 quadratic at 4x). The
parse alone (unidiff.load, in this process) is beside it. Measured 2026-12-03 at load 3.9-4.8 on
2 CPUs: status growth 0.70 (16,000 sections: 1.62 s CPU), list 0.79, the parse flat (x0.98 per
section at 16,000); before DiffPatch looked its sections up in a dict, status growth 3.51 (16,000:
17.4 s CPU, 22.5 s wall; cProfile at 8,000: 85% in file_change's scan of every section, 64 million
FileDiff.path reads).
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from patchkit.diffs import unidiff  # noqa: E402
from testing.diffs import many_sections  # noqa: E402
from testing.releases import HOME, copy_minimal  # noqa: E402


def best(argv: list[str], env: dict, runs: int) -> tuple[float, float]:
    """(wall s, CPU s) of the run of least CPU time (a shared machine's load adds wall time, and
    some CPU, never takes any off) of a command that must exit 0."""
    found = []
    for _ in range(runs):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        start = time.perf_counter()
        done = subprocess.run(argv, env=env, capture_output=True, check=False)
        wall = time.perf_counter() - start
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        if done.returncode != 0:
            sys.exit(f"{' '.join(argv[:5])} ...: exit {done.returncode}\n{done.stderr.decode()[-2000:]}")
        found.append((wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)))
    return min(found, key=lambda run: run[1])


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes", default="1000,4000,16000")
    parser.add_argument("--release", default="0.5.17")
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    sizes = [int(n) for n in args.sizes.split(",")]
    root = Path(tempfile.mkdtemp(prefix="patchkit-bench-sections-"))
    exe = str(Path(sys.executable).with_name("patchkit"))
    load_before = os.getloadavg()
    try:
        site = copy_minimal(args.release, root / "site")
        home = root / "home"
        home.mkdir()
        (home / "wheels").symlink_to(HOME / "wheels")
        env = {**os.environ, "PATCHKIT_HOME": str(home)}
        diffs = {}
        for n in [1, *sizes]:
            diffs[n] = root / f"s{n}.patch"
            diffs[n].write_bytes(many_sections(n, "bench-sections", prefix="python/"))
        commands = {"status": lambda d: [exe, "--patches", str(d), "status", "--site-packages", str(site)],
                    "list": lambda d: [exe, "--patches", str(d), "list"]}
        print(f"a diff of N sections creating modules, on {args.release}; the run of least CPU of {args.runs}; "
              "per section = (CPU(N) - CPU(1)) / N, its ratio to the first size's; step = the CPU per section "
              "added from the size before")
        print(f"{'':<8} {'sections':>8} {'wall s':>7} {'CPU s':>6} {'ms/section':>10} {'ratio':>6} {'step ms':>8}")
        for name, argv in commands.items():
            fixed_wall, fixed = best(argv(diffs[1]), env, args.runs)
            print(f"{name:<8} {1:>8} {fixed_wall:>7.2f} {fixed:>6.2f}")
            first, before, steps = None, (1, fixed), []
            for n in sizes:
                wall, cpu = best(argv(diffs[n]), env, args.runs)
                per = (cpu - fixed) / n
                first = first or per
                step = (cpu - before[1]) / (n - before[0])
                steps.append(step)
                before = (n, cpu)
                # Below the noise (a run's CPU varies by ~0.05 s here) a ratio means nothing: "-".
                ratio = f"{per / first:>6.2f}" if first * sizes[0] > 0.05 else f"{'-':>6}"
                print(f"{name:<8} {n:>8} {wall:>7.2f} {cpu:>6.2f} {per * 1e3:>10.3f} {ratio} "
                      f"{step * 1e3:>8.3f}", flush=True)
            if len(steps) >= 3 and steps[1] > 0:
                # Linear: ~1 (each added section costs the same); quadratic: ~4 for 4x the sections.
                print(f"{name:<8} growth: CPU per added section {sizes[1]:,}->{sizes[2]:,} / {sizes[0]:,}->{sizes[1]:,} "
                      f"= {steps[2] / steps[1]:.2f}")
        first = None
        for n in sizes:
            data = diffs[n].read_bytes()
            start = time.perf_counter()
            unidiff.load(data, diffs[n].name)
            per = (time.perf_counter() - start) / n
            first = first or per
            print(f"{'parse':<8} {n:>8} {per * n:>7.2f} {'':>6} {per * 1e3:>10.3f} {per / first:>6.2f}")
        print(f"load average {load_before[0]:.1f} before, {os.getloadavg()[0]:.1f} after, on {os.cpu_count()} CPUs")
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
