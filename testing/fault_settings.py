"""The fault sweeps' settings, read from the environment (docs/faults.md says each), and the
summary each run prints and writes: one place for tests/faults/test_sweep.py and
tests/faults/test_bump_sweep.py."""

from __future__ import annotations

import json
import os

from testing.sweep import Counts

# Python's own imports open hundreds of files outside the tree; those openat calls are sampled.
OPENAT_STRIDE = int(os.environ.get("PATCHKIT_FAULT_OPENAT_STRIDE", "25"))
# "full": SIGINT, EIO and ENOSPC each at every N; the default gives each N one of them in turn
# (SIGKILL at every kill point either way), so that CI can sweep every run.
FULL = os.environ.get("PATCHKIT_FAULT_DEPTH", "") == "full"
WORKERS = int(os.environ.get("PATCHKIT_FAULT_WORKERS", str(min(2, os.cpu_count() or 1))))
# Which runs to sweep: "VERSION:SCENARIO,..." (none: every run).
WANTED = {w.strip() for w in os.environ.get("PATCHKIT_FAULT_RUNS", "").split(",") if w.strip()}


def sample_size(variable: str, default: str) -> int:
    """Trials per run (a fixed-seed sample, testing.sweep.sample) from `variable`; 0 (also "" or
    "all"): the whole plan."""
    value = os.environ.get(variable, default).strip().lower()
    return 0 if value in ("", "0", "all") else int(value)


def report(version: str, scenario: str, sample: int, counts: Counts, **extra: object) -> None:
    """Print the run's counts as one JSON line, and write them with the first 20 failures to
    $PATCHKIT_FAULT_REPORT/SCENARIO-VERSION.json where that is set."""
    summary = {"version": version, "scenario": scenario, "full": FULL, "sample": sample or "all", **extra,
               **{k: v for k, v in vars(counts).items() if k != "failures"}, "failures": counts.failures[:20]}
    folder = os.environ.get("PATCHKIT_FAULT_REPORT")
    if folder:
        os.makedirs(folder, exist_ok=True)
        with open(os.path.join(folder, f"{scenario}-{version}.json"), "w") as handle:
            json.dump(summary, handle, indent=1, default=dict)
    print(json.dumps({k: v for k, v in summary.items() if k != "failures"}, default=dict))
