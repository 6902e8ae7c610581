"""The field's diffs (testing.field_diffs: 30 files of upstream's changes re-based onto
0.5.15.post1, named `v0.5.15.post1-sglang.patch`) through the commands a new user runs."""

from __future__ import annotations

import shlex

import pytest

from testing.checkout import wheel_home
from testing.cli import run
from testing.field_diffs import field_diff, take_the_patch_side

pytestmark = pytest.mark.integration

FIELD_ID = "v0-5-15-post1-sglang"


@pytest.fixture
def home(tmp_path, monkeypatch):
    monkeypatch.setenv("PATCHKIT_HOME", str(wheel_home(tmp_path / "home", ("0.5.15.post1", "0.5.13"))))


def test_a_diff_that_does_not_apply_names_its_units_in_status_and_apply(home, release, tmp_path):
    """issue 37: status and apply named 40 files under "cause: an upstream change"; the detail
    names each unit that does not apply (`file:Class.method` and why), text and --json, as rebase does."""
    field = field_diff("0.5.15.post1")
    path = field.write(tmp_path)
    site = release("0.5.13", extra=tuple(rel for rel in field.after))
    unit = ("sglang/srt/disaggregation/prefill.py:SchedulerDisaggregationPrefillMixin.process_prefill_chunk "
            "changed here and by the diff in the same lines")
    gone = ("sglang/srt/disaggregation/prefill.py:SchedulerDisaggregationPrefillMixin.maybe_send_cached_prefix_chunk "
            "not in the file (removed or renamed)")
    found = {p["id"]: p for p in run("--patches", path, "status", "--site-packages", site, "--json").json()["patches"]}
    row = found[FIELD_ID]
    assert row["state"] == "failed"
    # A file of the diff missing from the release no longer hides why the others fail.
    assert "sglang/srt/arg_groups/arg_utils.py is not in this release" in row["detail"]
    assert unit in row["detail"] and gone in row["detail"]
    text = run("--patches", path, "status", "--site-packages", site)
    assert unit in text.stdout and gone in text.stdout
    applied = run("--patches", path, "apply", "--only", FIELD_ID, "--site-packages", site)
    assert applied.exit_code == 1 and unit in applied.stderr + applied.stdout


@pytest.mark.slow
def test_on_a_fresh_home_the_post_release_base_is_named_fetched_and_shown(tmp_path, monkeypatch):
    """issue 29: with an empty PATCHKIT_HOME the diff made for 0.5.15.post1 was said to be made for
    "0.5.15 (21/27 files)": post releases were never fetched to name the base, nor shown by matrix."""
    monkeypatch.setenv("PATCHKIT_HOME", str(tmp_path / "home"))
    path = field_diff("0.5.15.post1").write(tmp_path)
    rebased = run("rebase", path, "--to", "0.5.16", "-o", tmp_path / "out.patch", "--json")
    assert rebased.exit_code == 0, rebased.stderr
    assert rebased.json()["from"] == ["0.5.15.post1 (30/30 files)"]
    table = run("--patches", path, "matrix", "--from", "0.5.15", "--to", "0.5.16", "--json").json()
    assert table["versions"] == ["0.5.15", "0.5.15.post1", "0.5.16"]
    row = next(r for r in table["patches"] if r["id"] == FIELD_ID)
    assert row["made_for"] == [{"version": "0.5.15.post1", "matched": 30, "total": 30}]


# Where git's 3-way merge is "clean" with other bytes than patchkit's: git writes a change the
# release already has a second time (the field's 0.5.12.post1 diff adds ResponseReasoningParam.summary
# and RESPONSE_TOOL_TYPES, which 0.5.16 and 0.5.17 hold beside changed lines: git's file has both
# twice); patchkit finds every unit upstream and leaves the release's bytes.
GIT_DUPLICATES = {("0.5.12.post1", "0.5.16"): {"sglang/srt/entrypoints/openai/protocol.py": b"RESPONSE_TOOL_TYPES = Literal["},
                  ("0.5.12.post1", "0.5.17"): {"sglang/srt/entrypoints/openai/protocol.py": b"RESPONSE_TOOL_TYPES = Literal["}}


# Where upstream moved the code a diff changes to another unit of the file, git's merge of the whole
# file follows it (issue 40 item 3): the unit of the release the change went to, per release.
MOVED_CODE_HOMES = {version: "DSATokenToKVPool._create_index_buffers" for version in ("0.5.16", "0.5.17")} | {
    version: "DSATokenToKVPool._init_kpool_compress_tail_buffers" for version in ("0.5.20", "0.5.21", "0.5.22", "0.5.23")}


