"""Per release, what patchkit's per-unit resolution makes of a real multi-file diff, beside what
`git apply --check` and `git apply --3way` make of the same diff on the same trees.

Usage: PATCHKIT_TEST_CACHE=... python bench/diff_outcomes.py [--base 0.5.16] [--head 0.5.17]
       [--files 40] [--from 0.5.10] [--to 0.5.23] [--offloader]

The diff is made by real git from the real difference between two releases (`--base` -> `--head`:
the first N files under sglang/srt/ that changed, as bench/diffs.py makes it), made against
`--base` (`--paths A,B,...`: those files); `--offloader` uses upstream's own change to sglang/srt/utils/offloader.py from 0.5.20 to
0.5.21 instead. For each target release:
  - patchkit: per file how it went (exact = as git apply, already applied, per unit, absent) and
    per unit transplanted / merged / moved / upstream / conflict (unit_merge.resolve, the pre-image
    found by its blob hash among the test cache's wheels); whether the result compiles;
  - git apply --check on a repository holding the release's files: files refused;
  - git apply --3way on a repository made from the base release's files (so git has the
    pre-image blobs) with the target release's files committed on top: files applied cleanly,
    with conflicts, or refused.
With `--field POST` (0.5.15.post1, 0.5.12.post1) the diff is the field's (testing.field_diffs:
30 files of upstream's changes re-based onto that post release, named `vPOST-sglang.patch`;
`--stacked`: the diff stacked on it, `--cuh`: the .cuh of sglang/jit_kernel/), the post releases
are rows too, and per file patchkit and `git apply --3way` are compared: files each leaves clean
(patchkit: written or already there, no conflict; git: "Applied patch ... cleanly"), files clean in
both with identical bytes (a file clean in both with other bytes is named), and files git merges
cleanly that patchkit calls a conflict (named).
Prints one table; the numbers are reproducible from the releases alone.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.diffs import changed_files  # noqa: E402
from patchkit.diffs import release_blobs, unidiff, unit_merge  # noqa: E402
from patchkit.engine import upstream  # noqa: E402
from testing.diffs import git, git_3way_files, git_diff, repo_of, write_files  # noqa: E402
from testing.releases import HOME, pristine  # noqa: E402

OFFLOADER = "sglang/srt/utils/offloader.py"


def git_check(files: dict[str, bytes | None], diff: bytes) -> int:
    """How many files `git apply --check` refuses (it names each)."""
    with tempfile.TemporaryDirectory() as tmp:
        repo = repo_of(Path(tmp), {rel: data for rel, data in files.items() if data is not None})
        done = git(repo, "apply", "--check", "-", input=diff, check=False)
        err = done.stderr.decode("utf-8", "replace")
        return len(set(re.findall(r"^error: (?:patch failed: )?([^:\n]+)(?::\d+)?(?:: .*)?$", err, re.M)) - {"corrupt patch at line"})


def git_3way(base: dict[str, bytes | None], files: dict[str, bytes | None], diff: bytes) -> tuple[int, int, int]:
    """(clean, with conflicts, refused) files of `git apply --3way` on the target files, in a
    repository that also holds the base release's files (the pre-image blobs)."""
    with tempfile.TemporaryDirectory() as tmp:
        repo = repo_of(Path(tmp), {rel: data for rel, data in base.items() if data is not None})
        write_files(repo, files)
        git(repo, "add", "-A")
        git(repo, "commit", "-q", "--allow-empty", "-m", "target")
        done = git(repo, "apply", "--3way", "-", input=diff, check=False)
        err = done.stderr.decode("utf-8", "replace")
        clean = len(re.findall(r"^Applied patch to '.*' cleanly\.$", err, re.M))
        conflicts = len(re.findall(r"^Applied patch to '.*' with conflicts\.$", err, re.M))
        touched = len(diff_files(diff))
        return clean, conflicts, touched - clean - conflicts


