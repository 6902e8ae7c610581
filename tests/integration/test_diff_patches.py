"""Diff patches on real releases: diffs made by real git from real upstream code (never a
committed third-party file), applied, judged and reverted by the same engine as the built-in
patches, and held to what real `git apply` writes."""

from __future__ import annotations

import pytest

from testing.cli import run
from testing.diffs import fails_only_beside_the_built_in, git_apply, git_diff
from testing.releases import pristine, snapshot

pytestmark = pytest.mark.integration

OFFLOADER = "sglang/srt/utils/offloader.py"
ID = "offloader-tied"


def offloader_diff(header: str = "") -> bytes:
    """Upstream's own change to offloader.py from 0.5.20 to 0.5.21 (the tied-parameters fix), made against 0.5.20."""
    return git_diff({OFFLOADER: (pristine("0.5.20") / OFFLOADER).read_bytes()},
                    {OFFLOADER: (pristine("0.5.21") / OFFLOADER).read_bytes()}, header=header)


@pytest.fixture
def offloader_patch(tmp_path):
    path = tmp_path / "patches" / f"0001-{ID}.patch"
    path.parent.mkdir()
    path.write_bytes(offloader_diff("Subject: [PATCH] Offloader: keep tied parameters\n\nPatchkit-Upstream: sglang 0.5.21\n---\n"))
    return path


def test_on_the_release_it_was_made_for_apply_writes_what_git_apply_writes(release, offloader_patch):
    site = release("0.5.20", extra=(OFFLOADER,))
    before = (site / OFFLOADER).read_bytes()
    code, expected, err = git_apply({OFFLOADER: before}, offloader_patch.read_bytes())
    assert code == 0, err
    untouched = {k: v for k, v in snapshot(site).items() if k != OFFLOADER}
    listed = run("--patches", offloader_patch, "list", "--json").json()["patches"]
    row = next(p for p in listed if p["id"] == ID)
    assert row["title"] == "Offloader: keep tied parameters" and row["targets"] == [OFFLOADER]
    assert row["origin"] == f"file {offloader_patch}"
    listed = {p["id"]: p for p in run("--patches", offloader_patch, "status", "--site-packages", site,
                                       "--json").json()["patches"]}
    assert fails_only_beside_the_built_in(listed[ID]), listed[ID]  # pending alone: --only applies it
    result = run("--patches", offloader_patch, "apply", "--site-packages", site, "--only", ID)
    assert result.exit_code == 0, result.stderr
    assert (site / OFFLOADER).read_bytes() == expected[OFFLOADER] == (pristine("0.5.21") / OFFLOADER).read_bytes()
    assert {k: v for k, v in snapshot(site).items() if k != OFFLOADER and not k.startswith(".patchkit")} == untouched
    listed_states = {p["id"]: p["state"] for p in run("--patches", offloader_patch, "status", "--site-packages", site,
                                                       "--json").json()["patches"]}
    assert listed_states[ID] == "applied"
    # The diff file changed: the tree was patched by an older version of it.
    offloader_patch.write_bytes(offloader_patch.read_bytes() + b"-- \n2.39.5\n")
    listed_states = {p["id"]: p["state"] for p in run("--patches", offloader_patch, "status", "--site-packages", site,
                                                       "--json").json()["patches"]}
    assert listed_states[ID] == "outdated"
    result = run("--patches", offloader_patch, "revert", "--site-packages", site)
    assert result.exit_code == 0, result.stderr
    assert (site / OFFLOADER).read_bytes() == before
    assert not (site / ".patchkit").exists() or not any((site / ".patchkit").iterdir())


def test_a_folder_of_diffs_loads_beside_modules_and_a_bad_id_exits_2(tmp_path, release):
    folder = tmp_path / "set"
    folder.mkdir()
    (folder / "fixA.patch").write_bytes(offloader_diff())  # the name gives the id `fixa`
    (folder / "other.patch").write_bytes(b"Patchkit-Id: Bad_Id\n" + offloader_diff())
    site = release("0.5.20", extra=(OFFLOADER,))
    result = run("--patches", folder, "status", "--site-packages", site, "--json")
    assert "fixa" in {p["id"] for p in result.json()["patches"]}
    # The diff whose header id breaks the rule is left out, named at the end, and the run is exit 2.
    assert result.exit_code == 2
    assert "other.patch: 'Bad_Id' is not a valid patch id" in result.stderr and "left out" in result.stderr
    (folder / "other.patch").unlink()
    (folder / "fixA.patch").rename(folder / "0003-fix-a.diff")
    listed = run("--patches", folder, "list", "--json").json()["patches"]
    assert "fix-a" in {p["id"] for p in listed}
    assert run("--patches", folder / "nope.py", "list").exit_code == 2