@pytest.mark.slow
@pytest.mark.parametrize("post", ["0.5.15.post1", "0.5.12.post1", "moved-code"])
def test_never_worse_than_git_apply_3way(post):
    """Per file, on every release 0.5.10-0.5.23 and the post releases, on a repository made from the
    diff's base (its pre-image blobs) with the release's files committed on top: every file
    `git apply --3way` applies cleanly is clean for patchkit too (issue 29 item 6: 0 such files),
    with the same bytes but where git writes a change twice (GIT_DUPLICATES). On 0.5.20 the
    whole-file 3-way merge of xgrammar_backend.py and communication_op.py (git: conflicts) defines
    a function twice: refused. `moved-code` (testing.field_diffs.
    moved_code_diff): the change to `DSATokenToKVPool.__init__` is merged where upstream moved the
    code it changes, the unit named (MOVED_CODE_HOMES; it was a conflict of `__init__` on the six
    releases where git merges it)."""
    from patchkit.diffs import unidiff, unit_merge
    from patchkit.releases.pristine import WheelSource
    from testing.diffs import git_3way_files
    from testing.field_diffs import MEMORY_POOL, moved_code_diff, releases_after
    from testing.releases import HOME

    field = moved_code_diff() if post == "moved-code" else field_diff(post)
    diff = unidiff.parse(field.text, field.name)
    worse, other, homes = {}, {}, {}
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("PATCHKIT_HOME", str(HOME))
        for version in releases_after(field.base):
            source = WheelSource(version)
            resolution = unit_merge.resolve(diff, source.read, python_files=source.python_files,
                                           package_files=source.package_files)
            mine = {f.rel: f.after for f in resolution.files if f.how != unit_merge.ABSENT and not f.conflicts}
            theirs = git_3way_files(field.before, {rel: source.read(rel) for rel in field.after}, field.text, "python/")
            assert theirs or post == "moved-code", version
            if missing := sorted(rel for rel in theirs if rel not in mine):
                worse[version] = missing
            for rel in theirs:
                if rel in mine and mine[rel] != theirs[rel]:
                    other[(post, version)] = {**other.get((post, version), {}), rel: theirs[rel]}
                    assert mine[rel] == source.read(rel)  # patchkit: every unit upstream
            if post == "0.5.15.post1" and version == "0.5.20":
                # git conflicts in both; their whole-file merge, once taken, wrote a function the diff adds
                # and 0.5.20 has elsewhere a second time (`_allocate_token_bitmask`,
                # `tensor_model_parallel_fused_allreduce_rmsnorm_quant_per_group`): conflicts too.
                doubled = {"sglang/srt/constrained/xgrammar_backend.py", "sglang/srt/distributed/communication_op.py"}
                assert not doubled & set(mine) and not doubled & set(theirs)
                assert not any(u.detail.startswith("merged with the whole file") for f in resolution.files for u in f.units)
            (found,) = resolution.files if post == "moved-code" else (None,)
            if found is not None and MEMORY_POOL in {**theirs, **mine} and not found.conflicts and found.how == unit_merge.PER_UNIT:  # not 0.5.15's exact apply
                homes[version] = [u.unit for u in found.units if u.outcome == unit_merge.MERGED]
                assert f"moved: {MEMORY_POOL}:DSATokenToKVPool.__init__ -> {MEMORY_POOL}:{homes[version][0]}" in \
                    " ".join(found.notes)
    assert not worse, worse
    if post == "moved-code":
        assert homes == {version: [unit] for version, unit in MOVED_CODE_HOMES.items()}
    assert {key: set(files) for key, files in other.items()} == {
        key: set(files) for key, files in GIT_DUPLICATES.items() if key[0] == post}
    for key, files in other.items():
        for rel, data in files.items():
            assert data.count(GIT_DUPLICATES[key][rel]) == 2, (key, rel)


