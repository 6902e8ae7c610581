"""The patched-image Dockerfile's RUN steps executed in a fresh virtual environment standing in for
the image's Python, the build context with patchkit's wheel and every patch set, a post release
imaged from its wheel. Its instructions and refusals offline: tests/unit/image/test_dockerfile.py."""

from __future__ import annotations

import json
import subprocess
import venv

import pytest
from dockerfile_parse import DockerfileParser

from patchkit.image.dockerfile import HOME as HOME_DIR
from patchkit.image.dockerfile import WHEEL_DIR
from testing.checkout import wheel_home
from testing.cli import fully_applied, run
from testing.releases import HOME, REPO, pristine
from tests.unit.image.test_dockerfile import parsed

pytestmark = pytest.mark.integration


def test_run_steps_in_a_fresh_venv_produce_a_verified_patched_sglang(tmp_path, patchkit_wheel):
    """Where no container builder exists: the RUN steps, run on the host, with a venv standing in
    for the image's Python and a tmp folder for /opt/patchkit."""
    wheel = patchkit_wheel
    # The stand-in image: a fresh venv with the pristine SGLang 0.5.17 installed, no dependencies.
    image = tmp_path / "image"
    venv.EnvBuilder(with_pip=True).create(image)
    pristine("0.5.17")
    sglang_wheel = next((HOME / "wheels").glob("sglang-0.5.17-*.whl"))
    subprocess.run([image / "bin/python", "-m", "pip", "install", "-q", "--no-deps", sglang_wheel], check=True)
    serving = str(image / "bin/python")

    out = tmp_path / "Dockerfile"
    assert run("image", "dockerfile", "--base", "lmsysorg/sglang:v0.5.17", "--target", "0.5.17",
               "--wheel", wheel, "--python", serving, "--allow-skipped", "-o", out).exit_code == 0
    assert "verify --python" in out.read_text() and "--strict --allow-skipped" in out.read_text()
    steps = [s for s in parsed(out.read_text()) if s["instruction"] in ("COPY", "RUN")]
    opt = tmp_path / "opt-patchkit"
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "PATCHKIT_HOME": str(tmp_path / "pk")}
    for step in steps:
        if step["instruction"] == "COPY":
            source, destination = step["value"].split()
            assert destination == f"{WHEEL_DIR}/{wheel.name}" and source == wheel.name
            (opt / "dist").mkdir(parents=True)
            (opt / "dist" / source).write_bytes(wheel.read_bytes())
            continue
        command = step["value"].replace(HOME_DIR, str(opt))
        # The stand-in has none of SGLang's dependencies: verify's imports cannot run there (the
        # real image builds in test_image_build.py have them), so skipped checks are accepted here.
        command = command.replace(" --strict", " --strict --allow-skipped")
        proc = subprocess.run(["sh", "-c", command], env=env, capture_output=True, text=True)
        assert proc.returncode == 0, f"RUN {command}\n{proc.stdout}\n{proc.stderr}"

    patchkit = opt / "venv/bin/patchkit"
    site = next((image / "lib").glob("python3*/site-packages"))
    status = subprocess.run([patchkit, "status", "--site-packages", site, "--json"], env=env, capture_output=True,
                            text=True)
    states = {p["id"]: p["state"] for p in json.loads(status.stdout)["patches"]}
    assert states == fully_applied("0.5.17")
    # patchkit and its dependencies stayed out of the serving Python.
    probe = "import importlib.util as u; print([m for m in ('patchkit', 'libcst', 'click') if u.find_spec(m)])"
    assert subprocess.run([serving, "-c", probe], capture_output=True, text=True, cwd=tmp_path).stdout.strip() == "[]"
    # A warm restart that applies again is a no-op.
    again = subprocess.run([patchkit, "apply", "--site-packages", site, "--target", "0.5.17"], env=env,
                           capture_output=True, text=True)
    assert again.returncode == 0 and "nothing to do" in again.stdout