def diff_files(diff: bytes) -> list[str]:
    return [f.path for f in unidiff.parse(diff, "x.patch").files]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--base", default="0.5.16")
    parser.add_argument("--head", default="0.5.17")
    parser.add_argument("--files", type=int, default=40)
    parser.add_argument("--from", dest="first", default="0.5.10")
    parser.add_argument("--to", dest="last", default="0.5.23")
    parser.add_argument("--offloader", action="store_true")
    parser.add_argument("--paths", help="comma-separated files of the package to take instead of the first --files")
    parser.add_argument("--field", metavar="POST", help="the field's diff re-based onto this post release")
    parser.add_argument("--stacked", action="store_true", help="with --field: the diff stacked on it")
    parser.add_argument("--cuh", action="store_true", help="the .cuh kernel source of sglang/jit_kernel/ (0.5.16)")
    args = parser.parse_args()
    if args.field or args.cuh:
        os.environ["PATCHKIT_HOME"] = str(HOME)
        return field_table(args)
    os.environ["PATCHKIT_HOME"] = str(HOME)  # the pre-images are looked up among the test cache's wheels
    base, head = ("0.5.20", "0.5.21") if args.offloader else (args.base, args.head)
    files = [OFFLOADER] if args.offloader else args.paths.split(",") if args.paths else changed_files(base, head, args.files)
    text = git_diff({rel: (pristine(base) / rel).read_bytes() for rel in files},
                    {rel: (pristine(head) / rel).read_bytes() for rel in files})
    diff = unidiff.parse(text, "outcomes.patch")
    base_files = {rel: (pristine(base) / rel).read_bytes() for rel in files}
    units_changed = sum(len(unit_merge._changed_units(f.path, base_files[f.path], unit_merge.apply_hunks(base_files[f.path], f.hunks)
                                                     or b"", "x")) for f in diff.files)
    print(f"diff: {len(files)} file(s) of {base} -> {head} made against {base}, {text.count(b'@@ -')} hunks, "
          f"{units_changed} units changed; made for {', '.join(str(m) for m in release_blobs.made_for(diff))}")
    head_line = (f"{'release':<8} {'patchkit':<15} {'exact':>5} {'appl.':>5} {'unit':>5} {'abs.':>4} | "
                 f"{'transp':>6} {'merged':>6} {'moved':>5} {'upstr':>5} {'confl':>5} {'files ok':>8} | "
                 f"{'--check refused':>15} | {'--3way clean/confl/refused':>26}")
    print(head_line)
    print("-" * len(head_line))
    for version in upstream.versions_between(args.first, args.last):
        root = pristine(version)
        target = {rel: (root / rel).read_bytes() if (root / rel).is_file() else None for rel in files}
        resolution = unit_merge.resolve(diff, lambda rel: target.get(rel))
        hows = [f.how for f in resolution.files]
        counts = resolution.counts()
        ok = 0
        for f in resolution.files:
            if f.after is not None and not f.conflicts:
                try:
                    compile(f.after, f.rel, "exec", dont_inherit=True)
                    ok += 1
                except SyntaxError:
                    pass
        absent = hows.count(unit_merge.ABSENT)
        verdict = ("upstream-fixed" if all(f.upstream for f in resolution.files) else
                   "failed" if resolution.conflicts or absent or ok < len(files) else "pending")
        refused = git_check(target, text)
        clean, conflicted, refused3 = git_3way(base_files, target, text)
        print(f"{version:<8} {verdict:<15} {hows.count(unit_merge.EXACT):>5} {hows.count(unit_merge.REVERSED):>5} "
              f"{hows.count(unit_merge.PER_UNIT):>5} {absent:>4} | {counts['transplanted']:>6} {counts['merged']:>6} "
              f"{counts['moved']:>5} {counts['upstream']:>5} {counts['conflict']:>5} {ok:>4}/{len(files):<3} | "
              f"{refused:>8}/{len(files):<6} | {clean:>12}/{conflicted}/{refused3}", flush=True)


def field_table(args: argparse.Namespace) -> None:
    from testing.field_diffs import cuh_diff, field_diff, releases_after, stacked_diff
    from patchkit.releases.pristine import WheelSource

    field = cuh_diff() if args.cuh else stacked_diff(args.field) if args.stacked else field_diff(args.field)
    diff = unidiff.parse(field.text, field.name)
    files = [f.path for f in diff.files]
    print(f"{field.name}: {len(files)} file(s), {field.text.count(b'@@ -')} hunks, made for "
          f"{', '.join(str(m) for m in release_blobs.made_for(diff)) or 'no release (stacked)'}")
    head_line = (f"{'release':<13} {'pk clean':>8} {'git clean':>9} {'both, same bytes':>16} {'git clean, pk confl.':>20} | "
                 f"{'transp':>6} {'merged':>6} {'moved':>5} {'upstr':>5} {'confl':>5}")
    print(head_line)
    print("-" * len(head_line))
    for version in releases_after(args.field or "0.5.15.post1"):
        source = WheelSource(version)
        target = {rel: source.read(rel) for rel in files}
        resolution = unit_merge.resolve(diff, source.read, python_files=source.python_files)
        mine = {f.rel: f.after for f in resolution.files if f.rel in target and f.how != unit_merge.ABSENT
                and not f.conflicts}
        theirs = git_3way_files(field.before, target, field.text, "python/")
        same = sum(1 for rel, data in theirs.items() if rel in mine and mine[rel] == data)
        worse = sorted(rel for rel in theirs if rel not in mine)
        other = sorted(rel for rel, data in theirs.items() if rel in mine and mine[rel] != data)
        counts = resolution.counts()
        said = [f"git clean, patchkit conflict: {', '.join(worse)}"] if worse else []
        said += [f"both clean, other bytes: {', '.join(other)}"] if other else []
        print(f"{version:<13} {len(mine):>4}/{len(files):<3} {len(theirs):>5}/{len(files):<3} {same:>16} "
              f"{len(worse):>20} | {counts['transplanted']:>6} {counts['merged']:>6} {counts['moved']:>5} "
              f"{counts['upstream']:>5} {counts['conflict']:>5}" + (f"  ({'; '.join(said)})" if said else ""),
              flush=True)


if __name__ == "__main__":
    main()