# Where bench/git_clean_sweep.py found files `git apply --3way` merges cleanly and patchkit's rebase
# conflicted (10 of 4,231 release x file cases): the 0.5.12.post1 field diff with files of any size
# (field_diff(limit=None): http_server.py, server_args.py), the sibling diff (testing.field_diffs.
# sibling_diff, on its lower diff's post-image), the second disjoint diff, and upstream's own changes
# of http_server.py (--upstream). `rebase` takes them with git's own merge (diffs/git_merge.py), reads
# the diff's lines back in the unit, or the import sections as one; `status` and `apply` (merge3
# alone, no subprocess) still call them conflicts. {(diff, release): {file: those units' outcome}}.
HTTP_SERVER = "sglang/srt/entrypoints/http_server.py"
BEYOND_MERGE3 = {("0.5.12.post1", version): {HTTP_SERVER: "upstream"}
                 for version in ("0.5.15", "0.5.15.post1")} | {
    ("sibling", version): {"sglang/srt/arg_groups/deepseek_v4_hook.py": "merged"}
    for version in ("0.5.12", "0.5.12.post1", "0.5.13", "0.5.14")} | {
    ("part2", "0.5.10"): {"sglang/srt/entrypoints/openai/utils.py": "merged"},
    ("upstream-http-0.5.14", "0.5.15"): {HTTP_SERVER: "upstream"},
    ("upstream-http-0.5.14", "0.5.15.post1"): {HTTP_SERVER: "upstream"},
    ("upstream-http-0.5.15", "0.5.13"): {HTTP_SERVER: "merged"}}


@pytest.mark.slow
@pytest.mark.parametrize("post", ["0.5.12.post1", "sibling", "part2", "upstream-http-0.5.14", "upstream-http-0.5.15"])
def test_rebase_is_never_worse_than_git_apply_3way_on_files_of_any_size(post):
    """Issue 40 item 3: per file, on every release 0.5.10-0.5.23 and the post releases, every file
    `git apply --3way` applies cleanly is clean for `rebase`, with git's bytes. Red before: the
    0.5.12.post1 diff's http_server.py (0.5.13 -> 0.5.14's change: `import uuid` added, the
    `threading._register_atexit` line removed) on 0.5.15 and 0.5.15.post1, which have the change:
    merge3's whole-file merge aligns the release's `Annotated[..., Body()]` arguments against the
    diff's and conflicts, git's leaves the file as it is (now upstream; upstream's own 0.5.13 ->
    0.5.14 change of the file the same), and upstream's 0.5.14 -> 0.5.15 change of it on 0.5.13,
    where a statement splits the imports in two units (both merges clean; the imports read back
    as one section now); the sibling diff's
    `apply_deepseek_v4_defaults` (0.5.16's DSPARK assert) on 0.5.12-0.5.14, where the unit alone
    merges with a conflict (merge3's and git's) and the file merges cleanly (0.5.14: git's only);
    the second of the disjoint diffs (testing.field_diffs.disjoint_diffs) on 0.5.10, whose
    entrypoints/openai/utils.py imports merge3 conflicts on and git merges. The 0.5.15.post1 field
    diff of any size has no such file (the sweep: 442 examined, 252 git-clean, 0)."""
    from patchkit.diffs import git_merge, rebase, unidiff, unit_merge
    from patchkit.releases.pristine import WheelSource
    from testing.diffs import git_3way_files, git_diff
    from testing.field_diffs import FieldDiff, disjoint_diffs, releases_after, sibling_diff
    from testing.releases import HOME, pristine

    if post.startswith("upstream-http-"):  # upstream's own change of http_server.py (the sweep's --upstream)
        new = post.rsplit("-", 1)[1]
        old = {"0.5.14": "0.5.13", "0.5.15": "0.5.14"}[new]
        before, after = ({HTTP_SERVER: (pristine(version) / HTTP_SERVER).read_bytes()} for version in (old, new))
        field = FieldDiff("http-server.patch", old, before, after, git_diff(before, after, prefix="python/"))
    else:
        field = sibling_diff("0.5.15.post1") if post == "sibling" else disjoint_diffs("0.5.15.post1")[1] \
            if post == "part2" else field_diff(post, limit=None)
    diff = unidiff.parse(field.text, field.name)
    worse, beyond = {}, {}
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("PATCHKIT_HOME", str(HOME))
        # The sibling's pre-image: its lower diff's post-image (read from the cached release now).
        base = rebase.stacked_base([unidiff.parse(field_diff("0.5.15.post1").text, "lower.patch")]) \
            if post == "sibling" else None
        for version in releases_after(field.base):
            source = WheelSource(version)
            theirs = git_3way_files(field.before, {rel: source.read(rel) for rel in field.after}, field.text, "python/")
            try:
                resolution = rebase.rebase(diff, field.text, version, source.read, base, python_files=source.python_files,
                                           package_files=source.package_files).resolution
            except rebase.AlreadyUpstream:  # nothing to write: what it resolved, every file upstream
                resolution = unit_merge.resolve(diff, source.read, markers=True, pre_image=base,
                                               python_files=source.python_files, package_files=source.package_files,
                                               merge_file=git_merge.merge_file)
                assert all(f.upstream for f in resolution.files), version
            mine = {f.rel: f for f in resolution.files}
            for rel, data in theirs.items():
                found = mine.get(rel)
                if found is None or found.how == unit_merge.ABSENT or found.conflicts:
                    worse.setdefault(version, []).append(rel)
                    continue
                assert found.after == data, (version, rel)  # git's bytes
                outcomes = {u.outcome for u in found.units if "(git merge-file)" in u.detail
                            or "the diff's lines written in" in u.detail or "the import sections read as one" in u.detail}
                if outcomes:
                    beyond.setdefault((post, version), {})[rel] = outcomes
            for rel in BEYOND_MERGE3.get((post, version), {}):
                # status and apply judge with merge3 alone: still a conflict there.
                alone = unit_merge.resolve(diff, source.read, pre_image=base, python_files=source.python_files,
                                          package_files=source.package_files)
                assert next(f for f in alone.files if f.rel == rel).conflicts, (version, rel)
    assert not worse, worse
    assert beyond == {key: {rel: {outcome} for rel, outcome in files.items()}
                      for key, files in BEYOND_MERGE3.items() if key[0] == post}


