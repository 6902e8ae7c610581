"""Patched images built for real with podman (the recipe in testing/containers.py), from local
Debian bases holding a real SGLang release, pushed to a local registry and pulled back by digest."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from patchkit.image import dockerfile
from patchkit.releases import manifest
from testing.cli import fully_applied, run
from testing.containers import HOST_CAS, Podman, Registry, base_tar, require_builder, scratch_dir
from testing import behaviour
from testing.releases import HOME, REPO, copy_release, pristine, source_project

pytestmark = [pytest.mark.integration, pytest.mark.slow]

VERSION = "0.5.17"
PREFIX = "localhost/patchkit-test"
SITE = "/usr/local/lib/python3.11/dist-packages"  # where Debian's pip installs into the system Python
PATCHKIT = f"{dockerfile.VENV}/bin/patchkit"
DEPS = "/opt/sglang-deps"


@pytest.fixture(scope="module")
def scratch(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("images")


@pytest.fixture(scope="module")
def stores():
    """Where the private podman stores go: memory when there is room (builds are I/O-bound here)."""
    with scratch_dir() as path:
        yield path


@pytest.fixture(scope="module")
def registry(scratch):
    require_builder()
    server = Registry(scratch / "registry")
    yield server
    server.stop()


@pytest.fixture(scope="module")
def deps() -> Path:
    """SGLang's dependencies (torch, transformers, ...): the behaviour tests' CPU environment.

    Real images have them installed; here they are mounted read-only into every container and
    build step (containers.conf `volumes`) and put on the system Python's path by a .pth file, so
    that `verify --strict` in the build imports the patched modules for real."""
    return next((Path(behaviour.python()).parent.parent / "lib").glob("python3*/site-packages"))


@pytest.fixture(scope="module")
def podman(stores, registry, deps):
    engine = Podman.create(stores / "podman", insecure_registries=(registry.address,),
                           volumes=(f"{deps}:{DEPS}:ro",))
    yield engine
    engine.remove_store()


@pytest.fixture(scope="module")
def wheel(patchkit_wheel) -> Path:
    """patchkit as a wheel, as a user would build or download it (built once per session)."""
    return patchkit_wheel


@pytest.fixture(scope="module")
def debian(podman, scratch) -> str:
    """The Debian base (system Python marked externally managed), imported from the cached tar."""
    podman("import", "--change", "ENV PIP_BREAK_SYSTEM_PACKAGES=1", base_tar(), f"{PREFIX}/debian:bare")
    return derive(podman, f"{PREFIX}/debian:{VERSION}", scratch / "debian", (
        f"FROM {PREFIX}/debian:bare\n"
        f"RUN mkdir -p {SITE} && echo {DEPS} > {SITE}/sglang-deps.pth\n"
        # The deps bring certifi's own bundle, which would shadow Debian's system store for pip (as
        # in real images): pip's configuration points it at the system store holding the proxy's CA.
        "ENV PIP_CERT=/etc/ssl/certs/ca-certificates.crt\n"
    ))


def derive(podman: Podman, tag: str, context: Path, dockerfile_text: str, files: dict[str, Path] = {}) -> str:
    context.mkdir(parents=True, exist_ok=True)
    (context / "Dockerfile").write_text(dockerfile_text)
    for name, source in files.items():
        os.link(source, context / name) if source.stat().st_dev == context.stat().st_dev else \
            (context / name).write_bytes(source.read_bytes())
    podman.build(tag, context)
    return tag


@pytest.fixture(scope="module")
def plain(podman, debian, scratch) -> str:
    """(b) `pip install --no-deps sglang==X` into the system Python (a PEP 668 base)."""
    pristine(VERSION)
    sglang_wheel = next((HOME / "wheels").glob(f"sglang-{VERSION}-*.whl"))
    return derive(podman, f"{PREFIX}/sglang-plain:v{VERSION}", scratch / "plain", (
        f"FROM {debian}\n"
        f"COPY {sglang_wheel.name} /tmp/\n"
        f"RUN python3 -m pip install --no-cache-dir --no-deps /tmp/{sglang_wheel.name} && rm /tmp/{sglang_wheel.name}\n"
    ), {sglang_wheel.name: sglang_wheel})


def patchkit_image(podman: Podman, *args: str | Path) -> subprocess.CompletedProcess:
    """`patchkit image ...` as a user runs it, under the private podman configuration."""
    return subprocess.run([sys.executable, "-m", "patchkit", "image", *map(str, args)], env=podman.env,
                          capture_output=True, text=True, timeout=1800)


@pytest.fixture(scope="module")
def plain_patched(podman, plain, wheel, registry):
    """The patched plain image, built with `--builder auto` and pushed to the local registry."""
    tag = f"{PREFIX}/sglang-plain:v{VERSION}-patched"
    ref = f"{registry.address}/sglang:v{VERSION}-patched"
    result = patchkit_image(podman, "build", "--base", plain, "--target", f"v{VERSION}", "--wheel", wheel,
                            "-t", tag, "--push", ref)
    assert result.returncode == 0, result.stderr[-4000:]
    return tag, ref, result


@pytest.fixture(scope="module")
def reference(scratch) -> dict[str, str]:
    """{file: sha256} of the files the release's applicable patches change, patched on the host: what
    the image must hold, byte for byte."""
    site = copy_release(VERSION, scratch / "host")
    assert run("apply", "--site-packages", site).exit_code == 0
    files = sorted({f for entry in manifest.load(VERSION).patches.values() if entry.verdict == "applies" for f in entry.files})
    return {f: hashlib.sha256((site / f).read_bytes()).hexdigest() for f in files}


def imported_files(podman: Podman, image: str, files: list[str]) -> dict[str, str]:
    """{file: sha256} of the files the image's Python imports for these modules (found as Python finds them)."""
    code = ("import hashlib, importlib.util, json, os, sys\n"
            "root = os.path.dirname(importlib.util.find_spec('sglang').submodule_search_locations[0])\n"
            "print(json.dumps({f: hashlib.sha256(open(os.path.join(root, f), 'rb').read()).hexdigest() "
            "for f in sys.argv[1:]}))")
    return json.loads(podman.run(image, "python3", "-c", code, *files).stdout)


