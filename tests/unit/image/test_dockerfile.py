"""`image dockerfile` / `image build` on the command line, offline: the Dockerfile's instructions
and labels read by a real Dockerfile parser (from the committed manifests, no release read), the
values that could inject an instruction refused with nothing written, and the builder search.
Building and running an image is tests/integration/test_image.py and test_image_build.py."""

from __future__ import annotations

import re

import pytest
from dockerfile_parse import DockerfileParser

from testing.cli import run


def parsed(text: str) -> list[dict]:
    parser = DockerfileParser(fileobj=__import__("io").BytesIO(text.encode()))
    return parser.structure


def test_instructions_and_labels():
    result = run("image", "dockerfile", "--base", "lmsysorg/sglang:v0.5.17", "--target", "0.5.17")
    assert result.exit_code == 0, result.stderr
    steps = [(s["instruction"], s["value"]) for s in parsed(result.stdout) if s["instruction"] != "COMMENT"]
    assert steps[0] == ("FROM", "lmsysorg/sglang:v0.5.17")  # the base first: patch changes never re-pull it
    runs = [value for instruction, value in steps if instruction == "RUN"]
    # The running patchkit itself, from its wheel in the build context (it is on no package index).
    assert steps[1] == ("COPY", "sglang_patchkit-0.1.0-py3-none-any.whl "
                                "/opt/patchkit/dist/sglang_patchkit-0.1.0-py3-none-any.whl")
    assert runs[0] == ("python3 -m venv --without-pip /opt/patchkit/venv"
                       "  && python3 -m pip --python /opt/patchkit/venv/bin/python install --no-cache-dir"
                       " --disable-pip-version-check /opt/patchkit/dist/sglang_patchkit-0.1.0-py3-none-any.whl")
    assert "the build context must hold sglang_patchkit-0.1.0-py3-none-any.whl" in result.stderr
    assert "patchkit apply" in runs[1] and "--target 0.5.17" in runs[1]
    assert runs[1] == ("/opt/patchkit/venv/bin/patchkit apply --python python3 --target 0.5.17"
                       "  && /opt/patchkit/venv/bin/patchkit verify --python python3 --strict")
    assert not any("pip install" in run and "--python" not in run for run in runs)  # never the serving Python
    labels = DockerfileParser(fileobj=__import__("io").BytesIO(result.stdout.encode())).labels
    assert labels["io.patchkit.sglang"] == "0.5.17"
    assert labels["io.patchkit.version"] == "0.1.0"
    listed = dict(item.split("@sha256:") for item in labels["io.patchkit.patches"].split(","))
    assert sorted(listed) == ["autoround-packed-mapping", "cpu-offload-tied-params", "draft-lmhead-placeholder",
                              "eagle3-capture-hook", "fp4-kv-sm100", "fp8-kv-triton-sm89", "gdn-cutedsl-decode-sm90",
                              "mamba-slot-graceful", "moe-w2-presharded", "mtp-draft-kv-budget", "mtp-layer-detection",
                              "symm-mem-kill-switch"]
    assert all(re.fullmatch("[0-9a-f]{64}", digest) for digest in listed.values())
    assert {pid: labels[f"io.patchkit.patch.{pid}"] for pid in listed} == {p: f"sha256:{d}" for p, d in listed.items()}
    on_0_5_19 = DockerfileParser(fileobj=__import__("io").BytesIO(
        run("image", "dockerfile", "--base", "b", "--target", "0.5.19").stdout.encode())).labels
    assert "mtp-layer-detection" not in on_0_5_19["io.patchkit.patches"]  # upstream-fixed there


def test_tag_spelling_is_accepted_and_patchkit_gets_a_normal_version():
    tagged = run("image", "dockerfile", "--base", "lmsysorg/sglang:v0.5.17", "--target", "v0.5.17")
    plain = run("image", "dockerfile", "--base", "lmsysorg/sglang:v0.5.17", "--target", "0.5.17")
    assert tagged.exit_code == 0 and tagged.stdout == plain.stdout  # same inputs, same text
    assert "v0.5.17" not in tagged.stdout.replace("lmsysorg/sglang:v0.5.17", "")