@pytest.mark.slow
def test_conflicts_are_resolved_in_a_tree_and_continue_writes_the_diff(tmp_path, monkeypatch, release):
    """issue 29: the blocks in a .patch span the release's lines as `+` lines and cannot be resolved
    by editing the diff; `rebase --tree DIR` writes V's files to resolve them as code, and
    `rebase --continue DIR` writes the finished diff (the input's prefix, V's index lines)."""
    from testing.checkout import checkout, git

    monkeypatch.setenv("PATCHKIT_HOME", str(wheel_home(tmp_path / "home", ("0.5.15.post1", "0.5.17"))))
    path = field_diff("0.5.15.post1").write(tmp_path)
    tree = tmp_path / "my tree"  # a space: each command said is pasteable as printed
    (tmp_path / "done").mkdir()
    out = tmp_path / "done" / path.name  # the id comes from the name
    made = run("rebase", path, "--to", "0.5.17", "--tree", tree, "--json")
    assert made.exit_code == 1, made.stderr
    report = made.json()
    assert report["conflicts"] and {c["file"] for c in report["conflicts"]} <= set(report["files"])
    refused = run("rebase", "--continue", tree, "-o", out)
    assert refused.exit_code == 1 and ": a conflict block is still there (<<<<<<< release)" in refused.stderr
    assert shlex.split(refused.stderr.split("`")[-2]) == ["patchkit", "rebase", "--continue", str(tree), "-o", str(out)]
    assert not (out).exists()
    for rel in report["files"]:
        (tree / rel).write_bytes(take_the_patch_side((tree / rel).read_bytes()))
    done, dropped = _continue(tree, out, "0.5.17")  # the patch side leaves names 0.5.17 lacks: refused, dropped
    assert done.exit_code == 0 and dropped, done.stderr
    text = (out).read_text()
    assert "\ndiff --git a/python/sglang/" in "\n" + text and "<<<<<<<" not in text
    site = release("0.5.17", extra=tuple(report["files"]))
    assert git(checkout(site, tmp_path / "repo"), "apply", "--check", out, check=False).returncode == 0
    found = {p["id"]: p for p in run("--patches", out, "status", "--site-packages", site,
                                     "--json").json()["patches"]}
    assert found[FIELD_ID]["state"] == "pending", found[FIELD_ID]
    # Usage: a used tree is not overwritten; --continue takes the tree alone.
    assert run("rebase", path, "--to", "0.5.17", "--tree", tree).exit_code == 2
    assert run("rebase", path, "--continue", tree).exit_code == 2


