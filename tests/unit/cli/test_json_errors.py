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


@pytest.mark.parametrize("args, code, text", [
    (["new", "Bad", "--target", "sglang/x.py"], 2, "lowercase words"),
    (["manifest", "update", "banana"], 2, "not a version"),
    (["manifest", "update", "0.5.17", "--out", "/nonexistent/folder"], 2, "not a folder"),
    (["manifest", "check", "banana"], 2, "not a version"),
    (["image", "dockerfile", "--base", "b", "--target", "banana"], 2, "not a version"),
    (["image", "dockerfile", "--base", "b", "--target", "0.5.3"], 3, "no patch set for SGLang 0.5.3"),
    (["image", "build", "--base", "b", "--target", "0.5.17", "-t", "x", "--wheel", "/nonexistent.whl"], 2,
     "no such file"),
    (["image", "build", "--base", "b", "--target", "0.5.17"], 2, "Missing option '-t'"),
])
def test_commands_without_a_target_have_json_errors_too(args, code, text):
    assert_json_error(run(*args, "--json"), code, text)


def test_image_dockerfile_json(tmp_path):
    from patchkit.image import dockerfile

    printed = run("image", "dockerfile", "--base", "lmsysorg/sglang:v0.5.17", "--target", "v0.5.17", "--json")
    assert printed.exit_code == 0, printed.stderr
    data = printed.json()
    from patchkit.image.context import WHEEL_NAME

    spec = dockerfile.ImageSpec(base="lmsysorg/sglang:v0.5.17", version="0.5.17", wheel=WHEEL_NAME)
    assert data == {"sglang": "0.5.17", "path": None, "dockerfile": dockerfile.render(spec),
                    "labels": dockerfile.labels(spec), "context_needs": [WHEEL_NAME], "context_written": False}
    wheel = tmp_path / "sglang_patchkit-0.1.0-py3-none-any.whl"
    wheel.write_bytes(b"")
    out = tmp_path / "Dockerfile"
    written = run("image", "dockerfile", "--base", "b", "--target", "0.5.17", "--wheel", wheel, "-o", out, "--json")
    assert written.exit_code == 0, written.stderr
    assert written.json()["path"] == str(out) and out.read_text() == written.json()["dockerfile"]
    assert written.json()["context_needs"] == [wheel.name] and written.json()["context_written"]


def test_image_build_json(monkeypatch, tmp_path):
    """The build's own output goes to stderr; stdout is the result (the builder is stubbed here:
    tests/integration/test_image_build.py builds real images). The wheel is a stand-in given with
    --wheel: building patchkit's own needs pip's build dependencies from the index, and this tier
    is offline."""
    from patchkit.image import builder, dockerfile
    from patchkit.image.context import WHEEL_NAME

    wheel = tmp_path / WHEEL_NAME
    wheel.write_bytes(b"a stand-in: the stubbed builder never installs it")

    monkeypatch.setattr(builder, "choose", lambda requested: ("podman", []))
    monkeypatch.setattr(builder, "build", lambda chosen, context, tag, echo: echo("STEP 1/3: FROM b"))
    monkeypatch.setattr(builder, "push", lambda chosen, tag, ref, echo: "sha256:" + "a" * 64)
    result = run("image", "build", "--base", "b", "--target", "0.5.17", "-t", "img:1", "--push", "reg/img:1",
                 "--wheel", wheel, "--json")
    assert result.exit_code == 0, result.stderr
    assert result.json() == {"tag": "img:1", "builder": "podman", "sglang": "0.5.17",
                             "patches": dockerfile.patch_labels("0.5.17"),
                             "pushed": {"ref": "reg/img:1", "digest": "sha256:" + "a" * 64}}
    assert "building img:1 with podman" in result.stderr and "STEP 1/3" in result.stderr


def test_new_json(tmp_path):
    (tmp_path / "tests").mkdir()
    result = run("new", "scheduler-leak", "--target", "sglang/srt/managers/scheduler.py", "--out", tmp_path, "--json")
    assert result.exit_code == 0, result.stderr
    data = result.json()
    assert data["id"] == "scheduler-leak"
    assert data["module"] == str(tmp_path / "scheduler_leak.py") and (tmp_path / "scheduler_leak.py").is_file()
    assert data["test"] == str(tmp_path / "tests" / "test_scheduler_leak.py") and "pytest" in data["next"]
