"""A 40-file diff patch judged across releases, and `status` of an applied diff set.

Usage: PATCHKIT_TEST_CACHE=... python bench/diffs.py [--from 0.5.10] [--to 0.5.23] [--base 0.5.16]
       [--head 0.5.17] [--files 40] [--warm-runs 3] [--status-runs 5] [--no-cold]

The diff is made here, by real git, from the real difference between two releases (`--base` ->
`--head`: the first N files under sglang/srt/ that both have and that changed, sorted by path,
files under 60 KB), with the paths of an SGLang checkout (python/sglang/...), made against
`--base`. Then, each in a fresh PATCHKIT_HOME:
  - download alone: `pip download` of every release of the range, one after the other;
  - cold `patchkit --patches DIFF matrix`: the same downloads, the built-in patches and the diff judged;
  - warm: the same command again (verdict cache and wheels there);
and `status` of a tree of `--base` with the diff applied, against the same tree with the built-in
set applied (both decided from hashes). Goals (issue 19): cold matrix <= download + 10 s, warm
<= 5 s, status of the diff set as fast as of the built-in set. Prints ratios; wall time on a
shared machine includes waiting for the CPU, so CPU time and the load average are beside it.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.matrix import download_alone  # noqa: E402
from patchkit.engine import upstream  # noqa: E402
from testing.diffs import git_diff  # noqa: E402
from testing.releases import copy_minimal, pristine  # noqa: E402


def timed(argv: list[str], env: dict, ok: tuple[int, ...] = (0,)) -> tuple[float, float, subprocess.CompletedProcess]:
    """(wall s, CPU s of the child) of one command; exit codes outside `ok` stop the benchmark
    (`matrix` exits 1 when a patch is `failed` on some release: a verdict, not an error)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    proc = subprocess.run(argv, env=env, capture_output=True, text=True, check=False)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode not in ok:
        sys.exit(f"{' '.join(argv[:6])} ... exit {proc.returncode}:\n{proc.stderr[-2000:]}")
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime), proc


def changed_files(base: str, head: str, count: int) -> list[str]:
    old, new = pristine(base), pristine(head)
    found = []
    for path in sorted((old / "sglang" / "srt").rglob("*.py")):
        rel = path.relative_to(old).as_posix()
        other = new / rel
        if other.is_file() and path.stat().st_size < 60_000 and other.read_bytes() != path.read_bytes():
            found.append(rel)
            if len(found) == count:
                break
    return found


def make_diff(base: str, head: str, files: list[str], dest: Path) -> Path:
    text = git_diff({rel: (pristine(base) / rel).read_bytes() for rel in files},
                    {rel: (pristine(head) / rel).read_bytes() for rel in files}, prefix="python/",
                    header=f"Patchkit-Id: bench-{len(files)}-files\nPatchkit-Title: {len(files)} files of {base} -> {head}\n")
    dest.write_bytes(text)
    return dest


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--from", dest="first", default="0.5.10")
    parser.add_argument("--to", dest="last", default="0.5.23")
    parser.add_argument("--base", default="0.5.16")
    parser.add_argument("--head", default="0.5.17")
    parser.add_argument("--files", type=int, default=40)
    parser.add_argument("--warm-runs", type=int, default=3)
    parser.add_argument("--status-runs", type=int, default=5)
    parser.add_argument("--no-cold", action="store_true", help="skip the downloads (warm and status only, "
                        "with the test cache's wheels)")
    args = parser.parse_args()
    versions = upstream.versions_between(args.first, args.last)
    root = Path(tempfile.mkdtemp(prefix="patchkit-bench-diffs-"))
    exe = str(Path(sys.executable).with_name("patchkit"))
    load_before = os.getloadavg()
    try:
        files = changed_files(args.base, args.head, args.files)
        diff = make_diff(args.base, args.head, files, root / "bench.patch")
        hunks = diff.read_bytes().count(b"\n@@ ")
        print(f"diff: {len(files)} files of {args.base} -> {args.head}, {diff.stat().st_size / 1e3:.0f} kB, "
              f"{hunks} hunks; releases {versions[0]} .. {versions[-1]} ({len(versions)})")
        matrix = [exe, "--patches", str(diff), "matrix", "--json", "--from", args.first, "--to", args.last]
        home = root / "home"
        if args.no_cold:
            from testing.releases import HOME

            home.mkdir()
            (home / "wheels").symlink_to(HOME / "wheels")
        else:
            wall_dl, cpu_dl = download_alone(versions, root / "alone")
            print(f"  download alone (pip)   {wall_dl:7.1f} s (CPU {cpu_dl:5.1f})", flush=True)
        env = {**os.environ, "PATCHKIT_HOME": str(home)}
        wall_cold, cpu_cold, cold = timed(matrix, env, ok=(0, 1))
        label = "first matrix (wheels there)" if args.no_cold else "cold matrix"
        print(f"  {label:<22} {wall_cold:7.1f} s (CPU {cpu_cold:5.1f})"
              + ("" if args.no_cold else f"   = download {wall_cold - wall_dl:+.1f} s (goal <= +10 s)"), flush=True)
        warm = [timed(matrix, env, ok=(0, 1)) for _ in range(args.warm_runs)]
        assert all(w.stdout == cold.stdout for _, _, w in warm), "warm matrix differs from the first"
        print(f"  warm matrix (median)   {statistics.median(w for w, _, _ in warm):7.1f} s "
              f"(CPU {statistics.median(c for _, c, _ in warm):5.1f})   goal <= 5 s")
        row = next(p for p in json.loads(cold.stdout)["patches"] if p["id"].startswith("bench-"))
        print("  verdicts: " + ", ".join(f"{v} {s}" for v, s in row["states"].items()))
        print(f"  made for: {row.get('made_for')}")

        # status of an applied diff set vs the built-in set, from hashes
        diff_site = copy_minimal(args.base, root / "diff-site", tuple(files))
        builtin_site = copy_minimal(args.base, root / "builtin-site", tuple(files))
        env = {**os.environ, "PATCHKIT_HOME": str(home)}
        timed([exe, "--patches", str(diff), "apply", "--site-packages", str(diff_site), "--only", row["id"]], env)
        timed([exe, "apply", "--site-packages", str(builtin_site)], env, ok=(0, 1))
        with_diff = [timed([exe, "--patches", str(diff), "status", "--site-packages", str(diff_site)], env)
                     for _ in range(args.status_runs)]
        builtin = [timed([exe, "status", "--site-packages", str(builtin_site)], env) for _ in range(args.status_runs)]
        w_diff, w_builtin = statistics.median(w for w, _, _ in with_diff), statistics.median(w for w, _, _ in builtin)
        print(f"  status, {len(files)}-file diff applied   {w_diff:5.2f} s (CPU {statistics.median(c for _, c, _ in with_diff):4.2f})")
        print(f"  status, built-in set applied   {w_builtin:5.2f} s (CPU {statistics.median(c for _, c, _ in builtin):4.2f})"
              f"   diff / built-in = {w_diff / w_builtin:.2f}")
        print(f"load average {load_before[0]:.1f} before, {os.getloadavg()[0]:.1f} after, on {os.cpu_count()} CPUs")
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
