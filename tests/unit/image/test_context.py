"""What an image's build context copies of a `--patches DIR` set: never a file from outside DIR.
A symlink out of DIR, to nothing or to a folder is refused by `image dockerfile` before anything is
written (exit 6 naming it), and by every command that loads the set for the same reason (`list`
here, as `apply` loads it); one to a file inside DIR is copied as that file's bytes."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from testing.cli import run
from tests.integration.test_external_patch_sets import write_patch

SECRET = b"-----BEGIN OPENSSH PRIVATE KEY-----\nnot for an image\n"


def _snapshot(folder: Path) -> dict[str, bytes | str]:
    """Every entry under `folder`: a file's bytes, a folder or link as what it is."""
    found: dict[str, bytes | str] = {}
    for here, folders, names in os.walk(folder):
        for name in [*folders, *names]:
            path = Path(here, name)
            rel = str(path.relative_to(folder))
            found[rel] = f"-> {os.readlink(path)}" if path.is_symlink() else "folder" if path.is_dir() \
                else path.read_bytes()
    return found


def _world(tmp_path: Path) -> tuple[Path, Path, Path]:
    """A patch set (one module patch), a folder outside it with a secret, a fake wheel, and where
    the Dockerfile goes (its context folder already holding a file of the user's)."""
    outside = tmp_path / "home" / ".ssh"
    outside.mkdir(parents=True)
    (outside / "id_rsa").write_bytes(SECRET)
    write_patch(outside, "elsewhere-flag")  # patches that load, kept outside the set
    (outside / "elsewhere.patch").write_text(ELSEWHERE_DIFF)
    folder = tmp_path / "team-patches"
    write_patch(folder, "team-flag")
    wheel = tmp_path / "sglang_patchkit-0.1.0-py3-none-any.whl"
    wheel.write_bytes(b"PK")
    out = tmp_path / "ctx" / "Dockerfile"
    out.parent.mkdir()
    (out.parent / "mine.txt").write_bytes(b"the user's\n")
    return folder, outside, out


def _dockerfile(folder: Path, out: Path, wheel: Path):
    return run("--patches", folder, "image", "dockerfile", "--base", "b", "--target", "0.5.17", "--wheel", wheel,
               "-o", out)


ELSEWHERE_DIFF = """\
--- a/sglang/version.py
+++ b/sglang/version.py
@@ -1 +1,2 @@
 __version__ = "0.5.17"
+ELSEWHERE = True
"""

OUT_OF_DIR = {
    "a .patch file linked out": lambda d, o: (d / "elsewhere.patch").symlink_to(o / "elsewhere.patch"),
    "a .py patch file linked out": lambda d, o: (d / "elsewhere_flag.py").symlink_to(o / "elsewhere_flag.py"),
    "a file linked out": lambda d, o: (d / "notes.txt").symlink_to(o / "id_rsa"),
    "a sub-folder linked out": lambda d, o: (d / "helpers").symlink_to(o, target_is_directory=True),
    "a link out deeper down": lambda d, o: (d / "helpers").mkdir() or (d / "helpers" / "key").symlink_to(
        os.path.relpath(o / "id_rsa", d / "helpers")),
    "a dangling link": lambda d, o: (d / "notes.txt").symlink_to(d / "moved-away.txt"),
    "a dangling .patch link": lambda d, o: (d / "gone.patch").symlink_to(o / "moved-away.patch"),
    "a sub-folder linked inside": lambda d, o: (d / "real").mkdir() or (d / "again").symlink_to(
        "real", target_is_directory=True),
    "a link to the folder itself": lambda d, o: (d / "loop").symlink_to(".", target_is_directory=True),
}


@pytest.mark.parametrize("case", OUT_OF_DIR)
def test_a_symlink_out_of_a_patch_set_to_nothing_or_to_a_folder_is_refused_and_nothing_written(tmp_path, case):
    folder, outside, out = _world(tmp_path)
    OUT_OF_DIR[case](folder, outside)
    link = next(p for p in sorted(folder.rglob("*")) if p.is_symlink())
    before = _snapshot(out.parent)
    result = _dockerfile(folder, out, tmp_path / "sglang_patchkit-0.1.0-py3-none-any.whl")
    # Before: exit 0 and id_rsa copied into the context (or a copytree error / loop, or a dangling
    # link skipped), for the image to carry.
    assert result.exit_code == 6, (result.exit_code, result.stderr)
    assert str(link) in result.stderr and len(result.stderr.strip().splitlines()) == 1, result.stderr
    assert _snapshot(out.parent) == before  # nothing written: no Dockerfile, no wheel, no patchkit-patches/
    # The set is refused as a set, for the same reason, by what `apply` loads it with.
    listed = run("--patches", folder, "list")
    assert listed.exit_code == 6 and listed.stderr == result.stderr, listed.stderr


