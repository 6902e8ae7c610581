"""The patched-image Dockerfile: parsed by a real Dockerfile parser, and its RUN steps executed
in a fresh virtual environment standing in for the image's Python."""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
import venv

import pytest
from dockerfile_parse import DockerfileParser

from patchkit.dockerfile import WHEEL_DIR
from testing.cli import run
from testing.releases import HOME, REPO, pristine

pytestmark = pytest.mark.integration


def parsed(text: str) -> list[dict]:
    parser = DockerfileParser(fileobj=__import__("io").BytesIO(text.encode()))
    return parser.structure


def test_instructions_and_labels():
    result = run("image", "dockerfile", "--base", "lmsysorg/sglang:v0.5.17", "--target", "0.5.17")
    assert result.exit_code == 0, result.stderr
    steps = [(s["instruction"], s["value"]) for s in parsed(result.stdout) if s["instruction"] != "COMMENT"]
    assert steps[0] == ("FROM", "lmsysorg/sglang:v0.5.17")  # the base first: patch changes never re-pull it
    runs = [value for instruction, value in steps if instruction == "RUN"]
    assert runs == ["python3 -m pip install --no-cache-dir patchkit==0.1.0",
                    "patchkit apply --target 0.5.17 && patchkit verify --strict"]
    labels = DockerfileParser(fileobj=__import__("io").BytesIO(result.stdout.encode())).labels
    assert labels["io.patchkit.sglang"] == "0.5.17"
    listed = dict(item.split("@sha256:") for item in labels["io.patchkit.patches"].split(","))
    assert sorted(listed) == ["autoround-packed-mapping", "draft-lmhead-placeholder", "eagle3-capture-hook",
                              "mamba-slot-graceful", "mtp-layer-detection", "symm-mem-kill-switch"]
    assert all(re.fullmatch("[0-9a-f]{64}", digest) for digest in listed.values())
    on_0_5_19 = DockerfileParser(fileobj=__import__("io").BytesIO(
        run("image", "dockerfile", "--base", "b", "--target", "0.5.19").stdout.encode())).labels
    assert "mtp-layer-detection" not in on_0_5_19["io.patchkit.patches"]  # upstream-fixed there


def test_unknown_release_refused():
    result = run("image", "dockerfile", "--base", "b", "--target", "0.4.0")
    assert result.exit_code == 3 and "no patch set for SGLang 0.4.0" in result.stderr


def test_build_without_any_builder_says_which_are_missing(monkeypatch, tmp_path):
    monkeypatch.setenv("PATH", str(tmp_path))
    result = run("image", "build", "--base", "b", "--target", "0.5.17", "-t", "x")
    assert result.exit_code == 1
    assert "install one of docker, podman, buildah" in result.stderr


def test_run_steps_in_a_fresh_venv_produce_a_verified_patched_sglang(tmp_path):
    wheels = tmp_path / "dist"
    subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(wheels), str(REPO)], check=True)
    wheel = next(wheels.glob("patchkit-*.whl"))
    out = tmp_path / "Dockerfile"
    assert run("image", "dockerfile", "--base", "lmsysorg/sglang:v0.5.17", "--target", "0.5.17",
               "--wheel", wheel, "-o", out).exit_code == 0
    steps = [s for s in parsed(out.read_text()) if s["instruction"] in ("COPY", "RUN")]

    # The stand-in image: a fresh venv with the pristine SGLang 0.5.17 installed, no dependencies.
    image = tmp_path / "image"
    venv.EnvBuilder(with_pip=True).create(image)
    pristine("0.5.17")
    sglang_wheel = next((HOME / "wheels").glob("sglang-0.5.17-*.whl"))
    subprocess.run([image / "bin/python", "-m", "pip", "install", "-q", "--no-deps", sglang_wheel], check=True)
    copied = tmp_path / "copied"
    env = {"PATH": f"{image / 'bin'}:/usr/bin:/bin", "HOME": str(tmp_path), "PATCHKIT_HOME": str(tmp_path / "pk")}
    for step in steps:
        if step["instruction"] == "COPY":
            source, destination = step["value"].split()
            assert destination == f"{WHEEL_DIR}/" and source == wheel.name
            copied.mkdir()
            (copied / source).write_bytes(wheel.read_bytes())
            continue
        command = step["value"].replace(WHEEL_DIR, str(copied))
        proc = subprocess.run(["sh", "-c", command], env=env, capture_output=True, text=True)
        assert proc.returncode == 0, f"RUN {command}\n{proc.stdout}\n{proc.stderr}"

    site = next((image / "lib").glob("python3*/site-packages"))
    status = subprocess.run([image / "bin/patchkit", "status", "--json"], env=env, capture_output=True, text=True)
    import json

    states = {p["id"]: p["state"] for p in json.loads(status.stdout)["patches"]}
    assert set(states.values()) == {"applied"}
    assert json.loads(status.stdout)["sglang"]["path"] == str(site)
    # A warm restart that applies again is a no-op.
    again = subprocess.run(shlex.split("patchkit apply --target 0.5.17"), env=env, capture_output=True, text=True)
    assert again.returncode == 0 and "nothing to do" in again.stdout
