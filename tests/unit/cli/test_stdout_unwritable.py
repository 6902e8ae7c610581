"""A full or closed stdout (issue 43.4): `patchkit status --json > /dev/full` (ENOSPC) and
`patchkit list >&-` gave a double raw traceback and exit 1. Exit 6 and one `error:` line naming
stdout, never a traceback; a closed stdout runs nothing. Real children of the installed script,
through a real shell's redirections, with Python's default buffering and with PYTHONUNBUFFERED (the
write then fails inside the command rather than at the last flush)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from testing import synthetic

PATCHKIT = Path(sys.executable).with_name("patchkit")
FULL = Path("/dev/full")
BUFFERING = {"buffered": None, "unbuffered": "1"}

needs_dev_full = pytest.mark.skipif(not FULL.exists(), reason="no /dev/full on this system")


def shell(command: str, home: Path, unbuffered: str | None) -> subprocess.CompletedProcess[str]:
    """`command` with $PATCHKIT the installed script, in sh (its redirections are the user's)."""
    env = {**os.environ, "PATCHKIT": str(PATCHKIT), "PATCHKIT_HOME": str(home)}
    env.pop("PYTHONUNBUFFERED", None)
    if unbuffered:
        env["PYTHONUNBUFFERED"] = unbuffered
    return subprocess.run(["sh", "-c", command], capture_output=True, text=True, env=env, timeout=120)


def error_lines(result: subprocess.CompletedProcess[str]) -> list[str]:
    """The `error:` lines on stderr (a warning may come before them); never a traceback."""
    assert "Traceback" not in result.stderr and "Exception ignored" not in result.stderr, result.stderr
    return [line for line in result.stderr.splitlines() if line.startswith("error: ")]


def one_error_line(result: subprocess.CompletedProcess[str]) -> str:
    (line,) = error_lines(result)
    return line


@needs_dev_full
@pytest.mark.parametrize("unbuffered", BUFFERING.values(), ids=BUFFERING.keys())
@pytest.mark.parametrize("args", ["list", "list --json", "--help", "--version", "", "manifest"])
def test_a_full_stdout_is_exit_6_and_one_line(args, unbuffered, tmp_path):
    result = shell(f'"$PATCHKIT" {args} > /dev/full', tmp_path, unbuffered)
    assert one_error_line(result).startswith("error: <stdout>: No space left on device (ENOSPC)"), result.stderr
    assert result.returncode == 6, result.stderr


@needs_dev_full
@pytest.mark.parametrize("unbuffered", BUFFERING.values(), ids=BUFFERING.keys())
def test_an_error_that_stdout_cannot_take_is_said_on_stderr(unbuffered, tmp_path):
    """`status --json` where no SGLang is installed (the issue's line): exit 3, and its JSON error
    cannot be written either."""
    result = shell('"$PATCHKIT" status --json > /dev/full', tmp_path, unbuffered)
    assert error_lines(result) == [
        "error: SGLang is not installed for this Python; pass --site-packages DIR, --source DIR or --python PATH",
        "error: <stdout>: No space left on device (ENOSPC); the command had finished (exit 3 otherwise)"]
    assert result.returncode == 6


@needs_dev_full
@pytest.mark.parametrize("unbuffered", BUFFERING.values(), ids=BUFFERING.keys())
def test_apply_to_a_full_stdout_applies_and_says_what_failed(unbuffered, tmp_path):
    site = synthetic.make_tree(tmp_path / "site")
    patches = synthetic.write_patches(tmp_path / "patches")
    result = shell(f'"$PATCHKIT" --patches {patches} apply --site-packages {site} > /dev/full', tmp_path,
                   unbuffered)
    assert one_error_line(result).startswith("error: <stdout>: No space left on device (ENOSPC)"), result.stderr
    assert result.returncode == 6
    assert (site / synthetic.ALPHA).read_text() == synthetic.patched_alpha()  # the work was done


@pytest.mark.parametrize("args", ["list", "status --json", "--help", "apply --site-packages {site}"])
def test_a_closed_stdout_is_exit_6_and_changes_nothing(args, tmp_path):
    site = synthetic.make_tree(tmp_path / "site")
    before = (site / synthetic.ALPHA).read_bytes()
    patches = synthetic.write_patches(tmp_path / "patches")
    result = shell(f'"$PATCHKIT" --patches {patches} {args.format(site=site)} >&-', tmp_path, None)
    assert one_error_line(result) == "error: stdout is closed; nothing was done (to discard the output: > /dev/null)"
    assert result.returncode == 6
    assert (site / synthetic.ALPHA).read_bytes() == before and not (site / ".patchkit").exists()


def test_a_closed_stderr_alone_is_no_error(tmp_path):
    """`2>&-`: the messages go nowhere, the command runs (fd 2 taken by the null device, so that no
    file patchkit opens gets it)."""
    result = shell('"$PATCHKIT" list 2>&-', tmp_path, None)
    assert result.returncode == 0 and "autoround-packed-mapping" in result.stdout
    both = shell('"$PATCHKIT" list >&- 2>&-', tmp_path, None)
    assert (both.returncode, both.stdout, both.stderr) == (6, "", "")