def test_a_fifo_as_ca_cert_or_wheel_is_exit_6_not_no_such_file(tmp_path):
    import os

    fifo = tmp_path / "corp.pem"
    os.mkfifo(fifo)
    out = tmp_path / "Dockerfile"
    for option in ("--ca-cert", "--wheel"):
        result = run("image", "dockerfile", "--base", "b", "--target", "0.5.17", option, fifo, "-o", out)
        assert result.exit_code == 6 and f"{option} {fifo}: not a regular file" in result.stderr, result.stderr
        assert not out.exists()


def test_a_ca_cert_path_with_a_newline_stays_one_line(tmp_path):
    ca = tmp_path / "corp\nRUN id.pem"
    ca.write_text("-----BEGIN CERTIFICATE-----\n")
    result = run("image", "dockerfile", "--base", "b", "--target", "0.5.17", "--ca-cert", ca)
    assert result.exit_code == 0, result.stderr
    said = [line for line in result.stderr.splitlines() if "as patchkit-ca-certificates.crt" in line]
    assert said and "\\nRUN id.pem" in said[0] and not any(line.startswith("RUN id") for line in result.stderr.splitlines())


def test_bad_input_is_one_line_and_writes_nothing(tmp_path):
    out = tmp_path / "Dockerfile"
    for args, code, message in [
        (("--target", "banana"), 2, "--target banana: not a version"),
        (("--target", "0.4.0"), 3, "no patch set for SGLang 0.4.0"),
        (("--target", "0.5.17", "--ca-cert", tmp_path / "none.pem"), 2, "--ca-cert"),
        (("--target", "0.5.17", "--wheel", tmp_path / "none.whl"), 2, "--wheel"),
    ]:
        result = run("image", "dockerfile", "--base", "b", *args, "-o", out)
        assert result.exit_code == code and message in result.stderr, (args, result.stderr)
        assert len(result.stderr.strip().splitlines()) == 1 and not out.exists()


def test_build_without_any_builder_names_what_was_tried(monkeypatch, tmp_path):
    monkeypatch.setenv("PATH", str(tmp_path))
    result = run("image", "build", "--base", "b", "--target", "0.5.17", "-t", "x")
    assert result.exit_code == 1
    assert result.stderr.strip() == (
        "error: no container builder answers (tried docker: not installed; podman: not installed; "
        "buildah: not installed); install and start one, or write the Dockerfile with "
        "`patchkit image dockerfile` and build it elsewhere")


def test_auto_skips_a_docker_client_without_a_daemon(monkeypatch, tmp_path):
    """A docker client whose daemon does not answer is not a builder; a named builder must answer."""
    fake = tmp_path / "docker"
    fake.write_text("#!/bin/sh\necho 'Cannot connect to the Docker daemon at unix:///var/run/docker.sock.' >&2\n"
                    "exit 1\n")
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", str(tmp_path))
    result = run("image", "build", "--base", "b", "--target", "0.5.17", "-t", "x", "--builder", "docker")
    assert result.exit_code == 1
    assert result.stderr.startswith("error: no container builder answers (tried docker: Cannot connect to the "
                                    "Docker daemon")
    result = run("image", "build", "--base", "b", "--target", "0.5.17", "-t", "x")
    assert "docker: Cannot connect" in result.stderr and "podman: not installed" in result.stderr


INJECTED_BASE = "IMG\nFROM IMG\nRUN echo INJECTED; id -u"
INJECTED_PYTHON = "python3\nFROM IMG\nRUN touch /pwned #"