def offloader_fix_only() -> bytes:
    """0.5.21's offloader.py without the other change that release made to it (dp_rank and dp_size
    read from get_parallel() instead of passed in): upstream's tied-parameters fix alone."""
    fixed = (pristine("0.5.21") / OFFLOADER).read_bytes()
    for new, old in (
        (b"def create_offloader():", b"def create_offloader(dp_rank: int):"),
        (b"            mode=get_exec().offload.offload_mode,\n        )",
         b"            mode=get_exec().offload.offload_mode,\n            dp_rank=dp_rank,\n"
         b"            dp_size=get_parallel().dp_size,\n        )"),
        (b"        mode: str,\n    ):\n        parallel = get_parallel()\n        dp_rank, dp_size = parallel.dp_rank, parallel.dp_size\n",
         b"        mode: str,\n        dp_rank: int,\n        dp_size: int,\n    ):\n"),
    ):
        assert fixed.count(new) == 1
        fixed = fixed.replace(new, old)
    return fixed


@pytest.fixture
def cached_wheels(patchkit_home):
    """The test cache's wheels as this test's wheel cache: the diff's pre-image is found there by its blob hash."""
    from testing.releases import HOME

    (patchkit_home / "wheels").symlink_to(HOME / "wheels")


def states_with(patch, site) -> dict[str, dict]:
    result = run("--patches", patch, "status", "--site-packages", site, "--json")
    assert result.exit_code == 0, result.stderr
    return {p["id"]: p for p in result.json()["patches"]}


# Upstream's whole 0.5.20 -> 0.5.21 change on each release (seen, with git apply --check beside it):
# 0.5.14-0.5.18 name the function create_offloader_from_server_args (0.5.19 renamed it): the diff's
# change of create_offloader has no unit to go to; 0.5.22 and 0.5.23 changed OffloaderV2.__init__
# (and 0.5.23 _get_resident_parameter_ids) in the diff's lines.
WHOLE_CHANGE = {
    **{f"0.5.{v}": ("failed", "create_offloader") for v in range(14, 19)},
    # 0.5.19, 0.5.20: it applies alone, not on top of the built-in fixing the same code there.
    "0.5.19": ("failed", "beside"), "0.5.20": ("failed", "beside"), "0.5.21": ("upstream-fixed", ""),
    "0.5.22": ("failed", "OffloaderV2.__init__"), "0.5.23": ("failed", "OffloaderV2.__init__"),
}


def test_upstreams_whole_change_per_release(tmp_path, release, offloader_patch, cached_wheels):
    for version, (state, unit) in WHOLE_CHANGE.items():
        site = release(version, extra=(OFFLOADER,))
        found = states_with(offloader_patch, site)[ID]
        assert found["state"] == state, (version, found)
        if unit == "beside":
            assert fails_only_beside_the_built_in(found), (version, found)
        elif unit:
            assert f"{OFFLOADER}:{unit} " in found["detail"], (version, found)
        code, _, _ = git_apply({OFFLOADER: (site / OFFLOADER).read_bytes()}, offloader_patch.read_bytes(), "--check")
        assert (code == 0) == (version in ("0.5.19", "0.5.20")), version


def test_the_fix_alone_backports_per_unit_and_reverts_byte_exact(tmp_path, release, cached_wheels):
    patch = tmp_path / "offloader-fix.patch"
    patch.write_bytes(git_diff({OFFLOADER: (pristine("0.5.20") / OFFLOADER).read_bytes()}, {OFFLOADER: offloader_fix_only()}))
    for version in ("0.5.14", "0.5.17", "0.5.19", "0.5.21", "0.5.23"):
        site = release(version, extra=(OFFLOADER,))
        before = snapshot(site)
        found = states_with(patch, site)["offloader-fix"]
        if version == "0.5.21":
            assert found["state"] == "upstream-fixed", found
            continue
        if version == "0.5.23":  # upstream rewrote _get_resident_parameter_ids after adding it
            assert found["state"] == "failed" and f"{OFFLOADER}:_get_resident_parameter_ids" in found["detail"], found
            continue
        # cpu-offload-tied-params fixes the same code on these releases: pending alone (--only)
        assert fails_only_beside_the_built_in(found), (version, found)
        result = run("--patches", patch, "apply", "--site-packages", site, "--only", "offloader-fix")
        assert result.exit_code == 0, (version, result.stderr)
        patched = (site / OFFLOADER).read_bytes()
        compile(patched, OFFLOADER, "exec")
        assert b"def _get_resident_parameter_ids(module: torch.nn.Module):" in patched
        assert states_with(patch, site)["offloader-fix"]["state"] == "applied"
        assert run("--patches", patch, "revert", "--site-packages", site).exit_code == 0
        assert snapshot(site) == before, version


