"""A diff patch whose units moved to other files of the package, and one that creates or
deletes files, on real releases: the other files are planned, journaled, backed up, written in
the same transaction, recorded, verified and reverted byte-exactly like the diff's own files.
Every diff is made by real git from real release files (upstream's own later change of a unit,
applied to the file it lived in before it moved)."""

from __future__ import annotations

import pytest

from testing.cli import run
from testing.diffs import git_diff
from testing.faults import run_faulted, warm_home
from testing.releases import pristine, snapshot

pytestmark = pytest.mark.integration

# 0.5.15 -> 0.5.16 moved sglang/srt/speculative/reject_sampling.py and sglang/srt/layers/moe/router.py
# whole under sglang/kernels/ops/ (the old files are gone); upstream then changed
# speculative_sampling_classic_kernel and fused_moe_router_tensorcore_kernel there in 0.5.17.
OLD_SAMPLING = "sglang/srt/speculative/reject_sampling.py"
NEW_SAMPLING = "sglang/kernels/ops/speculative/reject_sampling.py"
OLD_ROUTER = "sglang/srt/layers/moe/router.py"
NEW_ROUTER = "sglang/kernels/ops/moe/router.py"
DEVICE_CONFIG = "sglang/srt/configs/device_config.py"
RETIRED = "sglang/srt/configs/interns2preview.py"
SAMPLING_UNIT = "speculative_sampling_classic_kernel"
ROUTER_UNIT = "fused_moe_router_tensorcore_kernel"


@pytest.fixture
def cached_wheels(patchkit_home):
    """The test cache's wheels as this test's wheel cache: the diff's pre-image is found there by its blob hash."""
    from testing.releases import HOME

    (patchkit_home / "wheels").symlink_to(HOME / "wheels")


def _changed_in_old_file(old_rel: str, new_rel: str, name: str) -> tuple[bytes, bytes, bytes]:
    """(0.5.15's old file, that file with upstream's 0.5.17 form of the unit, the 0.5.17 form)."""
    from patchkit.diffs import units

    old = (pristine("0.5.15") / old_rel).read_bytes()
    before = units.texts(old)[name]
    assert units.texts((pristine("0.5.16") / new_rel).read_bytes())[name] == before  # moved as it was
    changed = units.texts((pristine("0.5.17") / new_rel).read_bytes())[name]
    assert changed != before and old.count(before) == 1
    return old, old.replace(before, changed), changed


@pytest.fixture(scope="module")
def moved_diff() -> tuple[bytes, dict[str, bytes]]:
    """Upstream's 0.5.17 change of both kernels as one diff made against 0.5.15's files (where
    0.5.16 has neither file), and {the file each went to: the unit's changed form}."""
    sampling, sampling_fixed, sampling_unit = _changed_in_old_file(OLD_SAMPLING, NEW_SAMPLING, SAMPLING_UNIT)
    router, router_fixed, router_unit = _changed_in_old_file(OLD_ROUTER, NEW_ROUTER, ROUTER_UNIT)
    diff = git_diff({OLD_SAMPLING: sampling, OLD_ROUTER: router}, {OLD_SAMPLING: sampling_fixed, OLD_ROUTER: router_fixed})
    return diff, {NEW_SAMPLING: sampling_unit, NEW_ROUTER: router_unit}


def _states(patch, site) -> dict[str, dict]:
    result = run("--patches", patch, "status", "--site-packages", site, "--json")
    assert result.exit_code == 0, result.stderr
    return {p["id"]: p for p in result.json()["patches"]}