@pytest.mark.slow
def test_a_stack_is_seen_ordered_and_rebased_together(tmp_path, monkeypatch, release):
    """issue 29: two of the field's patches are stacked on a third (their pre-image blobs are its
    post-image blobs): they were ordered by id and nothing said so. `list` says it, and `rebase`
    of the set rebases the upper diff onto the rebased lower one: on 0.5.16 both apply, in order,
    and `list` still sees them stacked."""
    from testing.checkout import checkout, git
    from testing.field_diffs import stacked_diff

    # 0.5.17 cached too: the rebased lower's post-image of the upper's files is 0.5.17's files.
    monkeypatch.setenv("PATCHKIT_HOME", str(wheel_home(tmp_path / "home", ("0.5.15.post1", "0.5.16", "0.5.17"))))
    folder = tmp_path / "set"
    folder.mkdir()
    lower, upper = field_diff("0.5.15.post1").write(folder), stacked_diff("0.5.15.post1").write(folder)
    listed = {p["id"]: p for p in run("--patches", folder, "list", "--json").json()["patches"]}
    assert set(listed[FIELD_ID + "-extra"]["stacked_on"]) == {FIELD_ID}
    assert "stacked on " + FIELD_ID in run("--patches", folder, "list").stdout
    out = tmp_path / "out"
    out.mkdir()
    made = run("rebase", upper, lower, "--to", "0.5.16", "-o", out, "--json")
    assert made.exit_code == 0, made.stderr
    assert [row["id"] for row in made.json()["patches"]] == [FIELD_ID, FIELD_ID + "-extra"]  # the stack's order
    site = release("0.5.16", extra=tuple(field_diff("0.5.15.post1").after))
    repo = checkout(site, tmp_path / "repo")
    for name in (lower.name, upper.name):  # the rebased upper applies on top of the rebased lower
        applied = git(repo, "apply", out / name, check=False)
        assert applied.returncode == 0, (name, applied.stderr)
    # Rebased, still a stack (the files the rebased lower leaves out are 0.5.16's, the upper's pre-image
    # there): it read as made for 0.5.17 (4/4 files), with no stacked_on.
    listed = {p["id"]: p for p in run("--patches", out, "list", "--json").json()["patches"]}
    assert set(listed[FIELD_ID + "-extra"]["stacked_on"]) == {FIELD_ID}, listed[FIELD_ID + "-extra"]


@pytest.mark.slow
def test_a_cuh_whose_folder_moved_is_rebased_where_it_is_now(tmp_path, monkeypatch):
    """issue 29: a `.cuh` of sglang/jit_kernel/ edited on 0.5.16 was a whole-file conflict with no
    hint on 0.5.17, where the folder is sglang/kernels/jit/: it is followed by name and content."""
    from testing.checkout import checkout, git
    from testing.field_diffs import CUH_NEW, cuh_diff
    from testing.releases import pristine

    monkeypatch.setenv("PATCHKIT_HOME", str(wheel_home(tmp_path / "home", ("0.5.16", "0.5.17"))))
    path = cuh_diff().write(tmp_path)
    out = tmp_path / "out.patch"
    made = run("rebase", path, "--to", "0.5.17", "-o", out)
    assert made.exit_code == 0, made.stderr
    assert f"moved: {CUH_NEW} is where this release has" in made.stderr
    assert f"diff --git a/python/{CUH_NEW} b/python/{CUH_NEW}\n" in out.read_text()
    site = tmp_path / "site"
    (site / CUH_NEW).parent.mkdir(parents=True)
    (site / CUH_NEW).write_bytes((pristine("0.5.17") / CUH_NEW).read_bytes())
    repo = checkout(site, tmp_path / "repo")
    applied = git(repo, "apply", out, check=False)
    assert applied.returncode == 0, applied.stderr
    assert (repo / "python" / CUH_NEW).read_bytes() == (pristine("0.5.18") / CUH_NEW).read_bytes()


# A module the diff creates beside the .cuh's package in 0.5.16's folder (sglang/jit_kernel/), and
# where it goes on 0.5.17, where that package is sglang/kernels/jit/.
CREATED_OLD = "sglang/jit_kernel/fused_store_index_cache_ref.py"
CREATED_NEW = "sglang/kernels/jit/fused_store_index_cache_ref.py"


