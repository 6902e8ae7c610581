"""Issue 40 item 3's sweep: every file where `git apply --3way` merges cleanly and patchkit calls a
conflict, over the field's diffs (testing.field_diffs, built from real releases) on every release
the tests rebase them onto (0.5.10-0.5.23 and the post releases).

Usage: PATCHKIT_TEST_CACHE=... python bench/git_clean_sweep.py [--only LABEL,...] [--upstream]

Per diff and release: git per file on a repository of the diff's pre-images with the release's
files committed on top (testing.diffs.git_3way_files, as the never-worse test does); patchkit's
`unit_merge.resolve` with the release's package (files followed where they moved), a stacked diff's
pre-image its lower diff's post-image (as `rebase` of the stack takes it), as `rebase` resolves it
(conflict markers, git's whole-file merge where merge3's conflicts; `--merge3-only`: without it, as
`status` and `apply` judge). Printed: per diff the
files examined (release x file, file present in the diff), git-clean, patchkit-clean, and each
git-clean patchkit-conflict case with the units patchkit names, each file clean in both with other
bytes, and each file rebase resolves only by git's merge or by the diff's lines read back in a unit
("beyond merge3"); a last line sums them.

The diffs: the two field diffs (0.5.15.post1, 0.5.12.post1) as the tests build them (files under
80 kB) and with no size limit, the diff stacked on each and the sibling beside it, the four
disjoint parts, the `.cuh` diff and the moved-code diff. `--upstream`: also upstream's own change
of hiradix_cache.py, http_server.py and memory_pool.py between each two releases in a row, the
files issue 40 item 3 names. Not a timed test: it takes minutes (git per file, per release).
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path
from typing import Callable

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from patchkit.diffs import git_merge, rebase, unidiff, unit_merge  # noqa: E402
from testing.diffs import git_3way_files, git_diff  # noqa: E402
from testing.releases import HOME, pristine  # noqa: E402

NAMED = ("sglang/srt/mem_cache/hiradix_cache.py", "sglang/srt/entrypoints/http_server.py",
         "sglang/srt/mem_cache/memory_pool.py")
# (label, a function giving (pre-images, post-images, the diff, the pre-image finder or None)), built when swept.
Made = tuple[dict[str, bytes], dict[str, bytes], bytes, "Callable[[FileDiff], bytes | None] | None"]
Case = tuple[str, Callable[[], Made]]


def field_cases() -> list[Case]:
    from testing import field_diffs as fd

    def plain(made: Callable[[], fd.FieldDiff]) -> Callable[[], Made]:
        return lambda: (made().before, made().after, made().text, None)

    def stacked(post: str, made: Callable[[], fd.FieldDiff]) -> Callable[[], Made]:
        lower = unidiff.parse(fd.field_diff(post).text, "lower.patch")
        return lambda: (made().before, made().after, made().text, rebase.stacked_base([lower]))

    cases: list[Case] = []
    for post in fd.NEXT:
        cases.append((f"field {post}", plain(lambda post=post: fd.field_diff(post))))
        cases.append((f"field {post} (no size limit)", plain(lambda post=post: fd.field_diff(post, limit=None))))
    for post in fd.NEXT:
        cases.append((f"stacked {post}", lambda post=post: stacked(post, lambda: fd.stacked_diff(post))()))
        cases.append((f"sibling {post}", lambda post=post: stacked(post, lambda: fd.sibling_diff(post))()))
    for part in range(4):
        cases.append((f"disjoint part{part + 1}", plain(lambda part=part: fd.disjoint_diffs("0.5.15.post1")[part])))
    cases.append(("cuh", plain(fd.cuh_diff)))
    cases.append(("moved-code", plain(fd.moved_code_diff)))
    return cases


def upstream_cases() -> list[Case]:
    from testing.field_diffs import releases_after

    finals = [v for v in releases_after("0.5.15.post1") if "post" not in v]
    cases: list[Case] = []
    for old, new in zip(finals, finals[1:]):
        for rel in NAMED:
            a, b = pristine(old) / rel, pristine(new) / rel
            if a.is_file() and b.is_file() and a.read_bytes() != b.read_bytes():
                before, after = {rel: a.read_bytes()}, {rel: b.read_bytes()}
                cases.append((f"upstream {old}->{new} {rel.rsplit('/', 1)[1]}",
                              lambda before=before, after=after: (before, after,
                                                                  git_diff(before, after, prefix="python/"), None)))
    return cases


def beyond_merge3(detail: str) -> bool:
    """A unit rebase resolved only with git's merge or by reading the diff's lines back."""
    return any(said in detail for said in ("(git merge-file)", "the diff's lines written in",
                                           "the import sections read as one"))


def sweep(cases: list[Case], versions: list[str], merge_file: unit_merge.MergeFile | None = git_merge.merge_file
          ) -> list[tuple[str, str, str, list[str]]]:
    from patchkit.releases.pristine import WheelSource

    found: list[tuple[str, str, str, list[str]]] = []
    totals = [0, 0, 0]
    for label, make in cases:
        start = time.perf_counter()
        before, after, text, pre_image = make()
        diff = unidiff.parse(text, "sweep.patch")
        examined = git_clean = pk_clean = 0
        worse: list[tuple[str, str, list[str]]] = []
        other: list[str] = []  # clean in both, other bytes
        by_git: list[str] = []  # clean for rebase by git's whole-file merge or the diff's lines read back
        for version in versions:
            source = WheelSource(version)
            target = {rel: source.read(rel) for rel in after}
            resolution = unit_merge.resolve(diff, source.read, markers=True, pre_image=pre_image,
                                           python_files=source.python_files, package_files=source.package_files,
                                           merge_file=merge_file)
            mine = {f.rel: f for f in resolution.files}
            theirs = git_3way_files(before, target, text, "python/")
            examined += sum(1 for data in target.values() if data is not None)
            git_clean += len(theirs)
            pk_clean += sum(1 for f in resolution.files if f.rel in after and f.how != unit_merge.ABSENT
                            and not f.conflicts)
            for rel in sorted(theirs):
                f = mine.get(rel)
                if f is None or f.how == unit_merge.ABSENT or f.conflicts:
                    units = [u.unit for u in f.conflicts] if f is not None else ["<absent>"]
                    worse.append((version, rel, units))
                elif f.after != theirs[rel]:
                    other.append(f"{version} {rel}")
                if f is not None and any(beyond_merge3(u.detail) for u in f.units):
                    by_git.append(f"{version} {rel}: " + ", ".join(
                        f"{u.unit} {u.outcome} ({u.detail})" for u in f.units if beyond_merge3(u.detail)))
        totals[0] += examined
        totals[1] += git_clean
        totals[2] += len(worse)
        print(f"{label}: {len(after)} file(s) x {len(versions)} releases: {examined} examined, {git_clean} git-clean, "
              f"{pk_clean} patchkit-clean, {len(worse)} git-clean and patchkit-conflict "
              f"; {len(other)} clean in both with other bytes, {len(by_git)} beyond merge3 "
              f"({time.perf_counter() - start:.0f} s)", flush=True)
        for version, rel, units in worse:
            print(f"    git clean, patchkit conflict: {version} {rel}: {', '.join(units)}", flush=True)
            found.append((label, version, rel, units))
        for line in other:
            print(f"    both clean, other bytes: {line}", flush=True)
        for line in by_git:
            print(f"    beyond merge3: {line}", flush=True)
    print(f"total: {totals[0]} release x file cases examined, {totals[1]} git-clean, {totals[2]} git-clean and "
          "patchkit-conflict")
    return found


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--only", help="comma-separated labels (or their beginnings) of the diffs to sweep")
    parser.add_argument("--upstream", action="store_true", help="also upstream's changes of the files item 3 names")
    parser.add_argument("--merge3-only", action="store_true",
                        help="the whole-file merge without git's (as status and apply judge a diff)")
    args = parser.parse_args()
    os.environ["PATCHKIT_HOME"] = str(HOME)
    from testing.field_diffs import releases_after

    cases = field_cases() + (upstream_cases() if args.upstream else [])
    if args.only:
        cases = [c for c in cases if any(c[0].startswith(want) for want in args.only.split(","))]
    sweep(cases, releases_after("0.5.15.post1"), None if args.merge3_only else git_merge.merge_file)


if __name__ == "__main__":
    main()