def test_units_of_files_gone_from_the_release_are_applied_where_they_moved(tmp_path, release, cached_wheels, moved_diff):
    from patchkit.diffs import units

    diff, changed = moved_diff
    patch = tmp_path / "kernels.patch"
    patch.write_bytes(diff)
    site = release("0.5.16", extra=(NEW_SAMPLING, NEW_ROUTER))
    before = snapshot(site)
    originals = {rel: (site / rel).read_bytes() for rel in changed}
    found = _states(patch, site)["kernels"]
    assert found["state"] == "pending" and found["files"] == sorted(changed), found
    result = run("--patches", patch, "apply", "--site-packages", site, "--only", "kernels")
    assert result.exit_code == 0, result.stderr
    said = result.stdout + result.stderr
    # Each file moved whole (a namesake with its pre-image's lines): followed as a folder that moved,
    # as rebase follows it (its units were followed one by one before status/apply did that).
    assert f"moved: {NEW_SAMPLING} is where this release has {OLD_SAMPLING} (its folder moved)" in said, said
    assert f"moved: {NEW_ROUTER} is where this release has {OLD_ROUTER} (its folder moved)" in said, said
    for rel, unit in changed.items():
        data = (site / rel).read_bytes()
        assert units.texts(data)[SAMPLING_UNIT if rel == NEW_SAMPLING else ROUTER_UNIT] == unit
        # Only the moved unit changed: the rest of the file is the release's.
        assert data.replace(unit, b"") == originals[rel].replace(
            units.texts(originals[rel])[SAMPLING_UNIT if rel == NEW_SAMPLING else ROUTER_UNIT], b"")
    assert not (site / OLD_SAMPLING).exists() and not (site / OLD_ROUTER).exists()
    found = _states(patch, site)["kernels"]
    assert found["state"] == "applied" and found["files"] == sorted(changed), found
    # (verify's imports need the whole release; the minimal copy is judged on its recorded files)
    checks = {c["check"]: c for c in run("--patches", patch, "verify", "--site-packages", site, "--json").json()["checks"]}
    assert [checks[rel]["result"] for rel in changed] == ["ok", "ok"], checks
    assert checks[NEW_ROUTER]["detail"] == "recorded bytes, compiles"
    shown = run("--patches", patch, "diff", "--site-packages", site)
    assert f"+++ b/{NEW_SAMPLING}" in shown.stdout and f"+++ b/{NEW_ROUTER}" in shown.stdout
    again = run("--patches", patch, "apply", "--site-packages", site, "--only", "kernels")
    assert again.exit_code == 0 and "nothing to do" in (again.stdout + again.stderr).lower(), again.stdout
    # An edit of a moved-to file after apply is drift, like any target's.
    (site / NEW_ROUTER).write_bytes((site / NEW_ROUTER).read_bytes() + b"# edited\n")
    assert _states(patch, site)["kernels"]["state"] == "drifted"
    assert run("--patches", patch, "revert", "--site-packages", site).exit_code == 4
    (site / NEW_ROUTER).write_bytes((site / NEW_ROUTER).read_bytes()[:-len(b"# edited\n")])
    result = run("--patches", patch, "revert", "--site-packages", site)
    assert result.exit_code == 0, result.stderr
    assert snapshot(site) == before


def test_a_kill_mid_apply_leaves_both_moved_to_files_as_they_were(tmp_path, release, cached_wheels, moved_diff):
    diff, changed = moved_diff
    patch = tmp_path / "kernels.patch"
    patch.write_bytes(diff)
    site = release("0.5.16", extra=(NEW_SAMPLING, NEW_ROUTER))
    before = snapshot(site)
    warm_home(site)
    # os.replace calls of the transaction: 2 backups, 2 staged files, the journal (the commit
    # point), then the 2 files. Killed at the journal: nothing changed.
    proc = run_faulted("replace", 5, "kill-before", "--patches", patch, "apply", "--site-packages", site, "--only", "kernels")
    assert proc.returncode == -9, proc.stderr
    assert {rel: (site / rel).read_bytes() for rel in changed} == {rel: (pristine("0.5.16") / rel).read_bytes()
                                                                  for rel in changed}
    assert run("--patches", patch, "status", "--site-packages", site).exit_code == 0
    assert {k: v for k, v in snapshot(site).items() if not k.startswith(".patchkit")} == \
        {k: v for k, v in before.items() if not k.startswith(".patchkit")}
    # Killed after the first file was replaced: the next run finishes the apply, revert restores both.
    proc = run_faulted("replace", 6, "kill-after", "--patches", patch, "apply", "--site-packages", site, "--only", "kernels")
    assert proc.returncode == -9, proc.stderr
    assert sum((site / rel).read_bytes() != (pristine("0.5.16") / rel).read_bytes() for rel in changed) == 1
    result = run("--patches", patch, "apply", "--site-packages", site, "--only", "kernels")
    assert result.exit_code == 0, result.stderr
    assert _states(patch, site)["kernels"]["state"] == "applied"
    assert all((site / rel).read_bytes() != (pristine("0.5.16") / rel).read_bytes() for rel in changed)
    assert run("--patches", patch, "revert", "--site-packages", site).exit_code == 0
    assert snapshot(site) == before


