"""The Kubernetes example of docs/overlay.md (linked from the README): the shape `kubectl apply --dry-run=client` checks (a Pod with the
required fields, DNS-1123 names, mounts that name declared volumes), and the wiring that makes the
overlay work (the init container writes where the serving container reads, read-only, via PYTHONPATH),
and an install that works while patchkit is not on the package index (this checkout's wheel, from a
ConfigMap)."""

from __future__ import annotations

import re
import shlex
from importlib.metadata import version

import yaml

from testing.releases import REPO

DNS_1123_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")


OVERLAY_DOC = REPO / "docs" / "overlay.md"


def readme_manifest() -> dict:
    text = OVERLAY_DOC.read_text()
    blocks = re.findall(r"```yaml\n(.*?)```", text, flags=re.S)
    assert len(blocks) == 1, "docs/overlay.md holds exactly one YAML block: the Kubernetes example"
    assert "docs/overlay.md" in (REPO / "README.md").read_text(), "the README links the example"
    return yaml.safe_load(blocks[0])


def check_container(container: dict, volumes: set[str]) -> None:
    assert set(container) <= {"name", "image", "command", "args", "env", "volumeMounts", "resources"}
    assert DNS_1123_LABEL.fullmatch(container["name"]) and len(container["name"]) <= 63
    assert isinstance(container["image"], str) and container["image"]
    assert all(isinstance(part, str) for part in container.get("command", []))
    for env in container.get("env", []):
        assert set(env) == {"name", "value"} and isinstance(env["value"], str)
    for mount in container.get("volumeMounts", []):
        assert set(mount) <= {"name", "mountPath", "readOnly"} and mount["name"] in volumes
        assert mount["mountPath"].startswith("/")


def test_pod_shape_is_valid():
    pod = readme_manifest()
    assert pod["apiVersion"] == "v1" and pod["kind"] == "Pod"
    assert set(pod) == {"apiVersion", "kind", "metadata", "spec"}
    assert DNS_1123_LABEL.fullmatch(pod["metadata"]["name"])
    spec = pod["spec"]
    assert set(spec) <= {"volumes", "initContainers", "containers"}
    volumes = {v["name"] for v in spec["volumes"]}
    for volume in spec["volumes"]:
        assert set(volume) in ({"name", "emptyDir"}, {"name", "configMap"})
        if "configMap" in volume:
            assert DNS_1123_LABEL.fullmatch(volume["configMap"]["name"])
    names = [c["name"] for c in spec["initContainers"] + spec["containers"]]
    assert len(names) == len(set(names)), "container names are unique within a pod"
    for container in spec["initContainers"] + spec["containers"]:
        check_container(container, volumes)


def test_init_container_writes_the_overlay_the_server_reads():
    spec = readme_manifest()["spec"]
    (init,), (server,) = spec["initContainers"], spec["containers"]
    assert init["image"] == server["image"]  # same Python, so the release's wheel fits the server
    empty_dirs = {v["name"] for v in spec["volumes"] if "emptyDir" in v}
    writes = {m["name"]: m["mountPath"] for m in init["volumeMounts"] if m["name"] in empty_dirs}
    reads = {m["name"]: m for m in server["volumeMounts"]}
    (volume,) = writes
    assert reads[volume]["readOnly"] is True
    script = init["command"][-1]
    steps = [shlex.split(step) for step in script.split("&&")]
    environments = [dict(token.split("=", 1) for token in step if re.fullmatch(r"[A-Z_]+=.*", token)) for step in steps]
    steps = [[token for token in step if not re.fullmatch(r"[A-Z_]+=.*", token)] for step in steps]
    apply = next(step for step in steps if step[1:2] == ["apply"])
    overlay = apply[apply.index("--fetch") + 1]
    assert overlay.startswith(writes[volume] + "/")
    pythonpath = {e["name"]: e["value"] for e in server["env"]}["PYTHONPATH"]
    assert pythonpath == reads[volume]["mountPath"] + overlay[len(writes[volume]):]
    # The release patchkit fetches is the one in the image tag.
    assert "v" + apply[apply.index("--target") + 1] == server["image"].rsplit(":", 1)[1]
    # patchkit goes into a venv of its own, never into the serving Python.
    assert any("--python" in step and "install" in step for step in steps)
    assert not any(step[:3] == ["python3", "-m", "pip"] and "--python" not in step for step in steps)
    # patchkit is not on the package index: the install names this checkout's wheel, mounted
    # read-only from a ConfigMap.
    install = next(step for step in steps if "install" in step)
    wheel = f"sglang_patchkit-{version('sglang-patchkit')}-py3-none-any.whl"
    config_maps = {v["name"] for v in spec["volumes"] if "configMap" in v}
    mounts = [m for m in init["volumeMounts"] if m["name"] in config_maps and m.get("readOnly")]
    assert any(token in {m["mountPath"] + "/" + wheel for m in mounts} for token in install), install
    at = next(i for i, step in enumerate(steps) if step[1:2] == ["verify"])
    # verify imports the overlay's modules with the serving Python, on the server's PYTHONPATH.
    assert "--strict" in steps[at] and steps[at][steps[at].index("--python") + 1] == server["command"][0]
    assert environments[at]["PYTHONPATH"] == overlay