# Real changes 0.5.16 -> 0.5.17 of three files, as a diff made against 0.5.16, taken back to 0.5.15
# (where `git apply --check` refuses every one of them: upstream changed lines around them).
MULTI = ("sglang/srt/mem_cache/allocator/swa.py", "sglang/srt/layers/moe/moe_runner/runner.py",
         "sglang/srt/speculative/spec_info.py")


def test_a_multi_file_diff_of_real_functions_goes_back_a_release_per_unit(tmp_path, release, cached_wheels):
    from patchkit.diffs import unidiff, unit_merge

    text = git_diff({rel: (pristine("0.5.16") / rel).read_bytes() for rel in MULTI},
                    {rel: (pristine("0.5.17") / rel).read_bytes() for rel in MULTI}, prefix="python/")
    patch = tmp_path / "multi.patch"
    patch.write_bytes(text)
    site = release("0.5.15", extra=MULTI)
    old = {rel: (site / rel).read_bytes() for rel in MULTI}
    for rel in MULTI:
        code, _, _ = git_apply({rel: old[rel]}, text.replace(b"python/", b""), "--check", "--include", rel)
        assert code != 0, rel
    resolution = unit_merge.resolve(unidiff.parse(text, "multi.patch"), lambda rel: old.get(rel))
    counts = resolution.counts()
    assert counts["conflict"] == 0 and counts["transplanted"] >= 5 and counts["merged"] >= 1, counts
    assert {f.how for f in resolution.files} == {unit_merge.PER_UNIT}
    before = snapshot(site)
    assert states_with(patch, site)["multi"]["state"] == "pending"
    result = run("--patches", patch, "apply", "--site-packages", site, "--only", "multi")
    assert result.exit_code == 0, result.stderr
    for f in resolution.files:
        assert (site / f.rel).read_bytes() == f.after
        compile(f.after, f.rel, "exec")  # type: ignore[arg-type]
    assert states_with(patch, site)["multi"]["state"] == "applied"
    assert run("--patches", patch, "revert", "--site-packages", site).exit_code == 0
    assert snapshot(site) == before


def test_conflicting_units_are_named_and_written_with_markers_when_asked(release, cached_wheels):
    from patchkit.diffs import unidiff, unit_merge

    site = release("0.5.22", extra=(OFFLOADER,))
    current = (site / OFFLOADER).read_bytes()
    resolution = unit_merge.resolve(unidiff.parse(offloader_diff(), "o.patch"), lambda rel: current, markers=True)
    assert [u.unit for u in resolution.conflicts] == ["OffloaderV2.__init__"]
    marked = resolution.files[0].after
    assert marked is not None and marked.count(b"<<<<<<< release\n") == 1 and marked.count(b">>>>>>> patch\n") == 1
    plain = unit_merge.resolve(unidiff.parse(offloader_diff(), "o.patch"), lambda rel: current)
    assert b"<<<<<<<" not in (plain.files[0].after or b"")


def test_two_stacked_diffs_on_one_file(tmp_path, release):
    rel = "sglang/srt/speculative/spec_info.py"
    old, new = (pristine("0.5.16") / rel).read_bytes(), (pristine("0.5.17") / rel).read_bytes()
    whole = git_diff({rel: old}, {rel: new})
    head, first = whole.split(b"\n@@ ", 1)[0], b"@@ " + whole.split(b"\n@@ ", 2)[1] + b"\n"
    assert whole.count(b"\n@@ ") == 2
    code, mid, err = git_apply({rel: old}, head + b"\n" + first)
    assert code == 0, err
    folder = tmp_path / "stack"
    folder.mkdir()
    (folder / "0001-first.patch").write_bytes(head + b"\n" + first)
    (folder / "0002-second.patch").write_bytes(b"Patchkit-After: first\n" + git_diff({rel: mid[rel]}, {rel: new}))
    site = release("0.5.16", extra=(rel,))
    before = snapshot(site)
    assert {k: v["state"] for k, v in states_with(folder, site).items() if k in ("first", "second")} == {
        "first": "pending", "second": "pending"}
    result = run("--patches", folder, "apply", "--site-packages", site, "--only", "first", "--only", "second")
    assert result.exit_code == 0, result.stderr
    assert (site / rel).read_bytes() == new
    assert run("--patches", folder, "revert", "--site-packages", site, "--only", "first").exit_code == 0
    code, expected, err = git_apply({rel: old}, git_diff({rel: mid[rel]}, {rel: new}))
    assert code == 0, err
    assert (site / rel).read_bytes() == expected[rel]  # the second alone, as git apply puts it on the release
    assert run("--patches", folder, "revert", "--site-packages", site).exit_code == 0
    assert snapshot(site) == before


