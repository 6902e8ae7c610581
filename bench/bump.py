"""`patchkit bump`: the built-in set plus four diffs of 20-40 files moved to a new release.

Usage: PATCHKIT_TEST_CACHE=... python bench/bump.py [--from 0.5.15.post1] [--to 0.5.23] [--warm-runs 3]
       [--rounds 1] [--no-cold]

The four diffs are made here from real releases (testing.field_diffs.disjoint_diffs: upstream's
next-release changes merged onto `--from`, no file in two of them). Then:
  - warm: `patchkit --patches SET bump --from A --to B -o DIR --json` with both wheels in the
    cache (a home whose wheels/ links the tests' cached wheels), each run into a new DIR;
  - inferred: one more warm bump without --from (V0 from the diffs' index hashes);
  - download alone: `pip download` of A and B, one after the other, into an empty folder (as
    patchkit downloads them);
  - cold: the same bump in an empty PATCHKIT_HOME (it downloads both wheels, asks the index for
    its releases once).
Each run's --json report is checked (`checked`): a bump that reports other releases, an action it
does not spell or `failed`, an exit code its actions do not give, other actions than EXPECTED on
the default releases or than the first run, or a DIR without what it names, stops the bench.
Goals (issue 30): warm <= 10 s, cold <= downloads + 15 s. Prints ratios (<= 1.00 meets the goal);
wall time on a shared machine includes waiting for the CPU: CPU time and the load are beside it.
`bump` exits 1 when conflicts remain (a result, not an error).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.diffs import timed  # noqa: E402
from bench.matrix import download_alone  # noqa: E402
from testing.checkout import wheel_home  # noqa: E402
from testing.field_diffs import disjoint_diffs  # noqa: E402
from patchkit.engine.bump_record import (BLOCKING, CARRIES, CONFLICTS, DROP, FAILED, GONE, NOT_NEEDED,  # noqa: E402
                                         RECORD, REBASED, REPORT)

ACTIONS = (CARRIES, REBASED, DROP, GONE, CONFLICTS, FAILED, NOT_NEEDED)
DEFAULTS = ("0.5.15.post1", "0.5.23")  # the releases EXPECTED is for
# Each patch's action on the defaults (measured 2026-12-07): a built-in patch added or changed says so here.
EXPECTED = {**{pid: CARRIES for pid in (
    "autoround-packed-mapping", "draft-lmhead-placeholder", "fp4-kv-sm100", "fp8-kv-triton-sm89", "gdn-conv-state-dtype",
    "gdn-cutedsl-decode-sm90", "mamba-slot-graceful", "moe-w2-presharded", "mtp-draft-kv-budget", "spec-mamba-lazy-buffer",
    "symm-mem-kill-switch")},
            **{pid: DROP for pid in ("cpu-offload-tied-params", "eagle3-capture-hook", "mtp-layer-detection")},
            **{f"v0-5-15-post1-part{part}": CONFLICTS for part in range(1, 5)}}  # upstream changed their files again

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

        def bump(home: Path, out: Path, first: str | None = args.first) -> tuple[float, float, int]:
            env = {**os.environ, "PATCHKIT_HOME": str(home)}
            given = ["--from", first] if first else []  # none: bump infers V0 from the diffs' index hashes
            wall, cpu, proc = timed([exe, "--patches", str(patch_set), "bump", *given, "--to", args.last, "-o",
                                     str(out), "--json"], env, ok=(0, 1))
            actions = checked(proc, out, args.first, args.last)
            if reported.setdefault("actions", actions) != actions:
                sys.exit(f"bump into {out} reported other actions than the first run: {actions} against "
                         f"{reported['actions']}")
            return wall, cpu, proc.returncode

        reported: dict[str, dict[str, str]] = {}
        warm_home = wheel_home(root / "warm-home", (args.first, args.last))
        warm = [bump(warm_home, root / f"warm-{i}") for i in range(args.warm_runs + 1)][1:]  # the first fills the caches
        wall = statistics.median(w for w, _, _ in warm)
        cpu = statistics.median(c for _, c, _ in warm)
        print(f"warm bump: median {wall:.2f} s wall, {cpu:.2f} s CPU over {len(warm)} runs (exit {warm[0][2]}); "
              f"goal {WARM_GOAL:.0f} s: ratio {wall / WARM_GOAL:.2f}")
        print(f"actions: {_counted(reported['actions'])}")
        i_wall, i_cpu, code = bump(warm_home, root / "warm-inferred", None)
        print(f"warm bump without --from (V0 {args.first} inferred from the diffs): {i_wall:.2f} s wall, "
              f"{i_cpu:.2f} s CPU (exit {code}), the same actions")
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


def checked(proc: subprocess.CompletedProcess, out: Path, first: str, last: str) -> dict[str, str]:
    """{patch id: action} of what bump reported on stdout (--json), after checking it: the releases it
    names, each action one bump spells, the exit code that the actions give (1: conflicts or failures
    remain), no patch failed, for the default releases each patch's action as known, and DIR holding
    what the report says it wrote (each re-made diff, each conflict's tree, the record and REPORT.md)."""
    where = f"bump into {out}"
    try:
        report = json.loads(proc.stdout)
    except ValueError as exc:
        sys.exit(f"{where}: its --json output is not JSON ({exc}): {proc.stdout[:200]!r}")
    if (report.get("from"), report.get("to")) != (first, last):
        sys.exit(f"{where}: reported {report.get('from')} -> {report.get('to')}, not {first} -> {last}")
    actions = {row["id"]: row["action"] for row in report["patches"]}
    odd = {pid: action for pid, action in actions.items() if action not in ACTIONS}
    if odd or FAILED in actions.values():
        sys.exit(f"{where}: actions no bump gives, or failed: {odd or actions}")
    blocked = any(action in BLOCKING for action in actions.values())
    if proc.returncode != (1 if blocked else 0):
        sys.exit(f"{where}: exit {proc.returncode}, while the actions {'do' if blocked else 'do not'} block")
    if (first, last) == DEFAULTS and actions != EXPECTED:
        sys.exit(f"{where}: actions {actions}, expected {EXPECTED}")
    missing = [name for name in (RECORD, REPORT) if not (out / name).is_file()]
    for row in report["patches"]:
        if row["kind"] == "diff" and row["action"] in (CARRIES, REBASED) and not row["written"]:
            missing.append(f"{row['id']}'s re-made patch (none reported)")
        if row["written"] and not (out / row["written"]).is_file():
            missing.append(row["written"])
        if row["tree"] and not (out / row["tree"]).is_dir():
            missing.append(row["tree"] + "/")
        if row["action"] == CONFLICTS and not (row["tree"] or row["waits_on"]):
            missing.append(f"{row['id']}'s conflict tree (none reported)")
    if missing:
        sys.exit(f"{where}: DIR lacks {', '.join(missing)}")
    return actions


def _counted(actions: dict[str, str]) -> str:
    counts: dict[str, int] = {}
    for action in actions.values():
        counts[action] = counts.get(action, 0) + 1
    return ", ".join(f"{count} {action}" for action, count in sorted(counts.items()))


if __name__ == "__main__":
    main()
