"""A tree this process cannot write (issue 24), on real 0.5.19 trees.

As another user (`setpriv` to nobody, 65534): a no-op apply on a patched tree it may not write
exits 0 and writes nothing (no lock is needed where this user can change nothing, as on a
read-only mount); a pristine tree it may not write, or one target folder it may not write,
exits 6 naming the path, nothing changed. As root: an immutable target file or folder
(`chattr +i`) is found before the commit point: exit 6 naming it, nothing changed."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from testing.cli import run
from testing.releases import REPO, copy_minimal, snapshot

pytestmark = pytest.mark.integration

VERSION = "0.5.19"
NOBODY = 65534
DRAFT = "sglang/srt/models/qwen3_5_mtp.py"  # a target file of 0.5.19


@pytest.fixture
def shared_tmp():
    """A folder every user can reach (pytest's own is root's alone), removed afterwards."""
    folder = Path(tempfile.mkdtemp(prefix="patchkit-unwritable-", dir="/tmp"))
    folder.chmod(0o755)
    yield folder
    subprocess.run(["chmod", "-R", "u+w", str(folder)], check=False)
    shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture
def as_nobody(shared_tmp):
    """as_nobody(*args) -> CompletedProcess of `patchkit ARGS` run as nobody (setpriv)."""
    if os.geteuid() != 0 or shutil.which("setpriv") is None:
        pytest.skip("switching to another user needs root and setpriv (util-linux)")
    home = shared_tmp / "home"
    home.mkdir()
    home.chmod(0o777)
    env = {**os.environ, "PATCHKIT_HOME": str(home), "PYTHONDONTWRITEBYTECODE": "1"}

    def patchkit(*args: str | Path) -> subprocess.CompletedProcess:
        return subprocess.run(["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups",
                               sys.executable, "-m", "patchkit", *map(str, args)],
                              capture_output=True, text=True, cwd="/", env=env, timeout=300)

    probe = subprocess.run(["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups", sys.executable,
                            "-c", "import patchkit.cli.app"], capture_output=True, text=True, cwd="/", env=env)
    if probe.returncode != 0:
        pytest.skip(f"nobody cannot run this checkout's Python: {probe.stderr.strip()[-200:]}")
    return patchkit


def _site(shared_tmp) -> Path:
    return copy_minimal(VERSION, shared_tmp / "site")


def test_a_no_op_apply_on_a_patched_tree_this_user_cannot_write_succeeds(shared_tmp, as_nobody):
    site = _site(shared_tmp)
    assert run("apply", "--site-packages", site).exit_code == 0  # patched as root
    subprocess.run(["chmod", "-R", "a-w", str(site)], check=True)
    before = snapshot(site)
    result = as_nobody("apply", "--target", VERSION, "--site-packages", site)
    assert result.returncode == 0, result.stderr
    assert "nothing to do: no file changed" in result.stdout
    assert snapshot(site) == before
    status = as_nobody("status", "--site-packages", site)
    assert status.returncode == 0, status.stderr


def test_a_pristine_tree_this_user_cannot_write_is_exit_6_and_unchanged(shared_tmp, as_nobody):
    site = _site(shared_tmp)
    subprocess.run(["chmod", "-R", "a-w", str(site)], check=True)
    before = snapshot(site)
    result = as_nobody("apply", "--site-packages", site)
    assert result.returncode == 6, result.stderr
    line = result.stderr.strip().splitlines()[-1]
    assert line.startswith(f"error: {site}/sglang/") and "Permission denied (EACCES)" in line, line
    assert snapshot(site) == before


def test_one_target_folder_this_user_cannot_write_is_found_before_the_commit_point(shared_tmp, as_nobody):
    """`.patchkit/` and every other folder are the user's: before, the journal was written and the
    files of the other folders replaced (exit 6 with a half-finished run)."""
    site = _site(shared_tmp)
    subprocess.run(["chown", "-R", f"{NOBODY}:{NOBODY}", str(site)], check=True)
    folder = (site / DRAFT).parent
    folder.chmod(0o555)
    before = snapshot(site)
    result = as_nobody("apply", "--site-packages", site)
    assert result.returncode == 6, result.stderr
    line = result.stderr.strip().splitlines()[-1]
    assert f"error: {folder}: Permission denied (EACCES); nothing was written" in line, line
    assert snapshot(site) == before  # no journal, no backup, no file replaced


def test_a_read_only_file_in_a_folder_this_user_can_write_is_patched_keeping_its_mode(shared_tmp, as_nobody):
    """A 0444 file is replaced by a rename in its folder, which this user may write: it is patched
    and reverted like any other, its mode kept (before, the write check refused it: exit 6)."""
    site = _site(shared_tmp)
    subprocess.run(["chown", "-R", f"{NOBODY}:{NOBODY}", str(site)], check=True)
    draft = site / DRAFT
    draft.chmod(0o444)
    pristine = draft.read_bytes()
    result = as_nobody("apply", "--site-packages", site)
    assert result.returncode == 0, result.stderr
    assert draft.read_bytes() != pristine and draft.stat().st_mode & 0o7777 == 0o444
    result = as_nobody("revert", "--site-packages", site)
    assert result.returncode == 0, result.stderr
    assert draft.read_bytes() == pristine and draft.stat().st_mode & 0o7777 == 0o444


def test_a_read_only_file_of_another_user_in_a_sticky_folder_is_still_refused(shared_tmp, as_nobody):
    """In a sticky folder (as /tmp) only the file's or the folder's owner may rename over it:
    root's 0444 file there stays refused before the commit point, exit 6 naming it."""
    site = _site(shared_tmp)
    subprocess.run(["chown", "-R", f"{NOBODY}:{NOBODY}", str(site)], check=True)
    draft = site / DRAFT
    os.chown(draft, 0, 0)
    os.chown(draft.parent, 0, 0)
    draft.parent.chmod(0o1777)
    draft.chmod(0o444)
    before = snapshot(site)
    result = as_nobody("apply", "--site-packages", site)
    assert result.returncode == 6, result.stderr
    line = result.stderr.strip().splitlines()[-1]
    assert f"error: {draft}: Permission denied (EACCES); nothing was written" in line, line
    assert snapshot(site) == before