def test_list_and_matrix_name_the_release_a_diff_was_made_for(tmp_path, offloader_patch, cached_wheels):
    listed = run("--patches", offloader_patch, "list", "--json").json()["patches"]
    row = next(p for p in listed if p["id"] == ID)
    # offloader.py of 0.5.20 is the pre-image; no other release has those bytes
    assert row["made_for"] == [{"version": "0.5.20", "matched": 1, "total": 1}]
    text = run("--patches", offloader_patch, "list").stdout
    assert "made for 0.5.20 (1/1 files)" in text
    assert f"{ID}  (SGLang any release; file {offloader_patch})" in text  # no Patchkit-Applies-To
    result = run("--patches", offloader_patch, "matrix", "--from", "0.5.19", "--to", "0.5.21")
    assert result.exit_code == 0, result.stderr
    assert f"{ID}: made for 0.5.20 (1/1 files)" in result.stdout
    table = run("--patches", offloader_patch, "matrix", "--from", "0.5.19", "--to", "0.5.21", "--json").json()
    row = next(p for p in table["patches"] if p["id"] == ID)
    # broken beside the built-in fixing the same code (it applies alone: status names it)
    assert row["states"] == {"0.5.19": "broken", "0.5.20": "broken", "0.5.21": "upstream-fixed"}
    assert {(c["id"], c["version"], tuple(c["under"])) for c in table["clashes"]} == {
        (ID, v, ("cpu-offload-tied-params",)) for v in ("0.5.19", "0.5.20")}
    assert row["made_for"] == [{"version": "0.5.20", "matched": 1, "total": 1}]
    # without hashes (plain diff -u): no release named, and it still works from its context lines
    plain = tmp_path / "plain.diff"
    plain.write_bytes(b"".join(line for line in offloader_patch.read_bytes().splitlines(keepends=True)
                               if not line.startswith((b"diff --git", b"index "))))
    row = next(p for p in run("--patches", plain, "list", "--json").json()["patches"] if p["id"] == "plain")
    assert row["made_for"] == []
    table = run("--patches", plain, "matrix", "--from", "0.5.20", "--to", "0.5.21", "--json").json()
    assert next(p for p in table["patches"] if p["id"] == "plain")["states"] == {"0.5.20": "broken", "0.5.21": "upstream-fixed"}


def test_a_diff_beside_the_built_in_set_leaves_their_verdicts_to_the_manifests(offloader_patch, cached_wheels, monkeypatch):
    from patchkit.engine import decide

    judged: list[str] = []
    real = decide.evaluate

    def counted(view, pid, contents=None):
        judged.append(pid)
        return real(view, pid, contents)

    monkeypatch.setattr(decide, "evaluate", counted)
    with_diff = run("--patches", offloader_patch, "matrix", "--from", "0.5.17", "--to", "0.5.18", "--json").json()
    assert set(judged) == {ID}  # the built-in patches: from the committed manifests, by hashes
    alone = run("matrix", "--from", "0.5.17", "--to", "0.5.18", "--json").json()
    assert [row for row in with_diff["patches"] if row["id"] != ID] == alone["patches"]


def test_a_file_of_the_package_that_is_not_python_is_patched_not_compiled(tmp_path, release):
    files = ("sglang/kernels/README.md", "sglang/srt/speculative/spec_info.py")  # both changed 0.5.16 -> 0.5.17
    text = git_diff({rel: (pristine("0.5.16") / rel).read_bytes() for rel in files},
                    {rel: (pristine("0.5.17") / rel).read_bytes() for rel in files})
    patch = tmp_path / "docs-too.patch"
    patch.write_bytes(text)
    site = release("0.5.16", extra=files)
    code, expected, err = git_apply({rel: (site / rel).read_bytes() for rel in files}, text)
    assert code == 0, err
    result = run("--patches", patch, "apply", "--site-packages", site, "--only", "docs-too")
    assert result.exit_code == 0, result.stderr
    assert {rel: (site / rel).read_bytes() for rel in files} == expected


