"""`patchkit revert` on a patched venv, then a real SGLang server from it: it serves, with no
runtime report anywhere (no line, no `/server_info` field, no gauge), and `verify --url` says that
the server carries none (exit 3)."""

from __future__ import annotations

import pytest

from testing import server, server_checks
from testing.cli import run
from testing.server_checks import Served

pytestmark = pytest.mark.server


@pytest.fixture(scope="module")
def reverted(version, launch, tmp_path_factory) -> Served:
    python = server.python_for(version, tmp_path_factory.mktemp(f"venv-{version}"))
    assert run("apply", "--python", python).exit_code == 0
    site = server.site_packages(python.parents[1])
    assert (site / "sglang_patchkit_runtime").is_dir()
    assert run("revert", "--python", python).exit_code == 0
    assert not (site / "sglang_patchkit_runtime").exists() and not (site / ".patchkit" / "state.json").exists()
    return Served(launch(python), site, {})


def test_it_serves(reverted):
    assert server_checks.generate(reverted.server)["meta_info"]["completion_tokens"] == 8


def test_no_report_anywhere(reverted):
    assert reverted.server.patchkit_lines() == []
    [rank] = server_checks.server_info(reverted.server)["internal_states"]
    assert "patchkit" not in rank and rank  # SGLang's own fields are there
    assert server_checks.gauge(reverted.server) == {}


def test_verify_url_says_there_is_no_report(reverted):
    result = run("verify", "--url", reverted.server.url)
    assert result.exit_code == 3, (result.stdout, result.stderr)
    assert f"(SGLang {reverted.server.version}) carries no patchkit runtime report" in result.stderr, result.stderr