def test_a_diff_patch_answers_the_same_whichever_question_comes_first(tmp_path, cached_wheels, moved_diff):
    """Where this tree has the diff's files (their folder moved) is the patch's layout on the tree:
    asked of a file before `targets_for` (issue 44 item 4), the patch answers as after it."""
    from patchkit.diffs import diffpatch

    diff, changed = moved_diff
    path = tmp_path / "kernels.patch"
    path.write_bytes(diff)
    cls = diffpatch.patch_class(path, "test")
    root = pristine("0.5.16")
    files = sorted(p.relative_to(root).as_posix() for p in (root / "sglang").rglob("*") if p.is_file())

    def read(rel: str) -> bytes | None:
        return (root / rel).read_bytes() if (root / rel).is_file() else None

    def answers(targets_first: bool) -> dict:
        patch = cls()
        patch.bind_package(lambda: files, read)
        asked: dict = {"targets": patch.targets_for(read)} if targets_first else {}
        for rel in sorted(changed):
            asked[rel] = (patch.file_change(rel), patch.is_fixed_upstream(rel, read(rel)), patch.notes(rel, read(rel)),
                          patch.transform(rel, read(rel)))
        return {"targets": patch.targets_for(read), **asked}

    first = answers(targets_first=True)
    assert first["targets"] == tuple(sorted(changed)) and all(first[rel][3] != read(rel) for rel in changed), first
    assert answers(targets_first=False) == first


# 0.5.21 -> 0.5.22 added sglang/kernels/numerics.py and removed sglang/srt/compilation/weak_ref_tensor.py.
NUMERICS = "sglang/kernels/numerics.py"
KERNELS_INIT = "sglang/kernels/__init__.py"
WEAK_REF = "sglang/srt/compilation/weak_ref_tensor.py"


def _whole_file_patch(tmp_path, rel: str) -> tuple:
    """The diff git makes of upstream's 0.5.21 -> 0.5.22 change of that file (created or deleted)."""
    old, new = (pristine(v) / rel for v in ("0.5.21", "0.5.22"))
    diff = git_diff({rel: old.read_bytes() if old.exists() else None}, {rel: new.read_bytes() if new.exists() else None})
    assert (b"new file mode" if not old.exists() else b"deleted file mode") in diff
    patch = tmp_path / f"{'adds' if not old.exists() else 'drops'}.patch"
    patch.write_bytes(diff)
    return patch, new.read_bytes() if new.exists() else None


def test_a_diff_that_creates_a_module_creates_it_and_revert_deletes_it(tmp_path, release, cached_wheels):
    patch, created = _whole_file_patch(tmp_path, NUMERICS)
    site = release("0.5.21", extra=(KERNELS_INIT,))
    before = snapshot(site)
    assert not (site / NUMERICS).exists()
    found = _states(patch, site)["adds"]
    assert found["state"] == "pending" and found["files"] == [NUMERICS], found
    result = run("--patches", patch, "apply", "--site-packages", site, "--only", "adds")
    assert result.exit_code == 0, result.stderr
    assert (site / NUMERICS).read_bytes() == created
    assert _states(patch, site)["adds"]["state"] == "applied"
    checks = {c["check"]: c for c in run("--patches", patch, "verify", "--site-packages", site, "--json").json()["checks"]}
    assert checks[NUMERICS]["result"] == "ok", checks
    assert "--- /dev/null" in run("--patches", patch, "diff", "--site-packages", site).stdout
    assert run("--patches", patch, "apply", "--site-packages", site, "--only", "adds").exit_code == 0
    result = run("--patches", patch, "revert", "--site-packages", site)
    assert result.exit_code == 0, result.stderr
    assert snapshot(site) == before
    # Upstream's own file there: upstream-fixed. Other bytes there: failed, exit 1, nothing written.
    (site / NUMERICS).write_bytes(created)
    assert _states(patch, site)["adds"]["state"] == "upstream-fixed"
    (site / NUMERICS).write_bytes(created + b"X = 1\n")
    held = snapshot(site)
    found = _states(patch, site)["adds"]
    assert found["state"] == "failed" and "it is there with other bytes" in found["detail"], found
    result = run("--patches", patch, "apply", "--site-packages", site, "--only", "adds")
    assert result.exit_code == 1 and len(result.stderr.strip().splitlines()) == 1, result.stderr
    assert snapshot(site) == held


