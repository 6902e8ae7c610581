"""Speed goals of the core issue, measured as medians over repeated child processes.

  status on a patched tree                 <= 2.5x  `python -c pass`   (hash check, no libcst, no click:
  no-op apply on a patched tree            <= 3x    `python -c pass`    patchkit.cli.fast_path; issue 43.3;
                                                                      also as the median of per-run paired ratios)
  cold apply                               <= 1.0x  libcst parsing + regenerating the target files

patchkit runs from bytecode, as an installed copy does (pip compiles it at install, whatever
PYTHONDONTWRITEBYTECODE says): its package folders are compiled first. `--no-bytecode` measures a
checkout that compiles every module at each start instead (an editable install under
PYTHONDONTWRITEBYTECODE=1): their bytecode caches are removed and none is written.

Everything runs on one core (`--cpu`, default 0; children inherit the affinity); the commands
compared are run in turn, run after run, so a change of load weighs on all alike. A cold apply
parses with libcst only the parts of the files the patches declare (`patchkit.engine.skeleton`), so it
can cost less than parsing the whole files.

Usage: python bench/speed.py [--version 0.5.17] [--runs 15] [--cpu 0] [--no-bytecode]
"""

from __future__ import annotations

import argparse
import compileall
import importlib.util
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import patchkit
from patchkit.engine import registry
from patchkit.releases import manifest, pristine as releases


def package_folders() -> list[Path]:
    """The folders patchkit's modules are imported from: the package, its built-in patches and
    its manifests (top-level folders of the checkout, mapped into the package)."""
    spec = importlib.util.find_spec(manifest.MANIFESTS_PACKAGE)
    manifests = [Path(p) for p in spec.submodule_search_locations or ()] if spec is not None else []
    return list(dict.fromkeys([Path(patchkit.__file__).parent, registry.patch_sets()[0].folder, *manifests]))


def bytecode(compiled: bool) -> str:
    """Compile patchkit's modules as pip does at install, or remove their bytecode caches (and
    have the children write none): what is measured, in words."""
    if compiled:
        for folder in package_folders():
            compileall.compile_dir(folder, quiet=1)
        return "patchkit from bytecode (as pip installs it)"
    os.environ["PYTHONDONTWRITEBYTECODE"] = "1"  # the children inherit it
    for folder in package_folders():
        for cache in folder.rglob("__pycache__"):
            shutil.rmtree(cache)
    return "patchkit compiled from source at each start (--no-bytecode)"


def timed(argv: list[str], cwd: Path, env: dict[str, str] | None = None) -> tuple[float, float]:
    """(wall, CPU) seconds of one child process (the CPU its own user + system time: what a
    busy shared machine does not add to, unlike the wall time spent waiting for the core)."""
    # Run from a neutral folder: `python -m patchkit` puts the working folder first on sys.path,
    # and from a checkout it would import that checkout, not the interpreter's own patchkit.
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    subprocess.run(argv, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=cwd,
                   env=None if env is None else {**os.environ, **env})
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime


