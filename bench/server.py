"""What patchkit's runtime report costs a real SGLang server on this machine's CPU (issue 32).

Usage: PATCHKIT_TEST_CACHE=... python bench/server.py [--version 0.5.23] [--runs 10] [--no-reverted]

A venv with the release installed and every patch applied (`patchkit apply --python`), the tiny
model and the CPU engine of the server tests (testing/server.py), then:
  - per process that loads plugins: the plugin's `register()` (its line, gauge and hook) against
    the time that process spent before SGLang loaded its plugins (interpreter start and SGLang's
    imports), measured inside the process by bench/server_shim/sitecustomize.py;
  - `patchkit verify --url` (the command, a child process as a user runs it) against one GET of
    `/server_info` and of `/health` from this process and against `patchkit --version` (the CLI's
    own start), interleaved run by run, medians;
  - with the reverted venv served too (unless --no-reverted): GET /server_info with the report
    (the scheduler's hook computes it per request) against the same GET without it.
Prints ratios; wall time on a shared machine includes waiting for the CPU, so the load average is
beside it. One server at a time (each ~3 GB).
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from testing import server, server_checks  # noqa: E402
from testing.cli import run  # noqa: E402

SHIM = Path(__file__).resolve().parent / "server_shim"


def load() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


def timed_get(target: server.Server, path: str) -> float:
    start = time.perf_counter()
    answer = target.request("GET", path)
    assert answer.status == 200, answer.status
    return time.perf_counter() - start


def timed_patchkit(args: list[str], cwd: Path) -> float:
    """A `patchkit` command as a user runs it: a child process, from a neutral folder."""
    start = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "patchkit", *args], cwd=cwd, capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr
    return time.perf_counter() - start


def plugin_costs(target: server.Server, timings: Path) -> None:
    roles = server_checks.roles(target)
    print(f"SGLang {target.version}: healthy {target.healthy_after:.1f} s after launch (load {load()})")
    print(f"  {'process':<12} {'before plugins':>15} {'register()':>11} {'ratio':>8}")
    for line in timings.read_text().splitlines():
        row = json.loads(line)
        ratio = row["register_s"] / row["before_plugins_s"]
        print(f"  {roles.get(row['pid'], str(row['pid'])):<12} {row['before_plugins_s']:>13.2f} s "
              f"{row['register_s'] * 1000:>8.1f} ms {ratio:>8.2%}")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--version", default="0.5.23")
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--no-reverted", action="store_true", help="skip the second server (the reverted venv)")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="patchkit-bench-server-"))
    try:
        measure(args, work)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def measure(args: argparse.Namespace, work: Path) -> None:
    python = server.python_for(args.version, work / "venv")
    model = server.make_model(server.layer() / "bin" / "python", work / "model")
    assert run("apply", "--python", python).exit_code == 0
    timings = work / "plugin.jsonl"
    patched = server.start(python, model, args.version, work / "patched", pythonpath=(SHIM,),
                           env={"PATCHKIT_BENCH_PLUGIN_LOG": str(timings)})
    try:
        plugin_costs(patched, timings)
        samples: dict[str, list[float]] = {"verify --url": [], "patchkit --version": [], "GET /server_info": [],
                                           "GET /health": []}
        for _ in range(args.runs):
            samples["verify --url"].append(timed_patchkit(["verify", "--url", patched.url], work))
            samples["patchkit --version"].append(timed_patchkit(["--version"], work))
            samples["GET /server_info"].append(timed_get(patched, "/server_info"))
            samples["GET /health"].append(timed_get(patched, "/health"))
        medians = {name: statistics.median(values) for name, values in samples.items()}
        print(f"  medians of {args.runs} (load {load()}): " + ", ".join(f"{n} {m * 1000:.0f} ms" for n, m in medians.items()))
        print(f"  verify --url / GET /server_info: {medians['verify --url'] / medians['GET /server_info']:.1f}x; "
              f"/ patchkit --version (the CLI's start): {medians['verify --url'] / medians['patchkit --version']:.2f}x")
    finally:
        patched.stop()
    if args.no_reverted:
        return
    assert run("revert", "--python", python).exit_code == 0
    bare = server.start(python, model, args.version, work / "reverted")
    try:
        without = statistics.median(timed_get(bare, "/server_info") for _ in range(args.runs))
        print(f"  GET /server_info without the report {without * 1000:.0f} ms: with it "
              f"{medians['GET /server_info'] / without:.2f}x (load {load()})")
    finally:
        bare.stop()


if __name__ == "__main__":
    main()