def test_a_diff_that_deletes_a_module_removes_it_with_a_backup_and_revert_restores_it(tmp_path, release, cached_wheels):
    patch, _ = _whole_file_patch(tmp_path, WEAK_REF)
    site = release("0.5.21", extra=(WEAK_REF,))
    before = snapshot(site)
    found = _states(patch, site)["drops"]
    assert found["state"] == "pending" and found["files"] == [WEAK_REF], found
    result = run("--patches", patch, "apply", "--site-packages", site, "--only", "drops")
    assert result.exit_code == 0, result.stderr
    assert not (site / WEAK_REF).exists()
    assert _states(patch, site)["drops"]["state"] == "applied"
    checks = {c["check"]: c for c in run("--patches", patch, "verify", "--site-packages", site, "--json").json()["checks"]}
    assert checks[WEAK_REF] == {"check": WEAK_REF, "result": "ok", "detail": "removed, as recorded"}, checks
    assert "+++ /dev/null" in run("--patches", patch, "diff", "--site-packages", site).stdout
    result = run("--patches", patch, "revert", "--site-packages", site)
    assert result.exit_code == 0, result.stderr
    assert snapshot(site) == before
    # Already gone (the release after): upstream-fixed, nothing to do.
    newer = release("0.5.22", extra=(KERNELS_INIT,))
    assert _states(patch, newer)["drops"]["state"] == "upstream-fixed"


# Upstream's 0.5.16 -> 0.5.17 deletes this empty file; git writes `deleted file mode 100644` and no hunk.
EMPTY_INIT = "sglang/srt/hardware_backend/mlx/moe/tests/__init__.py"


def test_a_diff_that_deletes_an_empty_module_removes_it_and_revert_restores_it(tmp_path, release, cached_wheels):
    """The deletion was read as a mode change and left out: apply exited 0 with the file still there."""
    old = pristine("0.5.16") / EMPTY_INIT
    assert old.read_bytes() == b"" and not (pristine("0.5.17") / EMPTY_INIT).exists()
    diff = git_diff({EMPTY_INIT: b""}, {EMPTY_INIT: None})
    assert b"deleted file mode 100644" in diff and b"@@" not in diff
    patch = tmp_path / "drops-empty.patch"
    patch.write_bytes(diff)
    site = release("0.5.16", extra=(EMPTY_INIT,))
    before = snapshot(site)
    found = _states(patch, site)["drops-empty"]
    assert found["state"] == "pending" and found["files"] == [EMPTY_INIT], found
    result = run("--patches", patch, "apply", "--site-packages", site, "--only", "drops-empty")
    assert result.exit_code == 0, result.stderr
    assert not (site / EMPTY_INIT).exists()
    assert _states(patch, site)["drops-empty"]["state"] == "applied"
    result = run("--patches", patch, "revert", "--site-packages", site)
    assert result.exit_code == 0, result.stderr
    assert snapshot(site) == before and (site / EMPTY_INIT).read_bytes() == b""
    # Bytes there (not the empty pre-image): failed, exit 1, nothing written; gone already: upstream-fixed.
    (site / EMPTY_INIT).write_bytes(b"X = 1\n")
    held = snapshot(site)
    result = run("--patches", patch, "apply", "--site-packages", site, "--only", "drops-empty")
    assert result.exit_code == 1 and len(result.stderr.strip().splitlines()) == 1, result.stderr
    assert snapshot(site) == held
    assert _states(patch, release("0.5.17"))["drops-empty"]["state"] == "upstream-fixed"


