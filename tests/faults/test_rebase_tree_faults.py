"""Faults at the writes of `rebase --tree DIR` and `rebase --continue DIR -o FILE` for a diff that
deletes a file (the record's `deleted` key, 67a5c56): upstream's empty
sglang/srt/hardware_backend/mlx/moe/tests/__init__.py deleted beside an edit, made on real 0.5.14,
rebased onto 0.5.15. EIO or ENOSPC injected by strace at the first and the last write, fsync and
rename that touch the folder DIR and FILE are made in (each seen delivered), a full tmpfs and a
read-only folder: each run exits 6 with one line, and that folder (DIR, an earlier FILE, a file of
the user's) is byte for byte as it was (docs/faults.md). Before, `--tree` wrote DIR's files one
by one: a failure part way left DIR half written (and the next `--tree DIR` refused it as not
empty)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from testing import write_faults
from testing.diffs import git_diff
from testing.releases import pristine, tree
from tests.integration.test_diff_moved_and_whole_files import EMPTY_INIT

pytestmark = [pytest.mark.faults, pytest.mark.slow, pytest.mark.integration]

MOE_INIT = EMPTY_INIT.replace("tests/", "")


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    """A home with the two wheels, the diff, and `work/` (a file of the user's, the resolved tree
    `done.tree` and an earlier `fixed.patch`): where the trees and the finished diff go."""
    from testing.checkout import wheel_home

    root = tmp_path_factory.mktemp("rebase-faults")
    home = wheel_home(root / "home", ("0.5.14", "0.5.15"))
    old = {rel: (pristine("0.5.14") / rel).read_bytes() for rel in (EMPTY_INIT, MOE_INIT)}
    patch = root / "drops-edit.patch"
    patch.write_bytes(git_diff(old, {EMPTY_INIT: None, MOE_INIT: old[MOE_INIT] + b"X = 1\n"}))
    work = root / "work"
    work.mkdir()
    (work / "mine.txt").write_bytes(b"the user's\n")
    made = write_faults.run(("rebase", str(patch), "--to", "0.5.15", "--tree", str(work / "done.tree")), root, home)
    assert made.returncode == 0, made.stderr
    assert '"deleted"' in (work / "done.tree" / ".patchkit-rebase.json").read_text()
    (work / "fixed.patch").write_bytes(b"an earlier diff\n")
    return root, home, patch, work


def _commands(world, work: Path) -> dict[str, tuple[str, ...]]:
    """The two commands, on this test's own copy of `work/`."""
    patch = world[2]
    return {"tree": ("rebase", str(patch), "--to", "0.5.15", "--tree", str(work / "new.tree")),
            "continue": ("rebase", "--continue", str(work / "done.tree"), "-o", str(work / "fixed.patch"))}


@pytest.mark.parametrize("which", ["tree", "continue"])
def test_an_injected_error_at_a_write_leaves_the_folder_as_it_was(strace, world, which, tmp_path):
    root, home, _, seed = world
    kept, work = seed, tmp_path / "work"
    shutil.copytree(kept, work, symlinks=True)
    write_faults.each_write_fault(strace, _commands(world, work)[which], root, home, work, kept, tmp_path)


@pytest.mark.parametrize("which", ["tree", "continue"])
def test_a_full_file_system_leaves_the_folder_as_it_was(world, tmp_path, which):
    why = write_faults.cannot_mount()
    if why:
        pytest.skip(f"a full tmpfs cannot be mounted: {why}")
    root, home, _, seed = world
    start = lambda small: shutil.copytree(seed, small / "work", symlinks=True)  # noqa: E731
    with write_faults.full_tmpfs(tmp_path / "small", 0, start) as small:
        moved = _commands(world, small / "work")[which]
        before = tree(small / "work")
        proc = write_faults.run(moved, root, home)
        write_faults.failed_as_it_was(proc, small / "work", before, "ENOSPC")


@pytest.mark.parametrize("which", ["tree", "continue"])
def test_a_read_only_folder_is_left_as_it_was(world, which, tmp_path):
    root, home, _, seed = world
    work = tmp_path / "work"
    shutil.copytree(seed, work, symlinks=True)
    before = tree(work)
    with write_faults.read_only(work) as how:
        proc = write_faults.run(_commands(world, work)[which], root, home)
    write_faults.failed_as_it_was(proc, work, before, "EROFS" if "mount" in how else "EACCES")


def test_a_tree_into_an_empty_folder_whose_parent_cannot_be_written_is_written(world, tmp_path):
    """The staging folder goes beside DIR; where the parent cannot take it (read-only) but the empty
    DIR can be written, DIR is filled from a staging folder inside it. Before this fallback:
    exit 6 naming the parent, where `--tree DIR` into such a folder had worked."""
    import os

    root, home, patch, _ = world
    parent = tmp_path / "parent"
    tree_dir = parent / "new.tree"
    tree_dir.mkdir(parents=True)
    args = ("rebase", str(patch), "--to", "0.5.15", "--tree", str(tree_dir))
    if write_faults.cannot_mount() is None:  # root: a mode stops nothing; a read-only mount, DIR a writable one in it
        subprocess.run(["mount", "--bind", str(parent), str(parent)], check=True)
        try:
            subprocess.run(["mount", "-o", "remount,bind,ro", str(parent)], check=True)
            subprocess.run(["mount", "--bind", str(tree_dir), str(tree_dir)], check=True)
            try:
                subprocess.run(["mount", "-o", "remount,bind,rw", str(tree_dir)], check=True)
                assert not os.access(parent, os.W_OK) and os.access(tree_dir, os.W_OK)
                proc = write_faults.run(args, root, home)
                written = tree(tree_dir)
            finally:
                subprocess.run(["umount", "-l", str(tree_dir)], check=True)
        finally:
            subprocess.run(["umount", "-l", str(parent)], check=True)
    else:
        parent.chmod(0o555)
        try:
            proc = write_faults.run(args, root, home)
            written = tree(tree_dir)
        finally:
            parent.chmod(0o755)
    assert proc.returncode == 0, proc.stderr
    assert MOE_INIT in written and ".patchkit-rebase.json" in written, sorted(written)
    assert not any("patchkit-new" in rel for rel in written), sorted(written)