@pytest.mark.slow
def test_status_and_apply_follow_a_folder_that_moved(tmp_path, monkeypatch, release):
    """issue 29 item 8: status and apply read a file of the diff whose folder moved as missing
    (`failed`: rebase first). The .cuh of sglang/jit_kernel/ edited on 0.5.16 is judged, applied,
    verified and reverted at sglang/kernels/jit/ on 0.5.17 (0.5.18's bytes there), matrix says it
    applies; a module the diff creates in that package goes where the package went, and one in a
    folder no file of the diff says went anywhere is `failed`, naming the folder; rebase does the
    same (the second: a conflict block; it was a section creating the file where V has no folder)."""
    from testing.diffs import git_diff
    from testing.field_diffs import CUH_NEW, CUH_OLD, cuh_diff
    from testing.releases import pristine, snapshot

    monkeypatch.setenv("PATCHKIT_HOME", str(wheel_home(tmp_path / "home", ("0.5.16", "0.5.17"))))
    cuh = cuh_diff()
    module = b"def reference():\n    return None\n"
    path = tmp_path / "kernel.patch"
    path.write_bytes(git_diff({**cuh.before, CREATED_OLD: None}, {**cuh.after, CREATED_OLD: module}, prefix="python/"))
    site = release("0.5.17", extra=(CUH_NEW, "sglang/kernels/jit/__init__.py"))
    before = snapshot(site)
    found = {p["id"]: p for p in run("--patches", path, "status", "--site-packages", site, "--json").json()["patches"]}
    row = found["kernel"]
    assert row["state"] == "pending", row
    assert row["files"] == sorted([CUH_NEW, CREATED_NEW]), row
    assert f"moved: {CUH_NEW} is where this release has {CUH_OLD} (its folder moved)" in row["detail"]
    applied = run("--patches", path, "apply", "--only", "kernel", "--site-packages", site)
    assert applied.exit_code == 0, applied.stderr
    assert (site / CUH_NEW).read_bytes() == (pristine("0.5.18") / CUH_NEW).read_bytes()
    assert (site / CREATED_NEW).read_bytes() == module and not (site / "sglang/jit_kernel").exists()
    found = {p["id"]: p for p in run("--patches", path, "status", "--site-packages", site, "--json").json()["patches"]}
    assert found["kernel"]["state"] == "applied", found["kernel"]
    checks = {c["check"]: c for c in run("--patches", path, "verify", "--site-packages", site, "--json").json()["checks"]}
    assert checks[CUH_NEW] == {"check": CUH_NEW, "result": "ok", "detail": "recorded bytes"}, checks
    assert f"import {CUH_NEW.replace('/', '.')}" not in str(checks)  # a .cuh is not a module
    reverted = run("--patches", path, "revert", "--site-packages", site)
    assert reverted.exit_code == 0, reverted.stderr
    assert snapshot(site) == before
    table = run("--patches", path, "matrix", "--from", "0.5.16", "--to", "0.5.17", "--json").json()
    assert next(r for r in table["patches"] if r["id"] == "kernel")["states"] == {"0.5.16": "applies",
                                                                                    "0.5.17": "applies"}
    # A module created in a folder that is not in 0.5.17 and that no file of the diff went from.
    stray = tmp_path / "stray.patch"
    stray.write_bytes(git_diff({**cuh.before, "sglang/jit_kernel_extra/x.py": None},
                               {**cuh.after, "sglang/jit_kernel_extra/x.py": module}, prefix="python/"))
    found = {p["id"]: p for p in run("--patches", stray, "status", "--site-packages", site, "--json").json()["patches"]}
    assert found["stray"]["state"] == "failed"
    assert ("sglang/jit_kernel_extra/x.py: the diff creates it in sglang/jit_kernel_extra/, which is not in this "
            "release") in found["stray"]["detail"], found["stray"]
    # rebase the same way: the module follows its package, the stray one is a block naming its folder.
    made = run("rebase", path, "--to", "0.5.17", "-o", tmp_path / "kernel-0.5.17.patch")
    assert made.exit_code == 0, made.stderr
    sections = [line for line in (tmp_path / "kernel-0.5.17.patch").read_text().splitlines() if line.startswith("diff --git")]
    assert sections == [f"diff --git a/python/{rel} b/python/{rel}" for rel in (CUH_NEW, CREATED_NEW)]
    made = run("rebase", stray, "--to", "0.5.17", "-o", tmp_path / "stray-0.5.17.patch")
    assert made.exit_code == 1
    assert ("conflict: sglang/jit_kernel_extra/x.py:<file>: the diff creates it in sglang/jit_kernel_extra/, which "
            "is not in this release") in made.stderr
    assert "+<<<<<<< release: sglang/jit_kernel_extra/x.py" in (tmp_path / "stray-0.5.17.patch").read_text()


