"""How many one-entry removals from the built-in patches' `PARTS` their fast tests catch (issue
22.3): for each patch, each file and each entry of its `PARTS` there, the patch's own tests
(`tests/patches/test_<module>.py`, not slow) run in a fresh process on the patch with that one
entry left out; a removal is caught when a test fails.

    python -m testing.parts_coverage [ID ...]

prints one line per removal (`caught` or `MISSED`) and the count, and exits 1 when one is missed.
As a pytest plugin (`-p testing.parts_coverage`, with `PATCHKIT_DROP_PART=ID|FILE|ENTRY`) it
leaves that entry out of the loaded patch class before the tests run."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DROP = "PATCHKIT_DROP_PART"


def pytest_configure(config: object) -> None:
    """Plugin side: take the entry named in $PATCHKIT_DROP_PART out of its patch's PARTS."""
    drop = os.environ.get(DROP)
    if not drop:
        return
    pid, rel, entry = drop.split("|", 2)
    cls = next(cls for cls in _patch_classes() if cls.ID == pid)
    parts = cls.PARTS[rel]
    assert entry in parts, f"{pid}: {entry!r} is not in PARTS[{rel!r}]"
    cls.PARTS = {**cls.PARTS, rel: tuple(p for p in parts if p != entry)}


def _patch_classes() -> list:
    from patchkit.engine import registry

    return [cls for cls in registry.PatchSets().load_all() if cls.__module__.startswith("patchkit.patches.")]


def removals(ids: tuple[str, ...] = ()) -> list[tuple[str, str, str, Path]]:
    """(patch id, file, entry, the patch's test file) for every one-entry removal."""
    found = []
    for cls in _patch_classes():
        if ids and cls.ID not in ids:
            continue
        tests = ROOT / "tests" / "patches" / f"test_{cls.__module__.rsplit('.', 1)[-1]}.py"
        for rel, parts in sorted(cls.PARTS.items()):
            found.extend((cls.ID, rel, entry, tests) for entry in parts)
    return found


def caught(pid: str, rel: str, entry: str, tests: Path) -> bool:
    """Whether the patch's fast tests fail with `entry` left out of its PARTS for `rel`."""
    env = {**os.environ, DROP: f"{pid}|{rel}|{entry}"}
    run = subprocess.run(
        [sys.executable, "-m", "pytest", str(tests), "-m", "not slow", "-q", "-x", "-p", "no:randomly",
         "-p", "no:cacheprovider", "-p", "testing.parts_coverage"],
        cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if run.returncode not in (0, 1):
        raise RuntimeError(f"pytest exited {run.returncode} for {pid} {rel} {entry}:\n{run.stdout[-2000:]}")
    return run.returncode == 1


def main(argv: list[str]) -> int:
    todo = removals(tuple(argv))
    missed = 0
    for pid, rel, entry, tests in todo:
        hit = caught(pid, rel, entry, tests)
        missed += not hit
        print(f"{'caught' if hit else 'MISSED'}  {pid}  {rel}  {entry}", flush=True)
    print(f"{len(todo) - missed} of {len(todo)} one-entry removals from PARTS caught by the patches' fast tests")
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
