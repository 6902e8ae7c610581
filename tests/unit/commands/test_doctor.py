"""`patchkit doctor` through the real CLI, the usage errors found before any release is read: one
line, exit 2, the same message in --json (the command on real releases: tests/doctor/test_cli.py)."""

from __future__ import annotations

import pytest

from testing.cli import run
from testing.doctor import model_folder


def assert_json_error(result, code: int, text: str) -> None:
    """--json: `{"error": {"code", "message"}}` on stdout, the same message as the one `error:` line on stderr."""
    assert result.exit_code == code, (result.stdout, result.stderr)
    data = result.json()
    assert set(data) == {"error"} and data["error"]["code"] == code and text in data["error"]["message"], data
    assert result.stderr.strip().splitlines() == [f"error: {data['error']['message']}"]


@pytest.fixture
def model(tmp_path):
    return str(model_folder(tmp_path / "qwen3.8-27b"))


def test_version_and_site_packages_are_exclusive(model):
    result = run("doctor", "--version", "0.5.20", "--site-packages", ".", "--", "--model-path", model)
    assert result.exit_code == 2 and "mutually exclusive" in result.stderr


@pytest.mark.parametrize("args, message", [
    (("--model-path", "m"), "--model-path is not a doctor option; pass the sglang.launch_server arguments after --"),
    (("--gpus", "x", "--", "--model-path", "m"), "Invalid value for '--gpus'"),
    (("--interconnect", "foo", "--", "--model-path", "m"), "Invalid value for '--interconnect'"),
    (("--gpus",), "requires an argument"),
    (("--gpu-memory", "24", "--gpu-free", "30", "--", "--model-path", "m"),
     "--gpu-free 30 is more than --gpu-memory 24"),
])
def test_doctor_usage_errors_are_one_line(args, message):
    result = run("doctor", *args)
    assert result.exit_code == 2, result.stdout + result.stderr
    assert result.stderr.startswith("error: ") and message in result.stderr, result.stderr
    assert result.stderr.count("\n") == 1 and result.stdout == ""


@pytest.mark.parametrize("args, message", [
    (("--json", "--model-path", "m"), "--model-path is not a doctor option"),
    (("--gpus", "0", "--json", "--", "--model-path", "m"), "must be positive"),
    (("--json", "--gpu-memory", "24", "--gpu-free", "30", "--", "--model-path", "m"), "more than --gpu-memory"),
    (("--json", "--gpu-memory", "nan", "--", "--model-path", "m"), "must be positive numbers"),
    (("--json", "--gpu-memory", "inf", "--", "--model-path", "m"), "must be positive numbers"),
    (("--json", "--gpu-memory", "80", "--gpu-free", "nan", "--", "--model-path", "m"), "must be positive numbers"),
    (("--json", "--sm", "-1.0", "--", "--model-path", "m"), "--sm -1.0: expected MAJOR.MINOR"),
    (("--json", "--sm", "9.0.1", "--", "--model-path", "m"), "--sm 9.0.1: expected MAJOR.MINOR"),
])
def test_doctor_usage_errors_with_json(args, message):
    assert_json_error(run("doctor", *args), 2, message)


def test_version_banana_is_a_usage_error(model):
    assert_json_error(run("doctor", "--version", "banana", "--json", "--", "--model-path", model), 2, "is not a version")