@pytest.mark.slow
def test_a_stack_is_rebased_into_trees_and_finished_in_order(tmp_path, monkeypatch, release):
    """issue 29: `rebase LOWER UPPER --to V --tree DIR` was refused ("--tree takes one PATCH"). Each
    diff of the stack gets DIR/NAME.tree; `--continue` of each, in stack order, writes the diffs: on
    0.5.16 the same bytes as `-o DIR` writes (the upper's pre-image is the lower's rebased file, kept in
    its record: diffed against 0.5.16's file it held the lower's change too, 163 changed lines for
    66), but for the files `--continue` refuses as breaking on 0.5.16, dropped; on 0.5.17, the lower's 12 blocks resolved, both git-apply in order; on 0.5.23 the upper one
    waits on the lower one, which conflicts in files they share."""
    from testing.checkout import checkout, git
    from testing.field_diffs import stacked_diff

    monkeypatch.setenv("PATCHKIT_HOME", str(wheel_home(tmp_path / "home", ("0.5.15.post1", "0.5.16", "0.5.17"))))
    folder = tmp_path / "set"
    folder.mkdir()
    lower, upper = field_diff("0.5.15.post1").write(folder), stacked_diff("0.5.15.post1").write(folder)
    plain = tmp_path / "plain"
    plain.mkdir()
    assert run("rebase", upper, lower, "--to", "0.5.16", "-o", plain).exit_code == 0
    trees = tmp_path / "trees-0.5.16"
    made = run("rebase", upper, lower, "--to", "0.5.16", "--tree", trees, "--json")
    assert made.exit_code == 0, made.stderr
    assert [row["tree"] for row in made.json()["patches"]] == [f"{lower.stem}.tree", f"{upper.stem}.tree"]
    done = tmp_path / "done-0.5.16"
    done.mkdir()
    for name in (lower.name, upper.name):
        # 5 of the lower's files back-port 0.5.17 imports 0.5.16 lacks: refused (as bump refuses them), dropped
        finished, dropped = _continue(trees / f"{name[:-len('.patch')]}.tree", done / name, "0.5.16")
        assert finished.exit_code == 0, finished.stderr
        if not dropped:
            assert (done / name).read_bytes() == (plain / name).read_bytes(), name
        else:
            assert _sections(done / name) == _sections(plain / name) - dropped, name
    trees = tmp_path / "trees-0.5.17"
    made = run("rebase", upper, lower, "--to", "0.5.17", "--tree", trees, "--json")
    assert made.exit_code == 1, made.stderr
    rows = {row["id"]: row for row in made.json()["patches"]}
    assert len(rows[FIELD_ID]["conflicts"]) == 12 and not rows[FIELD_ID + "-extra"]["conflicts"]
    for rel in rows[FIELD_ID]["files"]:
        path = trees / rows[FIELD_ID]["tree"] / rel
        path.write_bytes(take_the_patch_side(path.read_bytes()))
    done = tmp_path / "done-0.5.17"
    done.mkdir()
    for row in rows.values():
        name = f"{row['tree'][:-len('.tree')]}.patch"
        finished, _ = _continue(trees / row["tree"], done / name, "0.5.17")
        assert finished.exit_code == 0, finished.stderr
    site = release("0.5.17", extra=tuple({*rows[FIELD_ID]["files"], *rows[FIELD_ID + "-extra"]["files"]}))
    repo = checkout(site, tmp_path / "repo")
    for name in (lower.name, upper.name):
        applied = git(repo, "apply", done / name, check=False)
        assert applied.returncode == 0, (name, applied.stderr)
    # Usage: -o and --tree together, a folder that is not empty: exit 2, nothing written.
    assert run("rebase", upper, lower, "--to", "0.5.17", "--tree", trees, "-o", plain).exit_code == 2
    assert run("rebase", upper, lower, "--to", "0.5.17", "--tree", trees).exit_code == 2
    # On 0.5.23 the lower one conflicts in files the upper one changes: the upper gets no tree (made on
    # 0.5.23's files there it would drop the lower's change) and waits on it.
    monkeypatch.setenv("PATCHKIT_HOME", str(wheel_home(tmp_path / "home-0.5.23", ("0.5.15.post1", "0.5.23"))))
    trees = tmp_path / "trees-0.5.23"
    made = run("rebase", upper, lower, "--to", "0.5.23", "--tree", trees, "--json")
    assert made.exit_code == 1, made.stderr
    rows = {row["id"]: row for row in made.json()["patches"]}
    assert rows[FIELD_ID]["tree"] and rows[FIELD_ID]["conflicts"]
    assert rows[FIELD_ID + "-extra"]["tree"] is None and rows[FIELD_ID + "-extra"]["waits_on"] == [FIELD_ID]
    assert sorted(p.name for p in trees.iterdir()) == [rows[FIELD_ID]["tree"]]