def test_a_diff_that_creates_an_empty_module_creates_it_and_revert_deletes_it(tmp_path, release, cached_wheels):
    rel = "sglang/srt/hardware_backend/mlx/moe/tests/extra.py"
    diff = git_diff({}, {rel: b""})
    assert b"new file mode 100644" in diff and b"@@" not in diff
    patch = tmp_path / "adds-empty.patch"
    patch.write_bytes(diff)
    site = release("0.5.16", extra=(EMPTY_INIT,))
    before = snapshot(site)
    result = run("--patches", patch, "apply", "--site-packages", site, "--only", "adds-empty")
    assert result.exit_code == 0, result.stderr
    assert (site / rel).read_bytes() == b""
    assert _states(patch, site)["adds-empty"]["state"] == "applied"
    result = run("--patches", patch, "revert", "--site-packages", site)
    assert result.exit_code == 0, result.stderr
    assert snapshot(site) == before


def test_rebase_through_a_tree_carries_a_deletion(tmp_path, cached_wheels):
    """`rebase --tree` writes no file for one the diff deletes, and `--continue` read its absence as
    the user dropping that change: the finished diff lost the deletion (to stdout, without a word).
    Upstream's empty tests/__init__.py deleted beside an edit, made on 0.5.14, rebased onto 0.5.15."""
    moe_init = EMPTY_INIT.replace("tests/", "")
    old = {rel: (pristine("0.5.14") / rel).read_bytes() for rel in (EMPTY_INIT, moe_init)}
    patch = tmp_path / "drops-edit.patch"
    patch.write_bytes(git_diff(old, {EMPTY_INIT: None, moe_init: old[moe_init] + b"X = 1\n"}))
    tree = tmp_path / "tree"
    result = run("rebase", patch, "--to", "0.5.15", "--tree", tree)
    assert result.exit_code == 0, result.stderr
    assert not (tree / EMPTY_INIT).exists()
    result = run("rebase", "--continue", tree)
    assert result.exit_code == 0, result.stderr
    finished = result.stdout
    assert f"diff --git a/{EMPTY_INIT} b/{EMPTY_INIT}\ndeleted file mode 100644\n" in finished, finished
    assert f"+++ b/{moe_init}\n@@ -0,0 +1 @@\n+X = 1\n" in finished, finished
    # Put back as V has it, the deletion is the user's to drop.
    (tree / EMPTY_INIT).parent.mkdir()
    (tree / EMPTY_INIT).write_bytes(b"")
    result = run("rebase", "--continue", tree, "--json")
    assert result.exit_code == 0 and result.json()["dropped"] == [EMPTY_INIT], result.stderr


def test_a_stack_deleting_a_file_and_creating_it_again_is_refused_naming_both(tmp_path, release):
    """A lower diff deletes a module and the diff stacked on it creates it again (issue 40's bump
    stack test): `apply` of the two was an AttributeError on the deleted file's None, exit 70. It is
    the engine's refusal of a file a diff creates or deletes shared with another patch: exit 1
    naming both and `--skip`, nothing written."""
    device, retired = ((pristine("0.5.17") / rel).read_bytes() for rel in (DEVICE_CONFIG, RETIRED))
    middle = device.replace(b"Not supported device type", b"Not a supported device")
    again = retired.replace(b'model_type = "intern_s2_preview"', b'model_type = "intern_s2_preview_v2"')
    folder = tmp_path / "stack"
    folder.mkdir()
    (folder / "a-retire.patch").write_bytes(git_diff({DEVICE_CONFIG: device, RETIRED: retired},
                                                     {DEVICE_CONFIG: middle, RETIRED: None}))
    (folder / "b-again.patch").write_bytes(git_diff({DEVICE_CONFIG: middle, RETIRED: None},
                                                    {DEVICE_CONFIG: middle + b"# again\n", RETIRED: again}))
    site = release("0.5.17", extra=(DEVICE_CONFIG, RETIRED))
    before = snapshot(site)
    result = run("--patches", folder, "apply", "--site-packages", site, "--only", "a-retire", "--only", "b-again")
    assert result.exit_code == 1, (result.exit_code, result.stderr)
    assert f"patch a-retire deletes {RETIRED}, which b-again also change(s)" in result.stderr, result.stderr
    assert "--skip a-retire" in result.stderr
    assert snapshot(site) == before