def samples_of(commands: dict[str, tuple], runs: int, cwd: Path) -> tuple[dict[str, list[float]], dict[str, list[float]]]:
    """Wall and CPU times of each command, the commands interleaved run by run (so a change of
    load on a shared machine weighs on all of them alike). Each value is (argv, prepare[, environment])."""
    wall: dict[str, list[float]] = {name: [] for name in commands}
    cpu: dict[str, list[float]] = {name: [] for name in commands}
    for _ in range(runs):
        for name, (argv, prepare, *env) in commands.items():
            if prepare:
                prepare()
            seconds, used = timed(argv, cwd, *env)
            wall[name].append(seconds)
            cpu[name].append(used)
    return wall, cpu


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--version", default="0.5.17")
    parser.add_argument("--runs", type=int, default=15)
    parser.add_argument("--cpu", type=int, default=0, help="the one core every measured process runs on")
    parser.add_argument("--compare", metavar="PYTHON",
                        help="also time a cold apply by the patchkit installed for this interpreter (an older checkout's "
                             "venv), interleaved with the rest: before/after ratios under the same load")
    parser.add_argument("--no-bytecode", action="store_true",
                        help="measure patchkit compiled from source at each start (a checkout under "
                             "PYTHONDONTWRITEBYTECODE=1), not from the bytecode an install has")
    args = parser.parse_args()
    compiled = bytecode(not args.no_bytecode)
    if hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {args.cpu})

    py = sys.executable
    pristine = releases.pristine_tree(args.version)
    work = Path(tempfile.mkdtemp(prefix="patchkit-bench-"))
    site = work / "site"
    targets = sorted({t for p in registry.load_all() for t in p.TARGETS if (pristine / t).exists()})

    def fresh_copy() -> None:
        shutil.rmtree(site, ignore_errors=True)
        shutil.copytree(pristine, site, copy_function=lambda s, d: shutil.copy2(s, d) if s.endswith(".py") and "/srt/" in s else __import__("os").link(s, d))

    parse_regen = (
        "import libcst, sys\n"
        "for f in sys.argv[1:]:\n"
        "    libcst.parse_module(open(f, 'rb').read()).code\n"
    )
    apply = [py, "-m", "patchkit", "apply", "--site-packages", str(site)]
    other = {"compare": ([args.compare, "-m", "patchkit", "apply", "--site-packages", str(site)], fresh_copy)} if args.compare else {}
    first, _ = samples_of({
        **other,
        "cold": (apply, fresh_copy),
        "libcst_only": ([py, "-c", parse_regen, *[str(pristine / t) for t in targets]], None),
        "imports": ([py, "-c", "import libcst.matchers, click, patchkit.engine.planning, packaging.specifiers"], None),
        "libcst_import": ([py, "-c", "import libcst"], None),
    }, args.runs, work)
    # `site` is now patched (the last cold apply): status and a second apply are no-ops.
    warm, warm_cpu = samples_of({
        "bare_warm": ([py, "-c", "pass"], None),
        "status": ([py, "-m", "patchkit", "status", "--site-packages", str(site)], None),
        "noop": (apply, None),
        # The SGLang this Python imports (here through PYTHONPATH), no targeting option: as in a container.
        "installed": ([py, "-m", "patchkit", "status"], None, {"PYTHONPATH": str(site)}),
    }, args.runs, work)
    # Each run's ratio against the bare start measured right before it, then their median: a
    # change of load between runs cancels out.
    # The CPU ratio: medians of the CPU time of each (load adds little to it).
    paired_ratio = {name: f"; paired per-run {statistics.median(t / b for t, b in zip(warm[name], warm['bare_warm'])):.2f}x"
                          f"; CPU {statistics.median(warm_cpu[name]) / statistics.median(warm_cpu['bare_warm']):.2f}x"
                    for name in ("status", "noop", "installed")}
    # The cold ratio of each run (both sides measured one right after the other), then its median.
    paired = statistics.median(c / b for c, b in zip(first["cold"], first["libcst_only"]))
    med = {name: statistics.median(values) for name, values in {**first, **warm}.items()}
    bare, libcst_only, imports, libcst_import = med["bare_warm"], med["libcst_only"], med["imports"], med["libcst_import"]
    status, noop, cold = med["status"], med["noop"], med["cold"]
    shutil.rmtree(work)

    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(f"SGLang {args.version}, {len(targets)} target file(s), median of {args.runs} interleaved runs, "
          f"load average {load:.1f} on {os.cpu_count()} core(s); {compiled}")
    print(f"  python -c pass           {bare * 1000:8.1f} ms")
    print(f"  status (patched)         {status * 1000:8.1f} ms   ratio {status / bare:5.2f}x  (goal <= 2.5x){paired_ratio['status']}")
    print(f"  apply no-op (patched)    {noop * 1000:8.1f} ms   ratio {noop / bare:5.2f}x  (goal <= 3x){paired_ratio['noop']}")
    print(f"  status, this Python's    {med['installed'] * 1000:8.1f} ms   ratio {med['installed'] / bare:5.2f}x  "
          f"(no option: SGLang on PYTHONPATH){paired_ratio['installed']}")
    print(f"  libcst parse+regenerate  {libcst_only * 1000:8.1f} ms")
    print(f"  apply cold               {cold * 1000:8.1f} ms   ratio {cold / libcst_only:5.2f}x  (goal <= 1.0x; "
          f"median of the per-run ratios {paired:.2f}x)")
    # Where the cold-apply gap goes: libcst.matchers (which the patches match with) alone
    # costs more to import than libcst itself; the work after the imports is compared too.
    work_cold, work_base = cold - imports, libcst_only - libcst_import
    if args.compare:
        print(f"  apply cold by {args.compare}: {med['compare'] * 1000:.1f} ms   ratio {med['compare'] / libcst_only:5.2f}x  "
              f"(median of the per-run ratios "
              f"{statistics.median(c / b for c, b in zip(first['compare'], first['libcst_only'])):.2f}x)")
    print(f"  imports of an apply      {imports * 1000:8.1f} ms   (libcst alone {libcst_import * 1000:.1f} ms)")
    print(f"  apply cold, after imports{work_cold * 1000:8.1f} ms   ratio {work_cold / work_base:5.2f}x  of parse+regenerate after import")


if __name__ == "__main__":
    main()
