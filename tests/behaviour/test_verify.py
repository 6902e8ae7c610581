"""`patchkit verify` on a real patched environment: a virtual environment whose packages are
the behaviour environment's (torch, transformers, ...) with SGLang 0.5.17 installed in it."""

from __future__ import annotations

import shutil
import venv

import pytest

from testing import behaviour
from testing.cli import run
from testing.releases import pristine

pytestmark = pytest.mark.behaviour

AG = "sglang/srt/distributed/device_communicators/triton_symm_mem_ag.py"


@pytest.fixture
def patched_env(tmp_path):
    env = tmp_path / "env"
    venv.EnvBuilder(with_pip=False).create(env)
    site = next((env / "lib").glob("python3*/site-packages"))
    deps = next((behaviour.python().parent.parent / "lib").glob("python3*/site-packages"))
    (site / "behaviour-deps.pth").write_text(f"{deps}\n")
    source = pristine("0.5.17")
    for entry in ("sglang", "sglang-0.5.17.dist-info"):
        shutil.copytree(source / entry, site / entry)
    assert run("apply", "--target", "0.5.17", "--site-packages", site).exit_code == 0
    return env, site


def checks(result) -> dict[str, dict]:
    return {c["check"]: c for c in result.json()["checks"]}


def test_verify_passes_then_catches_drift_and_a_removed_hook(patched_env):
    env, site = patched_env
    python = env / "bin" / "python"
    ok = run("verify", "--python", python, "--strict", "--json")
    assert ok.exit_code == 0, ok.stdout
    report = checks(ok)
    assert report[f"import {AG[:-3].replace('/', '.')}"]["result"] == "ok"
    assert report["hook symm-mem-kill-switch"] == {
        "check": "hook symm-mem-kill-switch", "result": "ok",
        "detail": "active; inactive with SGLANG_PATCH_DISABLE_SYMM_MEM=0",
    }
    assert all(c["result"] == "ok" for c in report.values())
    # The default finds the venv's own interpreter for its site-packages.
    assert run("verify", "--site-packages", site, "--strict").exit_code == 0

    # The venv in place: SGLang's real load_plugins() finds the runtime report in site-packages;
    # SGLANG_PLUGINS without `patchkit` keeps it out, and verify says how to include it.
    [line] = behaviour.load_plugins_lines(python)
    assert line.startswith("patchkit: pid=") and " sglang=0.5.17 active=" in line and "mtp-layer-detection@" in line
    assert line.endswith(" drifted=-"), line
    assert behaviour.load_plugins_lines(python, {"SGLANG_PLUGINS": "other"}) == []

    # SGLANG_PATCHKIT_DISABLE: the kill switch takes the release's own path (torch's functions are
    # not wrapped in the real module), the report says so and names the id that cannot be switched off.
    from patchkit.patches.symm_mem_kill_switch import SymmMemKillSwitch
    from patchkit.runtime.verify import _child

    off = {"SGLANG_PATCHKIT_DISABLE": "symm-mem-kill-switch"}
    hook = {"symm-mem-kill-switch": SymmMemKillSwitch.RUNTIME_HOOK}
    assert _child(str(python), site, [], hook, off)["hooks"]["symm-mem-kill-switch"][0] == "inactive"
    [switched] = behaviour.load_plugins_lines(
        python, {"SGLANG_PATCHKIT_DISABLE": "symm-mem-kill-switch, mtp-layer-detection,eagle3-capture-hook"})
    fields = dict(item.split("=", 1) for item in switched.split(" ")[1:])
    assert set(fields["disabled"].split(",")) == {"symm-mem-kill-switch", "mtp-layer-detection"}, switched
    assert fields["cannot-disable"] == "eagle3-capture-hook", switched
    active = {item.split("@")[0] for item in fields["active"].split(",")}
    assert "eagle3-capture-hook" in active and not active & {"symm-mem-kill-switch", "mtp-layer-detection"}, switched

    # One byte changed in a patched file: drifted.
    config = site / "sglang/srt/configs/model_config.py"
    data = bytearray(config.read_bytes())
    data[-2] = ord("#") if data[-2] != ord("#") else ord(" ")
    config.write_bytes(bytes(data))
    drifted = run("verify", "--python", python, "--json")
    assert drifted.exit_code == 1
    assert checks(drifted)["sglang/srt/configs/model_config.py"]["detail"].startswith("drifted")
    # ...and so it is in the process: the report names the file and drops the patch from `active`.
    [line] = behaviour.load_plugins_lines(python)
    assert line.endswith(" drifted=sglang/srt/configs/model_config.py") and "mtp-layer-detection@" not in line, line

    # The switch's call removed from the module: the hook check names it.
    ag = site / AG
    ag.write_text(ag.read_text().replace("\n_patchkit_symm_mem_kill_switch()\n", "\n"))
    hookless = run("verify", "--python", python)
    assert hookless.exit_code == 1
    assert "hook symm-mem-kill-switch" in hookless.stdout
    assert "runtime hook of symm-mem-kill-switch is not active" in hookless.stdout


def test_strict_fails_on_an_unpatched_release(tmp_path):
    site = tmp_path / "site"
    shutil.copytree(pristine("0.5.17"), site)
    result = run("verify", "--site-packages", site, "--strict")
    assert result.exit_code == 1
    assert "patch mtp-layer-detection is pending: this release needs it" in result.stdout
    assert run("verify", "--site-packages", site).exit_code == 0  # not strict: nothing applied, nothing broken