# seqlens_expand_kernel moved from layers/attention/utils.py (0.5.12) to triton_ops/pad.py (0.5.13,
# unchanged); upstream changed it by 0.5.15. That change, made against 0.5.12's utils.py.
ATTENTION_UTILS = "sglang/srt/layers/attention/utils.py"
PAD = "sglang/srt/layers/attention/triton_ops/pad.py"
MOVED_UNIT = "seqlens_expand_kernel"


def moved_unit_diff() -> tuple[bytes, bytes]:
    """(the diff, the unit as upstream changed it)."""
    from patchkit.diffs import units

    old = (pristine("0.5.12") / ATTENTION_UTILS).read_bytes()
    changed = units.texts((pristine("0.5.15") / PAD).read_bytes())[MOVED_UNIT]
    before = units.texts(old)[MOVED_UNIT]
    assert before != changed and before == units.texts((pristine("0.5.13") / PAD).read_bytes())[MOVED_UNIT]
    return git_diff({ATTENTION_UTILS: old}, {ATTENTION_UTILS: old.replace(before, changed)}), changed


def test_a_unit_moved_to_another_file_is_applied_there_and_rebase_writes_the_hunk_there(tmp_path, release, cached_wheels):
    from patchkit.diffs import units

    text, changed = moved_unit_diff()
    patch = tmp_path / "moved-kernel.patch"
    patch.write_bytes(text)
    site = release("0.5.13", extra=(ATTENTION_UTILS, PAD))
    before = snapshot(site)
    where = f"moved: {ATTENTION_UTILS}:{MOVED_UNIT} -> {PAD}:{MOVED_UNIT}"
    found = states_with(patch, site)["moved-kernel"]
    # utils.py has nothing left to change (its only changed unit is in pad.py now): only pad.py is written.
    assert found["state"] == "pending" and found["files"] == [PAD] and where in found["detail"], found
    result = run("--patches", patch, "apply", "--site-packages", site, "--only", "moved-kernel")
    assert result.exit_code == 0 and where in result.stderr + result.stdout, result.stderr
    applied = (site / PAD).read_bytes()
    assert units.texts(applied)[MOVED_UNIT] == changed
    assert (site / ATTENTION_UTILS).read_bytes() == (pristine("0.5.13") / ATTENTION_UTILS).read_bytes()
    assert states_with(patch, site)["moved-kernel"]["state"] == "applied"
    assert run("--patches", patch, "revert", "--site-packages", site).exit_code == 0
    assert snapshot(site) == before

    out = tmp_path / "rebased.patch"
    result = run("rebase", patch, "--to", "0.5.13", "-o", out)
    assert result.exit_code == 0, result.stderr
    assert where in result.stdout + result.stderr
    code, files, err = git_apply({PAD: (site / PAD).read_bytes()}, out.read_bytes())
    assert code == 0, err
    assert files[PAD] == applied  # the rebased diff writes what apply of the original wrote
    assert states_with(out, site)["rebased"]["state"] == "pending"
    assert run("--patches", out, "apply", "--site-packages", site, "--only", "rebased").exit_code == 0
    assert (site / PAD).read_bytes() == files[PAD]
    assert run("--patches", out, "revert", "--site-packages", site).exit_code == 0
    assert snapshot(site) == before


def test_matrix_judges_a_moved_unit_on_each_release_not_from_a_cached_verdict(tmp_path, cached_wheels):
    # utils.py is the same file in 0.5.13-0.5.15; pad.py holds the diff's pre-image form of the
    # kernel in 0.5.13 and 0.5.14, upstream's changed form in 0.5.15.
    patch = tmp_path / "moved-kernel.patch"
    patch.write_bytes(moved_unit_diff()[0])
    result = run("--patches", patch, "matrix", "--from", "0.5.13", "--to", "0.5.15", "--json")
    assert result.exit_code == 0, result.stderr
    row = next(row for row in result.json()["patches"] if row["id"] == "moved-kernel")
    assert row["states"] == {"0.5.13": "applies", "0.5.14": "applies", "0.5.15": "upstream-fixed"}
