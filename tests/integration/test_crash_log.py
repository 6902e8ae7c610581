"""The crash log of an unexpected error: what a bug report needs above the traceback."""

from __future__ import annotations

import platform
import sys

import pytest

from patchkit import __version__
from patchkit.base import crash_log
from testing.cli import run

pytestmark = pytest.mark.integration


def test_crash_log_names_versions_platform_and_argv(release, monkeypatch, patchkit_home):
    from patchkit.engine import planning

    def boom(*args, **kwargs):
        raise RuntimeError("kaboom")

    monkeypatch.setattr(planning, "plan_apply", boom)
    monkeypatch.setattr(sys, "argv", ["patchkit", "apply", "--site-packages", "SITE"])
    result = run("apply", "--site-packages", release("0.5.17"))
    assert result.exit_code == 70, result.stderr
    (log,) = (patchkit_home / "logs").iterdir()
    fields = dict(line.split(": ", 1) for line in log.read_text().split("\n\n", 1)[0].splitlines())
    assert fields == {
        "patchkit": __version__,
        "sglang": "0.5.17",
        "python": f"{platform.python_version()} ({sys.executable})",
        "platform": platform.platform(),
        "argv": "patchkit apply --site-packages SITE",
    }
    assert "RuntimeError: kaboom" in log.read_text() and str(log) in result.stderr