def test_a_symlink_to_a_file_inside_the_patch_set_is_copied_as_its_bytes(tmp_path):
    folder, _, out = _world(tmp_path)
    (folder / "docs").mkdir()
    (folder / "docs" / "notes.txt").write_bytes(b"how the flag is used\n")
    (folder / "notes.txt").symlink_to(Path("docs") / "notes.txt")
    (folder / ".hidden").mkdir()
    (folder / ".hidden" / "key").symlink_to(tmp_path / "home" / ".ssh" / "id_rsa")  # not part of the set
    result = _dockerfile(folder, out, tmp_path / "sglang_patchkit-0.1.0-py3-none-any.whl")
    assert result.exit_code == 0, result.stderr
    copied = out.parent / "patchkit-patches" / "1"
    assert not (copied / "notes.txt").is_symlink()
    assert (copied / "notes.txt").read_bytes() == b"how the flag is used\n"
    assert (copied / "team_flag.py").read_bytes() == (folder / "team_flag.py").read_bytes()
    assert not (copied / ".hidden").exists()
    assert not any(SECRET in p.read_bytes() for p in out.parent.rglob("*") if p.is_file())
    assert run("--patches", folder, "list").exit_code == 0


@pytest.mark.parametrize("where", ["fifo.txt", "sub/fifo", "linked-fifo"])
def test_a_fifo_in_a_patch_set_is_refused_before_anything_is_written(tmp_path, where):
    folder, _, out = _world(tmp_path)
    fifo = folder / where
    fifo.parent.mkdir(exist_ok=True)
    if where == "linked-fifo":
        os.mkfifo(folder / "real-fifo")
        fifo.symlink_to("real-fifo")
    else:
        os.mkfifo(fifo)
    before = _snapshot(out.parent)
    result = _dockerfile(folder, out, tmp_path / "sglang_patchkit-0.1.0-py3-none-any.whl")
    # Before: exit 70 (copytree's shutil.Error: `is a named pipe`), the wheel already in the context.
    assert result.exit_code == 6, (result.exit_code, result.stderr)
    assert str(fifo) in result.stderr and len(result.stderr.strip().splitlines()) == 1, result.stderr
    assert _snapshot(out.parent) == before
    listed = run("--patches", folder, "list")
    assert listed.exit_code == 6 and listed.stderr == result.stderr, listed.stderr


def test_a_second_dockerfile_into_the_same_folder_replaces_its_context(tmp_path):
    folder, _, out = _world(tmp_path)
    wheel = tmp_path / "sglang_patchkit-0.1.0-py3-none-any.whl"
    assert _dockerfile(folder, out, wheel).exit_code == 0
    (out.parent / "patchkit-patches" / "1" / "stale.txt").write_bytes(b"from an earlier set\n")
    (folder / "team_flag.py").write_text((folder / "team_flag.py").read_text() + "# edited\n")
    result = _dockerfile(folder, out, wheel)
    # Before: exit 70, FileExistsError on patchkit-patches/1 (the wheel already replaced).
    assert result.exit_code == 0, (result.exit_code, result.stderr)
    copied = out.parent / "patchkit-patches" / "1"
    assert sorted(p.name for p in copied.iterdir()) == ["team_flag.py"]
    assert (copied / "team_flag.py").read_bytes() == (folder / "team_flag.py").read_bytes()
    assert sorted(p.name for p in out.parent.iterdir()) == [
        "Dockerfile", "mine.txt", "patchkit-patches", "sglang_patchkit-0.1.0-py3-none-any.whl"]


def test_a_copy_failing_part_way_leaves_the_context_folder_as_it_was(tmp_path):
    """The wheel is made and a set copied before a later set fails (its file gone since it was
    planned): nothing of it is left in the folder (the user's own file there untouched)."""
    from patchkit.engine import registry
    from patchkit.image import context

    folder, _, out = _world(tmp_path)
    wheel = tmp_path / "sglang_patchkit-0.1.0-py3-none-any.whl"
    gone = tmp_path / "gone.patch"
    gone.write_text("--- a/sglang/version.py\n+++ b/sglang/version.py\n@@ -1 +1 @@\n-a\n+b\n")
    with registry.running(registry.PatchSets([str(folder), str(gone)])):
        planned = context.plan(wheel)
    gone.unlink()
    before = _snapshot(out.parent)
    with pytest.raises(FileNotFoundError):
        context.write(planned, out.parent)
    # Before: the wheel and patchkit-patches/1 were left in the folder.
    assert _snapshot(out.parent) == before


