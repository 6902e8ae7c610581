"""What patchkit writes for a diff patch reads back as applied: on a real 40-file diff (upstream's
0.5.16 -> 0.5.17 change, made by git) taken back to 0.5.12 and 0.5.15, every file that resolves
(as git apply would, or per unit) is written, then judged again on the written bytes as already
there, `status` says `applied`, `verify` is clean, a second `apply` writes nothing and `revert`
gives the release's bytes back."""

from __future__ import annotations

import shutil

import pytest

from bench.diffs import changed_files
from testing.cli import run
from testing.diffs import git_diff
from testing.releases import pristine, snapshot

pytestmark = pytest.mark.integration

ID = "srt-0-5-17"
# Where the release removed lines right beside the ones the diff inserts: merging the diff's
# change again into the merged unit read as a conflict (the bytes written were judged `failed`).
MERGED_BESIDE = ("0.5.12", "sglang/srt/arg_groups/deepseek_v4_hook.py", "validate_deepseek_v4_cp")


@pytest.fixture(scope="module")
def whole_diff() -> tuple[list[str], bytes]:
    files = changed_files("0.5.16", "0.5.17", 40)
    return files, git_diff({rel: (pristine("0.5.16") / rel).read_bytes() for rel in files},
                           {rel: (pristine("0.5.17") / rel).read_bytes() for rel in files})


@pytest.fixture
def cached_wheels(patchkit_home):
    from testing.releases import HOME

    (patchkit_home / "wheels").symlink_to(HOME / "wheels")


@pytest.mark.parametrize("version", ["0.5.12", "0.5.15"])
def test_every_file_that_resolves_reads_back_as_applied(tmp_path, release, cached_wheels, whole_diff, version):
    from patchkit.diffs import unidiff, unit_merge

    files, text = whole_diff
    site = release(version, whole=True)
    current = {rel: (site / rel).read_bytes() if (site / rel).is_file() else None for rel in files}
    resolution = unit_merge.resolve(unidiff.parse(text, "all.patch"), current.get)
    resolved = [f for f in resolution.files if f.after is not None and not f.conflicts]
    assert len(resolved) >= 15, [f.rel for f in resolved]
    if version == MERGED_BESIDE[0]:  # 0.5.15: the 22 files that resolve apply as git would
        assert sum(f.how == unit_merge.PER_UNIT for f in resolved) >= 3
        hook = next(f for f in resolved if f.rel == MERGED_BESIDE[1])
        assert (MERGED_BESIDE[2], unit_merge.MERGED) in {(u.unit, u.outcome) for u in hook.units}

    # One diff of the files that resolve: applied whole.
    chosen = [f.rel for f in resolved]
    patch = tmp_path / f"{ID}.patch"
    patch.write_bytes(git_diff({rel: (pristine("0.5.16") / rel).read_bytes() for rel in chosen},
                               {rel: (pristine("0.5.17") / rel).read_bytes() for rel in chosen}))
    before = snapshot(site)
    assert _state(patch, site)["state"] == "pending"
    result = run("--patches", patch, "apply", "--site-packages", site, "--only", ID)
    assert result.exit_code == 0, result.stderr
    written = {rel: (site / rel).read_bytes() for rel in chosen}
    assert written == {f.rel: f.after for f in resolved}

    # Judged again on the bytes written, without the state file: every file has the change.
    again = unit_merge.resolve(unidiff.parse(patch.read_bytes(), "again.patch"), written.get)
    not_there = {f.rel: (f.how, [(u.unit, u.outcome, u.detail) for u in f.units if u.outcome != unit_merge.UPSTREAM])
                 for f in again.files if not f.upstream}
    assert not not_there and len(again.files) == len(chosen), not_there
    shutil.move(site / ".patchkit", tmp_path / "state-aside")
    # Where every file applied as git would, undoing the diff gives the RECORD's bytes: "applied by hand".
    by_hand = all(f.how == unit_merge.EXACT for f in resolved)
    assert _state(patch, site)["state"] == ("applied" if by_hand else "upstream-fixed")
    shutil.move(tmp_path / "state-aside", site / ".patchkit")

    assert _state(patch, site)["state"] == "applied"
    checked = run("--patches", patch, "verify", "--site-packages", site, "--json")
    failed = [c for c in checked.json()["checks"] if c["result"] == "failed"]
    assert checked.exit_code == 0 and not failed, (checked.stderr, failed)
    result = run("--patches", patch, "apply", "--site-packages", site, "--only", ID)
    assert result.exit_code == 0 and "nothing to do" in result.stdout + result.stderr, result.stderr
    assert {rel: (site / rel).read_bytes() for rel in chosen} == written
    assert run("--patches", patch, "revert", "--site-packages", site).exit_code == 0
    assert {k: v for k, v in snapshot(site).items() if not k.startswith(".patchkit")} == \
        {k: v for k, v in before.items() if not k.startswith(".patchkit")}


def _state(patch, site) -> dict:
    result = run("--patches", patch, "status", "--site-packages", site, "--json")
    assert result.exit_code == 0, result.stderr
    return next(p for p in result.json()["patches"] if p["id"] == ID)