def test_auto_picks_the_builder_that_answers_and_says_which(plain_patched):
    _, _, result = plain_patched
    first = result.stdout.splitlines()[0]
    assert first.startswith(f"building {PREFIX}/sglang-plain:v{VERSION}-patched with podman"), result.stdout
    if "docker" in first:  # a docker client without a daemon here: named with its reason, then skipped
        assert "skipped docker:" in first


def test_plain_image_is_patched_verified_and_labelled(plain_patched, podman, reference):
    tag, _, result = plain_patched
    count = len(dockerfile.patch_labels(VERSION))
    assert f"built {tag} with podman: SGLang {VERSION}, {count} patches applied and verified" in result.stdout
    status = json.loads(podman.run(tag, PATCHKIT, "status", "--python", "python3", "--json").stdout)
    assert status["sglang"]["version"] == VERSION
    assert {p["id"]: p["state"] for p in status["patches"]} == fully_applied(VERSION)
    # verify in the image imported every patched module with the image's Python, for real.
    verified = json.loads(podman.run(tag, PATCHKIT, "verify", "--python", "python3", "--strict", "--json").stdout)
    imports = {c["check"]: c["result"] for c in verified["checks"] if c["check"].startswith("import ")}
    modules = {"import " + f.removesuffix(".py").replace("/", ".") for f in reference}
    assert imports == dict.fromkeys(modules, "ok"), verified["checks"]
    # What the serving Python imports is byte-identical to the release patched on the host.
    assert imported_files(podman, tag, sorted(reference)) == reference
    # Labels: exactly the promised ones, a function of the inputs only.
    spec = dockerfile.ImageSpec(base=f"{PREFIX}/sglang-plain:v{VERSION}", version=VERSION)
    labels = {k: v for k, v in podman.labels(tag).items() if not k.startswith("io.buildah.")}
    assert labels == dockerfile.labels(spec)
    assert set(k.removeprefix("io.patchkit.patch.") for k in labels if k.startswith("io.patchkit.patch.")) == \
        set(dockerfile.patch_labels(VERSION))


def test_serving_python_gets_no_patchkit(plain_patched, podman):
    tag = plain_patched[0]
    probe = "import importlib.util as u; print([m for m in ('patchkit', 'libcst') if u.find_spec(m)])"
    assert podman.run(tag, "python3", "-c", probe).stdout.strip() == "[]"
    assert podman.run(tag, f"{dockerfile.VENV}/bin/python", "-c", "import patchkit, libcst").returncode == 0
    # The base stays externally managed: patchkit never needed an override of PEP 668.
    marker = podman.run(tag, "sh", "-c", "ls /usr/lib/python3*/EXTERNALLY-MANAGED").stdout
    assert "EXTERNALLY-MANAGED" in marker