def test_a_second_dockerfile_without_patch_sets_leaves_no_stale_sets_in_the_context(tmp_path):
    folder, _, out = _world(tmp_path)
    wheel = tmp_path / "sglang_patchkit-0.1.0-py3-none-any.whl"
    assert _dockerfile(folder, out, wheel).exit_code == 0
    assert (out.parent / "patchkit-patches" / "1" / "team_flag.py").is_file()
    result = run("image", "dockerfile", "--base", "b", "--target", "0.5.17", "--wheel", wheel, "-o", out)
    assert result.exit_code == 0, result.stderr
    # Before: patchkit-patches/1 (the earlier run's set) was left in the context the image is built from.
    assert sorted(p.name for p in out.parent.iterdir()) == [
        "Dockerfile", "mine.txt", "sglang_patchkit-0.1.0-py3-none-any.whl"]
    assert "patchkit-patches" not in out.read_text()


_SWAPPER = """
import os, sys
path, original, secret = sys.argv[1:]
link, back = path + ".link", path + ".back"
print("swapping", flush=True)
while True:
    os.symlink(secret, link)
    os.rename(link, path)  # the checked file is now a symlink out of the set
    os.link(original, back)
    os.rename(back, path)  # and the checked file again (the same inode)
"""


def test_a_file_swapped_for_a_link_out_after_the_check_is_never_followed(tmp_path):
    """A racing process swaps a checked file of the set for a symlink to a secret outside it and
    back, over and over, while the context is written again and again from the one plan: each write
    copies the file checked or refuses the entry (exit 6's NotPlain), never the secret. The race is
    shown hit: writes that found the link there."""
    import subprocess
    import sys
    import time

    from patchkit.base.confined import NotPlain
    from patchkit.engine import registry
    from patchkit.image import context

    folder, outside, out = _world(tmp_path)
    wheel = tmp_path / "sglang_patchkit-0.1.0-py3-none-any.whl"
    target = folder / "team_flag.py"
    original = tmp_path / "original-team_flag.py"
    os.link(target, original)  # the checked inode, kept to swap back in
    with registry.running(registry.PatchSets([str(folder)])):
        planned = context.plan(wheel)
    swapper = subprocess.Popen([sys.executable, "-c", _SWAPPER, str(target), str(original), str(outside / "id_rsa")],
                               stdout=subprocess.PIPE, text=True)
    hit = copied = 0
    try:
        assert swapper.stdout is not None and swapper.stdout.readline() == "swapping\n"
        deadline = time.monotonic() + 20
        while (hit < 3 or copied < 1) and time.monotonic() < deadline:
            try:
                context.write(planned, out.parent)
            except NotPlain as exc:
                assert str(target) in str(exc), exc
                hit += 1
                continue
            except FileNotFoundError:  # caught between the rename of the link and that of the file
                continue
            copied += 1
            bytes_there = (out.parent / "patchkit-patches" / "1" / "team_flag.py").read_bytes()
            # Before: the link followed, the secret copied into the build context.
            assert SECRET not in bytes_there and bytes_there == original.read_bytes()
    finally:
        swapper.kill()
        swapper.wait()
    assert hit >= 3 and copied >= 1, (hit, copied)  # the race was hit, and the copy still works between
    assert not any(SECRET in p.read_bytes() for p in out.parent.rglob("*") if p.is_file())


@pytest.mark.parametrize("name", ["ctx", "ctx/", "sglang_patchkit-0.1.0-py3-none-any.whl", "patchkit-patches"])
def test_an_output_naming_the_context_folder_or_one_of_its_entries_is_exit_2_and_nothing_changed(tmp_path, name):
    """`-o DIR` of the context folder written before (a user giving the folder, as `-o` of a
    folder reads elsewhere) replaced that folder, its Dockerfile, wheel, patch sets and the user's
    own files, by a Dockerfile, and wrote the context into its parent; `-o` naming the wheel or
    `patchkit-patches` put the Dockerfile where the context's own entry goes. Each is exit 2, one
    line naming -o, nothing changed."""
    folder, _, out = _world(tmp_path)
    wheel = tmp_path / "sglang_patchkit-0.1.0-py3-none-any.whl"
    assert _dockerfile(folder, out, wheel).exit_code == 0
    before = _snapshot(tmp_path)
    target = f"{tmp_path}/{name}" if name.startswith("ctx") else f"{out.parent}/{name}"
    result = _dockerfile(folder, Path(target) if not name.endswith("/") else target, wheel)  # type: ignore[arg-type]
    assert result.exit_code == 2, (result.exit_code, result.stdout, result.stderr)
    line = result.stderr.strip()
    assert len(line.splitlines()) == 1 and line.startswith(f"error: -o {target}: "), line
    assert _snapshot(tmp_path) == before