@pytest.mark.slow
def test_a_module_the_release_lacks_is_not_created_empty(tmp_path, monkeypatch):
    """attack on issue 30, finding 3: on 0.5.23 the field diff's encode_grpc_server.py (moved to
    disaggregation/encoder/grpc_server.py there) is a tree file holding only a 'not in this release'
    block; deleted as the docs allow, `--continue` wrote `new file mode` with an empty blob, and apply
    created an empty module. Now it is not created, and the summary says so."""
    monkeypatch.setenv("PATCHKIT_HOME", str(wheel_home(tmp_path / "home", ("0.5.15.post1", "0.5.23"))))
    path = field_diff("0.5.15.post1").write(tmp_path)
    tree, out = tmp_path / "tree", tmp_path / "out.patch"
    made = run("rebase", path, "--to", "0.5.23", "--tree", tree, "--json")
    assert made.exit_code == 1, made.stderr
    absent = "sglang/srt/disaggregation/encode_grpc_server.py"
    assert b"is not in this release" in (tree / absent).read_bytes()
    for rel in made.json()["files"]:
        (tree / rel).write_bytes(take_the_patch_side((tree / rel).read_bytes()))
    assert not (tree / absent).read_bytes().strip()
    done, dropped = _continue(tree, out, "0.5.23", "--json")  # the patch side leaves names 0.5.23 lacks: dropped
    assert done.exit_code == 0, done.stderr
    assert absent not in dropped
    assert done.json()["not_created"] == [absent] and f"not created: {absent}" in done.stderr
    text = out.read_text()
    assert "encode_grpc_server.py" not in text and "\nindex 0000000..e69de29" not in text


@pytest.mark.slow
def test_matrix_renders_a_stacked_diff_on_the_diff_under_it(tmp_path, monkeypatch):
    """attack on issue 30, finding 6: `matrix` judged the diff stacked on the field diff alone,
    `broken` on 0.5.15.post1 and 0.5.16, where `status` and `apply` stack it on the field diff and
    it applies (docs/diffs.md: status, apply and matrix render that stack)."""
    from testing.field_diffs import stacked_diff

    monkeypatch.setenv("PATCHKIT_HOME", str(wheel_home(tmp_path / "home", ("0.5.15", "0.5.15.post1", "0.5.16"))))
    folder = tmp_path / "patches"
    folder.mkdir()
    field_diff("0.5.15.post1").write(folder)
    stacked_diff("0.5.15.post1").write(folder)
    made = run("--patches", folder, "matrix", "--from", "0.5.15", "--to", "0.5.16", "--json")
    assert made.exit_code == 0, made.stderr
    states = {row["id"]: row["states"] for row in made.json()["patches"]}
    assert states[FIELD_ID] == {"0.5.15": "applies", "0.5.15.post1": "applies", "0.5.16": "applies"}
    assert states[FIELD_ID + "-extra"] == states[FIELD_ID]
    rows = {row["id"]: row for row in made.json()["patches"]}
    assert rows[FIELD_ID + "-extra"]["stacked_on"] == [FIELD_ID] and rows[FIELD_ID]["stacked_on"] == []
    text = run("--patches", folder, "matrix", "--from", "0.5.15", "--to", "0.5.16").stdout
    assert f"\n{FIELD_ID}-extra: stacked on {FIELD_ID} (" in text and "broken" not in text


def _continue(tree, out, version: str, *options: str):
    """`rebase --continue TREE -o OUT [OPTIONS]`, a refusal of a resolution that breaks on V answered
    as a maintainer would (as bump's tests answer `breaks on V`): the change to each file it names
    dropped (the tree's base of it: V's file, or the lower diff's as the record keeps it; emptied
    where V has none), then again. The last result, and the files dropped."""
    import base64
    import json
    import re

    from testing.releases import pristine

    dropped: set[str] = set()
    for _ in range(5):
        done = run("rebase", "--continue", tree, "-o", out, *options)  # (--json: the refusal is on stdout)
        named = set(re.findall(r"(sglang/[^\s:]+\.py):\d+: (?:breaks on|does not compile)", done.stderr + done.stdout))
        if done.exit_code != 1 or not named:
            return done, dropped
        base = json.loads((tree / ".patchkit-rebase.json").read_text()).get("base", {})
        for rel in named:
            own = pristine(version) / rel
            (tree / rel).write_bytes(base64.b64decode(base[rel]) if rel in base else
                                     own.read_bytes() if own.is_file() else b"")
        dropped |= named
    return done, dropped


def _sections(path) -> set[str]:
    from patchkit.diffs import unidiff

    return {f.path for f in unidiff.parse(path.read_bytes(), path.name).files}