def test_pushed_image_pulls_back_by_digest(plain_patched, stores, registry):
    tag, ref, result = plain_patched
    pushed = [line for line in result.stdout.splitlines() if line.startswith("pushed ")]
    assert len(pushed) == 1 and pushed[0].startswith(f"pushed {ref}@sha256:"), result.stdout
    digest = pushed[0].split("@", 1)[1]
    elsewhere = Podman.create(stores / "elsewhere", insecure_registries=(registry.address,))  # another machine
    try:
        by_digest = f"{ref.rsplit(':', 1)[0]}@{digest}"
        elsewhere("pull", "--quiet", by_digest)
        pulled = elsewhere.labels(by_digest)
        assert pulled["io.patchkit.patches"] == dockerfile.labels(
            dockerfile.ImageSpec(base="b", version=VERSION))["io.patchkit.patches"]
        listed = elsewhere("images", "--digests", "--format", "{{.Digest}}").stdout.split()
        assert digest in listed
    finally:
        elsewhere.remove_store()


def test_a_patch_that_fails_fails_the_build_with_patchkits_message(podman, plain, wheel, scratch):
    corrupted = derive(podman, f"{PREFIX}/sglang-corrupted:v{VERSION}", scratch / "corrupted", (
        f"FROM {plain}\n"
        f"RUN printf 'def broken(:\\n' >> {SITE}/sglang/srt/configs/model_config.py\n"
    ))
    result = patchkit_image(podman, "build", "--base", corrupted, "--target", VERSION, "--wheel", wheel,
                            "-t", f"{PREFIX}/never:latest")
    assert result.returncode == 1, result.stdout + result.stderr
    last = result.stderr.strip().splitlines()[-1]
    assert last.startswith(f"error: podman build of {PREFIX}/never:latest failed (exit 1): error: "), last
    assert "model_config.py" in last
    assert podman("image", "exists", f"{PREFIX}/never:latest", check=False).returncode != 0


def test_ca_cert_lets_pip_through_a_proxy_the_base_does_not_trust(podman, plain, wheel, scratch):
    cas = sorted(HOST_CAS.glob("*.crt"))
    if not cas:
        pytest.skip(f"no extra CA certificates in {HOST_CAS}: no intercepting proxy to test against")
    bundle = scratch / "proxy-ca.pem"
    bundle.write_bytes(b"".join(ca.read_bytes().rstrip(b"\n") + b"\n" for ca in cas))
    untrusting = derive(podman, f"{PREFIX}/sglang-no-ca:v{VERSION}", scratch / "no-ca", (
        f"FROM {plain}\n"
        "RUN rm -f /usr/local/share/ca-certificates/*.crt && update-ca-certificates --fresh >/dev/null\n"
    ))
    # The premise: without the proxy's CA, pip in this base cannot reach the index.
    refused = podman.run(untrusting, "python3", "-m", "pip", "download", "--retries", "0", "--no-deps", "-d",
                         "/tmp/x", "click==8.1.7", check=False)
    assert refused.returncode != 0 and "CERTIFICATE_VERIFY_FAILED" in refused.stdout + refused.stderr
    tag = f"{PREFIX}/sglang-no-ca:v{VERSION}-patched"
    result = patchkit_image(podman, "build", "--base", untrusting, "--target", VERSION, "--wheel", wheel,
                            "--ca-cert", bundle, "-t", tag)
    assert result.returncode == 0, result.stderr[-4000:]
    status = json.loads(podman.run(tag, PATCHKIT, "status", "--python", "python3", "--json").stdout)
    assert {p["id"]: p["state"] for p in status["patches"]} == fully_applied(VERSION)


def test_buildah_builds_the_same_image(podman, plain, wheel, registry, plain_patched, reference):
    """Same inputs, another builder: the same labels and the same patched bytes; its push works too."""
    if shutil.which("buildah") is None:
        pytest.skip("no buildah here (`.ci/run` installs it with apt-get)")
    tag = f"{PREFIX}/sglang-plain:v{VERSION}-buildah"
    ref = f"{registry.address}/sglang:v{VERSION}-buildah"
    result = patchkit_image(podman, "build", "--base", plain, "--target", VERSION, "--wheel", wheel,
                            "--builder", "buildah", "-t", tag, "--push", ref)
    assert result.returncode == 0, result.stderr[-4000:]
    assert result.stdout.splitlines()[0] == f"building {tag} with buildah"
    assert result.stdout.splitlines()[-1].startswith(f"pushed {ref}@sha256:")

    def own(labels: dict[str, str]) -> dict[str, str]:
        return {k: v for k, v in labels.items() if not k.startswith("io.buildah.")}

    assert own(podman.labels(tag)) == own(podman.labels(plain_patched[0]))
    assert imported_files(podman, tag, sorted(reference)) == reference


WORKSPACE = "/sgl-workspace/sglang/python"


