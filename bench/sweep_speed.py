"""Trials per second of the fault sweep (testing/sweep.py): this checkout against an earlier one.

Both sides run in the same process, interleaved chunk by chunk on the same machine load: the
sweep module of `--before` (a git revision; default the commit that last changed it before
this checkout's version) and this checkout's. Each side traces the scenario, plans its trials
as the test does, and runs every `--stride`-th of them (the same positions of each plan), with
all the checks of a real trial. Prints seconds per trial, trials per second, the ratio, and
each side's estimated time for the whole run (its plan size / its rate).

Usage: PATCHKIT_TEST_CACHE=... python bench/sweep_speed.py [--version 0.5.19] [--scenario revert]
           [--before REV|self] [--stride 8] [--workers 2] [--before-workers N]
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import shutil
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from testing import faults  # noqa: E402
from testing import sweep as after  # noqa: E402
from tests.faults.test_sweep import OPENAT_STRIDE, SCENARIOS  # noqa: E402


def load_before(rev: str):
    source = subprocess.run(["git", "-C", str(REPO), "show", f"{rev}:testing/sweep.py"], check=True,
                            capture_output=True, text=True).stdout
    folder = Path(tempfile.mkdtemp(prefix="sweep-before-"))
    (folder / "sweep_before.py").write_text(source)
    spec = importlib.util.spec_from_file_location("sweep_before", folder / "sweep_before.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules["sweep_before"] = module
    spec.loader.exec_module(module)
    return module


def default_before() -> str:
    """The revision before the last commit that changed testing/sweep.py (or HEAD's parent
    when the working tree changes it)."""
    dirty = subprocess.run(["git", "-C", str(REPO), "diff", "--quiet", "HEAD", "--", "testing/sweep.py"]).returncode
    if dirty:
        return "HEAD"
    last = subprocess.run(["git", "-C", str(REPO), "log", "-1", "--format=%H", "--", "testing/sweep.py"],
                          check=True, capture_output=True, text=True).stdout.strip()
    return f"{last}^"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--version", default="0.5.19")
    parser.add_argument("--scenario", default="revert", choices=[s.name for s in SCENARIOS])
    parser.add_argument("--before", default=None)
    parser.add_argument("--stride", type=int, default=8)
    parser.add_argument("--chunk", type=int, default=4)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--before-workers", type=int, default=None,
                        help="workers for the before side (default --workers); with --before self, "
                             "compares worker counts of this checkout")
    args = parser.parse_args()
    before_rev = args.before or default_before()
    before = after if before_rev == "self" else load_before(before_rev)
    workers = {"before": args.before_workers or args.workers, "after": args.workers}
    scenario = next(s for s in SCENARIOS if s.name == args.scenario)
    monkeypatch = pytest.MonkeyPatch()
    faults.cache_renders(monkeypatch)
    root = Path(tempfile.mkdtemp(prefix="sweep-bench-"))
    sides = {}
    for name, module in (("before", before), ("after", after)):
        started = time.monotonic()
        sweep = module.Sweep(args.version, scenario, root / name)
        calls = sweep.trace()
        plan = sweep.plan(calls, OPENAT_STRIDE, False)
        sides[name] = {"module": module, "sweep": sweep, "plan": plan, "sample": plan[::args.stride],
                       "seconds": 0.0, "done": 0, "counts": module.Counts(), "setup": time.monotonic() - started}
    print(f"{args.version} {args.scenario}, before = {before_rev}, every {args.stride}th trial, "
          f"workers {workers['before']} / {workers['after']}; load {os.getloadavg()[0]:.2f}", flush=True)
    pools = {name: ThreadPoolExecutor(max_workers=workers[name]) for name in sides}
    with pools["before"], pools["after"]:
        while any(side["done"] < len(side["sample"]) for side in sides.values()):
            for name, side in sides.items():
                pool = pools[name]
                chunk = side["sample"][side["done"]:side["done"] + args.chunk]
                if not chunk:
                    continue
                started = time.monotonic()
                list(pool.map(lambda t, side=side: side["sweep"].run_trial(*t, side["counts"]), chunk))
                side["seconds"] += time.monotonic() - started
                side["done"] += len(chunk)
    rates = {}
    for name, side in sides.items():
        rate = side["done"] / side["seconds"]
        rates[name] = rate
        failures = len(side["counts"].failures)
        print(f"{name:6}: {side['done']} trials in {side['seconds']:.1f} s = {1 / rate:.3f} s/trial, "
              f"{rate:.2f} trials/s; plan {len(side['plan'])} trials -> whole run ~{len(side['plan']) / rate:.0f} s "
              f"(+{side['setup']:.0f} s set-up); failures {failures}", flush=True)
        if hasattr(side["sweep"], "close"):
            side["sweep"].close()
    plans = len(sides["before"]["plan"]) / rates["before"], len(sides["after"]["plan"]) / rates["after"]
    print(f"ratio trials/s after/before: {rates['after'] / rates['before']:.2f}x; "
          f"whole-run time before/after: {plans[0] / plans[1]:.2f}x; load {os.getloadavg()[0]:.2f}")
    monkeypatch.undo()
    shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
