"""--json on every command: an error is `{"error": {"code", "message"}}` on stdout, with the same
exit code (and the usual `error:` line on stderr)."""

from __future__ import annotations

import json

import pytest

from testing.cli import run


def assert_json_error(result, code: int, text: str) -> None:
    assert result.exit_code == code, (result.stdout, result.stderr)
    data = json.loads(result.stdout)
    assert set(data) == {"error"} and data["error"]["code"] == code, data
    assert text in data["error"]["message"]
    assert result.stderr.strip().splitlines() == [f"error: {data['error']['message']}"]


@pytest.mark.parametrize("command", ["apply", "status", "revert", "diff", "verify", "clean"])
def test_target_errors(tmp_path, command):
    assert_json_error(run(command, "--site-packages", tmp_path / "nowhere", "--json"), 3, "is not a folder")


@pytest.mark.parametrize("command", ["apply", "status", "revert", "diff"])
def test_not_a_version(tmp_path, command):
    assert_json_error(run(command, "--target", "banana", "--site-packages", tmp_path, "--json"), 2, "not a version")


@pytest.mark.parametrize("args", [
    ["list", "--json", "--bogus"],
    ["status", "--json", "--only", "x"],
    ["track", "--json", "--from", "banana", "--to", "0.5.14"],
    ["matrix", "--json", "--from", "banana"],
    ["apply", "--json", "--source", "a", "--python", "b"],
])
def test_usage_errors(args):
    assert_json_error(run(*args), 2, "")


def test_without_json_errors_stay_on_stderr(tmp_path):
    result = run("status", "--site-packages", tmp_path / "nowhere")
    assert result.exit_code == 3 and result.stdout == ""
