"""A group typed without a command (bare `patchkit`, `patchkit image`, `patchkit manifest`: the
first thing people type) prints its help as `--help` does, on stdout with real line breaks, and
exits 0 (issue 43.1); click 8.2 made it a usage error, printed as one `error:` line holding a
literal `\\n` per line break, exit 2."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest


def patchkit(*args: str) -> subprocess.CompletedProcess[str]:
    """The installed `patchkit` script, as a user's shell runs it."""
    return subprocess.run([Path(sys.executable).with_name("patchkit"), *args], capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize("group", [(), ("image",), ("manifest",)], ids=lambda g: " ".join(("patchkit", *g)))
def test_a_group_without_a_command_prints_its_help(group):
    bare = patchkit(*group)
    assert (bare.returncode, bare.stderr) == (0, "")
    assert bare.stdout == patchkit(*group, "--help").stdout
    assert bare.stdout.startswith(f"Usage: {' '.join(('patchkit', *group))} [OPTIONS] COMMAND [ARGS]...\n\n")
    assert "\\n" not in bare.stdout and "Commands:\n" in bare.stdout and "Exit codes:\n" in bare.stdout
