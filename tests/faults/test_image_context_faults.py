"""Faults at `image dockerfile -o`'s writes: the build context (the wheel, the --ca-cert file, the
Dockerfile, `patchkit-patches/`) is made in a staging folder inside the -o folder, then renamed
into place. EIO or ENOSPC injected by strace at the first and the last write, fsync and rename
that touch the folder (each seen delivered), a full tmpfs, a read-only folder, and an EIO while
the --ca-cert file is read: each run exits 6 with one line, and the folder, which holds an earlier
run's context and a file of the user's, is as it was, byte for byte (docs/faults.md)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from testing import write_faults
from testing.releases import tree
from testing.sweep import delivery_problem, strace_options
from tests.integration.test_external_patch_sets import write_patch

pytestmark = [pytest.mark.faults, pytest.mark.slow, pytest.mark.integration]

BIG = 200 * 1024  # a data file of the set: more than the full tmpfs has room for


def _world(root: Path) -> tuple[Path, tuple[str, ...]]:
    """A home, a patch set (a module patch, a data file), a wheel, a CA file, and the context folder
    holding an earlier run's context and the user's file; the command that writes a new one there."""
    home = root / "home"
    home.mkdir()
    folder = root / "team-patches"
    write_patch(folder, "team-flag")
    (folder / "data.bin").write_bytes(b"\1" * BIG)
    wheel = root / "sglang_patchkit-0.1.0-py3-none-any.whl"
    wheel.write_bytes(b"PK-1")
    cert = root / "corp.crt"
    cert.write_bytes(b"-----BEGIN CERTIFICATE-----\nearlier\n")
    ctx = root / "ctx"
    ctx.mkdir()
    (ctx / "mine.txt").write_bytes(b"the user's\n")
    args = ("--patches", str(folder), "image", "dockerfile", "--base", "b", "--target", "0.5.17", "--wheel",
            str(wheel), "--ca-cert", str(cert), "-o", str(ctx / "Dockerfile"))
    earlier = write_faults.run(args, root, home)
    assert earlier.returncode == 0, earlier.stderr
    # What the next run changes: every part of the context.
    (folder / "team_flag.py").write_text((folder / "team_flag.py").read_text() + "# edited\n")
    (folder / "data.bin").write_bytes(b"\2" * BIG)
    wheel.write_bytes(b"PK-2")
    cert.write_bytes(b"-----BEGIN CERTIFICATE-----\nnew\n")
    return home, args


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    root = tmp_path_factory.mktemp("image-faults")
    home, args = _world(root)
    return root, home, args


def test_an_injected_error_at_a_write_of_the_context_leaves_the_folder_as_it_was(strace, world):
    root, home, args = world
    ctx = root / "ctx"
    kept = root / "ctx-before"
    shutil.copytree(ctx, kept, symlinks=True)
    write_faults.each_write_fault(strace, args, root, home, ctx, kept, root)


def test_an_error_reading_the_ca_cert_leaves_the_folder_as_it_was(strace, world):
    """Before: the cert was copied after the wheel, `patchkit-patches/` and the Dockerfile were in
    place, so this failure left them replaced beside the earlier cert."""
    root, home, args = world
    ctx = root / "ctx"
    before = tree(ctx)
    cert = args[args.index("--ca-cert") + 1]
    log = root / "cert.strace"
    reads = "read,sendfile,copy_file_range"  # however the copy reads it (shutil.copyfile: sendfile)
    argv = [strace, *strace_options(strace, "error"), "-f", "-qq", "-o", str(log), "-P", cert, "-e", f"trace={reads}",
            "-e", f"inject={reads}:error=EIO:when=1"]
    proc = subprocess.run([*argv, "--", *write_faults.command(args)], cwd=root, env=write_faults.env(home),
                          capture_output=True, text=True, timeout=write_faults.TIMEOUT)
    assert delivery_problem("read", "error=EIO", False, proc.returncode, log.read_text()) is None, log.read_text()
    write_faults.failed_as_it_was(proc, ctx, before, "EIO")


def test_a_full_file_system_leaves_the_context_folder_as_it_was(world, tmp_path):
    why = write_faults.cannot_mount()
    if why:
        pytest.skip(f"a full tmpfs cannot be mounted: {why}")
    root, home, args = world
    start = lambda small: shutil.copytree(root / "ctx", small / "ctx", symlinks=True)  # noqa: E731
    with write_faults.full_tmpfs(tmp_path / "small", 64 * 1024, start) as small:
        ctx = small / "ctx"
        free = write_faults.free_bytes(small)
        assert free < BIG, free  # the set's data file cannot fit: the fault is real
        moved = tuple(str(ctx / "Dockerfile") if a == str(root / "ctx" / "Dockerfile") else a for a in args)
        before = tree(ctx)
        proc = write_faults.run(moved, root, home)
        write_faults.failed_as_it_was(proc, ctx, before, "ENOSPC")


def test_a_read_only_context_folder_is_left_as_it_was(world):
    root, home, args = world
    ctx = root / "ctx"
    before = tree(ctx)
    with write_faults.read_only(ctx) as how:
        proc = write_faults.run(args, root, home)
    write_faults.failed_as_it_was(proc, ctx, before, "EROFS" if "mount" in how else "EACCES")