@pytest.fixture(scope="module")
def official(podman, debian, scratch) -> str:
    """(a) The official images' layout: the release's source at /sgl-workspace/sglang/python,
    installed editable (`pip install -e`, dependencies left out) into the system Python."""
    context = scratch / "official"
    source_project(VERSION, context / "python")
    return derive(podman, f"{PREFIX}/sglang-official:v{VERSION}", context, (
        f"FROM {debian}\n"
        f"COPY python {WORKSPACE}\n"
        f"RUN python3 -m pip install --no-cache-dir --no-deps --no-build-isolation -e {WORKSPACE}\n"
    ))


def test_official_layout_image_is_patched_where_python_imports_sglang(podman, official, wheel, reference):
    tag = f"{PREFIX}/sglang-official:v{VERSION}-patched"
    result = patchkit_image(podman, "build", "--base", official, "--target", f"v{VERSION}", "--wheel", wheel,
                            "--builder", "podman", "-t", tag)
    assert result.returncode == 0, result.stderr[-4000:]
    status = json.loads(podman.run(tag, PATCHKIT, "status", "--python", "python3", "--json").stdout)
    assert status["sglang"]["version"] == VERSION
    assert {p["id"]: p["state"] for p in status["patches"]} == fully_applied(VERSION)
    origin = podman.run(tag, "python3", "-c", "import importlib.util; print(importlib.util.find_spec('sglang').origin)")
    assert origin.stdout.strip() == f"{WORKSPACE}/sglang/__init__.py"
    assert imported_files(podman, tag, sorted(reference)) == reference
    labels = {k: v for k, v in podman.labels(tag).items() if not k.startswith("io.buildah.")}
    assert labels == dockerfile.labels(dockerfile.ImageSpec(base=official, version=VERSION))


def test_a_refused_value_never_reaches_the_builder(podman, plain):
    """The injections of issue 18.2 against a real podman: refused (exit 2) before any build."""
    before = podman("images", "-q", "--no-trunc").stdout.split()
    for option, value in (("--base", f"{plain}\nFROM {plain}\nRUN echo INJECTED; id -u"),
                          ("--python", f"python3\nFROM {plain}\nRUN touch /pwned #")):
        args = {"--base": plain, option: value}
        result = patchkit_image(podman, "build", *[a for kv in args.items() for a in kv], "--target", VERSION,
                                "-t", f"{PREFIX}/injected:latest", "--builder", "podman")
        assert result.returncode == 2, result.stdout + result.stderr
        assert result.stdout == "" and result.stderr.count("\n") == 1 and option in result.stderr
    assert podman("image", "exists", f"{PREFIX}/injected:latest", check=False).returncode != 0
    assert podman("images", "-q", "--no-trunc").stdout.split() == before


def test_an_image_built_with_patches_dir_carries_and_applies_that_patch(podman, plain, scratch):
    """No --wheel: the running patchkit (its wheel built from this checkout) and the --patches set
    go into the context; the image applies the outside patch with the built-in ones, its status
    shows it, its labels name it with its digest."""
    from patchkit.engine import identity, registry
    from tests.integration.test_external_patch_sets import VERSION_FILE, write_patch

    folder = scratch / "team-patches"
    module = write_patch(folder, "team-flag")
    tag = f"{PREFIX}/sglang-plain:v{VERSION}-team"
    result = subprocess.run([sys.executable, "-m", "patchkit", "--patches", folder, "image", "build", "--base", plain,
                             "--target", VERSION, "-t", tag, "--builder", "podman"], env=podman.env,
                            capture_output=True, text=True, timeout=1800)
    assert result.returncode == 0, result.stderr[-4000:]
    count = len(dockerfile.patch_labels(VERSION)) + 1
    assert f"built {tag} with podman: SGLang {VERSION}, {count} patches applied and verified" in result.stdout
    status = json.loads(podman.run(tag, PATCHKIT, "status", "--python", "python3", "--json").stdout)
    states = {p["id"]: p["state"] for p in status["patches"]}
    assert states == {**fully_applied(VERSION), "team-flag": "applied"}
    flag = podman.run(tag, "python3", "-c", "import sglang.version as v; print(v.PATCHKIT_EXTERNAL_EXAMPLE)")
    assert flag.stdout.strip() == "True"
    carried = podman.run(tag, "cat", f"{dockerfile.PATCHES}/1/{module.name}").stdout
    assert carried == module.read_text()
    labels = podman.labels(tag)
    with registry.running(registry.PatchSets([str(folder)])):
        assert labels["io.patchkit.patch.team-flag"] == f"sha256:{identity.digest('team-flag')}"
        assert f"team-flag@sha256:{identity.digest('team-flag')}" in labels["io.patchkit.patches"]
    assert VERSION_FILE == "sglang/version.py"