def test_python_and_ca_cert_options(tmp_path):
    """With -o the context gets patchkit's wheel, built from this checkout (its build dependencies)."""
    ca = tmp_path / "corp.pem"
    ca.write_text("-----BEGIN CERTIFICATE-----\n")
    out = tmp_path / "Dockerfile"
    result = run("image", "dockerfile", "--base", "b", "--target", "0.5.17", "--python", "/opt/conda/bin/python",
                 "--ca-cert", ca, "-o", out)
    assert result.exit_code == 0, result.stderr
    assert "corp.pem as patchkit-ca-certificates.crt" in result.stdout
    steps = [(s["instruction"], s["value"]) for s in parsed(out.read_text()) if s["instruction"] != "COMMENT"]
    assert ("COPY", "patchkit-ca-certificates.crt /opt/patchkit/ca-certificates.crt") in steps
    runs = [value for instruction, value in steps if instruction == "RUN"]
    assert runs[0].startswith("/opt/conda/bin/python -m venv --without-pip /opt/patchkit/venv")
    assert "--cert /opt/patchkit/ca-certificates.crt" in runs[0]
    assert runs[1].endswith("verify --python /opt/conda/bin/python --strict")


def test_the_context_carries_patchkit_and_every_patch_set(tmp_path):
    """`--patches DIR` and a diff-file set travel into the build context byte for byte, the image
    loads them (ENV) and its labels name each of their patches with its digest."""
    from patchkit.engine import identity, registry
    from tests.integration.test_external_patch_sets import write_patch

    folder = tmp_path / "team-patches"
    module = write_patch(folder, "team-flag")
    (folder / "__pycache__").mkdir()
    (folder / "__pycache__" / "junk.pyc").write_bytes(b"x")
    out = tmp_path / "ctx" / "Dockerfile"
    out.parent.mkdir()
    result = run("--patches", folder, "image", "dockerfile", "--base", "b", "--target", "0.5.17", "-o", out)
    assert result.exit_code == 0, result.stderr
    context = out.parent
    assert (context / "patchkit-patches/1" / module.name).read_bytes() == module.read_bytes()
    assert not (context / "patchkit-patches/1/__pycache__").exists()
    wheel = context / "sglang_patchkit-0.1.0-py3-none-any.whl"
    import zipfile
    with zipfile.ZipFile(wheel) as built:  # the running patchkit, built from this checkout
        assert built.read("patchkit/image/context.py") == (REPO / "patchkit/image/context.py").read_bytes()
    steps = [(s["instruction"], s["value"]) for s in parsed(out.read_text()) if s["instruction"] != "COMMENT"]
    assert ("COPY", "patchkit-patches /opt/patchkit/patches") in steps
    assert ("ENV", "PATCHKIT_PATCHES=/opt/patchkit/patches/1") in steps
    labels = DockerfileParser(fileobj=__import__("io").BytesIO(out.read_text().encode())).labels
    with registry.running(registry.PatchSets([str(folder)])):
        digest = identity.digest("team-flag")
    assert labels["io.patchkit.patch.team-flag"] == f"sha256:{digest}"
    assert f"team-flag@sha256:{digest}" in labels["io.patchkit.patches"]
    assert "wrote" in result.stdout and "patchkit-patches/" in result.stdout


def test_a_post_release_is_imaged_as_the_release_it_is(tmp_path, monkeypatch):
    """A release with no committed manifest (0.5.12.post1: on the index, judged by the patches'
    probes on its wheel, as `apply --target 0.5.12.post1 --fetch DIR` judges it) is imaged: the
    build step names the version installed in the base, the labels the patches that apply there
    (issue 37.3: it was exit 3, "no patch set for SGLang 0.5.12.post1")."""
    version = "0.5.12.post1"
    monkeypatch.setenv("PATCHKIT_HOME", str(wheel_home(tmp_path / "home", (version,))))  # its wheel, cached
    result = run("image", "dockerfile", "--base", f"lmsysorg/sglang:v{version}", "--target", version)
    assert result.exit_code == 0, result.stderr
    runs = [s["value"] for s in parsed(result.stdout) if s["instruction"] == "RUN"]
    assert runs[1] == (f"/opt/patchkit/venv/bin/patchkit apply --python python3 --target {version}"
                       "  && /opt/patchkit/venv/bin/patchkit verify --python python3 --strict")
    labels = DockerfileParser(fileobj=__import__("io").BytesIO(result.stdout.encode())).labels
    assert labels["io.patchkit.sglang"] == version
    status = run("status", "--site-packages", pristine(version), "--json")
    pending = sorted(p["id"] for p in status.json()["patches"] if p["state"] == "pending")
    assert pending and "mamba-slot-graceful" not in pending  # what the probes say on that release's files
    assert sorted(item.split("@sha256:")[0] for item in labels["io.patchkit.patches"].split(",")) == pending
    assert f"SGLang {version} was not verified by patchkit" in result.stderr  # said, as apply says it