def _immutable(path: Path) -> None:
    proc = subprocess.run(["chattr", "+i", str(path)], capture_output=True, text=True)
    if proc.returncode != 0:
        pytest.skip(f"chattr +i is not supported here: {proc.stderr.strip()}")


@pytest.mark.parametrize("which", ["file", "folder"])
def test_an_immutable_target_is_found_before_the_commit_point(shared_tmp, which):
    if os.geteuid() != 0:
        pytest.skip("chattr +i needs root")
    site = _site(shared_tmp)
    path = site / DRAFT if which == "file" else (site / DRAFT).parent
    line = _apply_refused_while_immutable(site, path)
    assert f"error: {path}: Operation not permitted (EPERM); nothing was written" in line, line
    assert run("apply", "--site-packages", site).exit_code == 0  # the flag removed, it applies


def _apply_refused_while_immutable(site: Path, path: Path) -> str:
    """The error line of an apply while `path` is immutable: exit 6, nothing changed."""
    _immutable(path)
    try:
        before = snapshot(site)
        result = run("apply", "--site-packages", site)
        assert result.exit_code == 6, result.stderr
        assert snapshot(site) == before
        return result.stderr.strip().splitlines()[-1]
    finally:
        subprocess.run(["chattr", "-i", str(path)], check=True)


def test_an_immutable_backups_folder_is_named_not_a_temp_file_in_it(shared_tmp):
    """A first backup into a folder of `.patchkit/backups/` that cannot be written: the line named a
    temporary file patchkit tried to create there (`.../.qwen3_5.py.o_m1vzl9.tmp`), not the folder."""
    if os.geteuid() != 0:
        pytest.skip("chattr +i needs root")
    site = _site(shared_tmp)
    assert run("apply", "--only", "draft-lmhead-placeholder", "--site-packages", site).exit_code == 0
    folder = site / ".patchkit" / "backups" / Path(DRAFT).parent
    assert (folder / Path(DRAFT).name).is_file()  # the next apply backs up another file of that folder
    line = _apply_refused_while_immutable(site, folder)
    assert line.startswith(f"error: {folder}: Operation not permitted (EPERM)") and ".tmp" not in line, line
