"""The runtime plugin's cost is linear in the record (issue 41.5): the time `register()` takes (the
report SGLang's load_plugins() makes in every process, and /server_info's hook makes per request)
on a synthetic tree whose `.patchkit/state.json` records N patch ids and N files
(testing.synthetic.large_record), at each size, per recorded file and as a ratio to the smallest
size's (the goal: ~1.0 all along; a cost growing with the record squared doubles it at each 2x).

Usage: python bench/runtime_plugin.py [--sizes 1250,2500,5000] [--runs 3]

Each run is a fresh Python (`python -c`, the plugin rendered as `apply` writes it, the tree on
sys.path): CPU seconds of `register()` alone, the run of least CPU of `--runs`, stderr's line to
/dev/null. The files the record names are not on disk (a failed open each: drifted), so the time is
the plugin's own work on the record, not reading modules. Measured 2026-12-07 at load 9-11 on 2 CPUs
(docs/speed.md): x1.00 / x0.96 / x0.95 per file (5,000: 0.16 s); before, x1.00 / x1.72 / x5.49 (4.05 s).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from patchkit.store import runtime_plugin  # noqa: E402
from testing.synthetic import large_record, make_tree  # noqa: E402

CHILD = """
import json, sys, time, types
sys.path.insert(0, sys.argv[1])
module = types.ModuleType("sglang_patchkit_runtime")
exec(open(sys.argv[2]).read(), module.__dict__)
sys.stderr = open("/dev/null", "w")
start = time.process_time()
module.register()
took = time.process_time() - start
report = module.report()
print(json.dumps({"cpu": took, "patches": len(report["patches"]), "error": report["error"]}))
"""


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes", default="1250,2500,5000")
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    sizes = [int(n) for n in args.sizes.split(",")]
    root = Path(tempfile.mkdtemp(prefix="patchkit-bench-plugin-"))
    load_before = os.getloadavg()
    try:
        plugin = root / "plugin.py"
        plugin.write_bytes(runtime_plugin.render([])[runtime_plugin.MODULE_FILE])
        print("register() on a record of N ids x N files; CPU s, the run of least CPU of "
              f"{args.runs}; per file = CPU / N, its ratio to the first size's")
        print(f"{'N':>7} {'record kB':>9} {'CPU s':>8} {'us/file':>8} {'ratio':>6}  report")
        first = None
        for n in sizes:
            site = make_tree(root / f"site-{n}")
            (site / ".patchkit").mkdir()
            record = json.dumps(large_record(n, n)).encode()
            (site / ".patchkit" / "state.json").write_bytes(record)
            found = []
            for _ in range(args.runs):
                done = subprocess.run([sys.executable, "-c", CHILD, str(site), str(plugin)], capture_output=True,
                                      check=True, text=True)
                found.append(json.loads(done.stdout))
            best = min(found, key=lambda run: run["cpu"])
            per = best["cpu"] / n
            first = first or per
            said = f"{best['patches']} patches" + (f", error: {best['error'][:60]}" if best["error"] else "")
            print(f"{n:>7} {len(record) / 1000:>9.0f} {best['cpu']:>8.3f} {per * 1e6:>8.1f} {per / first:>6.2f}  {said}",
                  flush=True)
        print(f"load average {load_before[0]:.1f} before, {os.getloadavg()[0]:.1f} after, on {os.cpu_count()} CPUs")
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