@pytest.mark.parametrize("args, message", [
    (("--base", INJECTED_BASE), "--base 'IMG\\nFROM IMG\\nRUN echo INJECTED; id -u': not an image reference"),
    (("--base", "b", "--python", INJECTED_PYTHON), "--python 'python3\\nFROM IMG\\nRUN touch /pwned #': not an "
                                                   "interpreter path"),
    (("--base", "lmsysorg/sglang:v0.5.17 AS x"), "not an image reference"),
    (("--base", "lmsysorg/sglang:v0.5.17\r"), "not an image reference"),
    (("--base", "lmsysorg/sglang:${TAG}"), "not an image reference"),
    (("--base", "Lmsysorg/Sglang"), "not an image reference"),
    (("--base", "lmsysorg/sglang:v0.5.17@sha256:abc"), "not an image reference"),
    (("--base", "a" * 256), "not an image reference"),
    (("--base", "b", "--python", "python3 -c 'import os'"), "not an interpreter path"),
    (("--base", "b", "--python", "/usr/bin/python3;id"), "not an interpreter path"),
    (("--base", "b", "--python", "$(id)"), "not an interpreter path"),
    (("--base", "b", "--python", "bin/python"), "not an interpreter path"),
    (("--base", "b", "--python", "/opt/my venv/bin/python"), "not an interpreter path"),
    (("--base", "b", "--python", "'python3'"), "not an interpreter path"),
    (("--base", "b", "--python", "-Ic"), "not an interpreter path"),
    (("--base", "b", "--python", "/opt/../bin/python"), "not an interpreter path"),
    (("--base", "b", "--python", "/opt/./python"), "not an interpreter path"),
])
def test_a_value_that_could_inject_an_instruction_is_refused_and_nothing_written(tmp_path, args, message):
    out = tmp_path / "Dockerfile"
    result = run("image", "dockerfile", "--target", "0.5.17", *args, "-o", out)
    assert result.exit_code == 2, (result.stdout, result.stderr)
    assert result.stderr.count("\n") == 1 and result.stderr.startswith("error: ") and message in result.stderr
    assert not out.exists() and result.stdout == ""


def test_a_wheel_whose_name_could_inject_is_refused(tmp_path):
    wheel = tmp_path / "x.whl\nRUN id #"
    wheel.write_bytes(b"PK")
    out = tmp_path / "Dockerfile"
    result = run("image", "dockerfile", "--base", "b", "--target", "0.5.17", "--wheel", wheel, "-o", out)
    assert result.exit_code == 2 and "--wheel 'x.whl\\nRUN id #': the file name must be a plain name" in result.stderr
    assert result.stderr.count("\n") == 1 and not out.exists()


@pytest.mark.parametrize("option, value", [("-t", "x\nFROM y"), ("-t", "x y"), ("--push", "reg/x:1;id")])
def test_build_refuses_a_tag_or_push_reference_before_looking_for_a_builder(monkeypatch, tmp_path, option, value):
    monkeypatch.setenv("PATH", str(tmp_path))  # no builder: a refusal must come first, and say why
    args = {"-t": "x", option: value}
    result = run("image", "build", "--base", "b", "--target", "0.5.17", *[a for kv in args.items() for a in kv])
    assert result.exit_code == 2, result.stderr
    assert result.stderr.count("\n") == 1 and "not an image reference" in result.stderr


def test_valid_references_and_interpreters_are_accepted():
    for base in ("b", "lmsysorg/sglang:v0.5.17-cu129", "localhost:5000/team/sglang:v0.5.17",
                 "[::1]:5000/sglang@sha256:" + "0" * 64, "docker.io/lmsysorg/sglang:v0.5.17@sha256:" + "a" * 64,
                 "ghcr.io/a__b/c-d.e/f--g:Tag_1.2-x"):
        for python in ("python3", "/opt/conda/bin/python3.11", "/usr/bin/python3", "/work/.venv/bin/python"):
            result = run("image", "dockerfile", "--base", base, "--target", "0.5.17", "--python", python)
            assert result.exit_code == 0, (base, python, result.stderr)
            assert f"FROM {base}\n" in result.stdout


def test_a_base_tagged_with_another_version_is_refused_before_the_build():
    """`--target 0.5.12` for a base tagged v0.5.12.post1 wrote an `apply --target 0.5.12` step that
    failed in the build on the post1 tree: the tag that is a version must be --target's."""
    result = run("image", "dockerfile", "--base", "lmsysorg/sglang:v0.5.12.post1", "--target", "0.5.12")
    assert result.exit_code == 3, result.stderr
    assert "0.5.12.post1" in result.stderr and "--target 0.5.12.post1" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1 and not result.stdout
