"""The runtime report in SGLang's real scheduler code (0.5.14, 0.5.17, 0.5.22, 0.5.23), found through
the dist-info on PYTHONPATH (the read-only overlay way): the log line of `load_plugins()`, the
`patchkit` field of the real `get_internal_state`, the gauge exported through the multiprocess
collector by another process; `verify --url` against that /server_info served locally; revert
leaves the folder as installed. One probe per release (a spawned child: ~40 s)."""

from __future__ import annotations

import json

import pytest

from testing import behaviour
from testing.cli import run
from testing.releases import snapshot
from testing.server_info import serving

pytestmark = [pytest.mark.behaviour, pytest.mark.slow]

PROBE = __import__("pathlib").Path(__file__).with_name("probe_runtime_report.py")


def without_bytecode(tree: dict[str, str]) -> dict[str, str]:
    """The probe imported SGLang from the tree, so Python wrote bytecode caches into sglang/; the
    runtime report's own folders must be gone whole, caches included."""
    return {rel: v for rel, v in tree.items() if not (rel.startswith("sglang/") and "__pycache__" in rel)}


@pytest.mark.parametrize("version", ["0.5.14", "0.5.17", "0.5.22", "0.5.23"])
def test_every_scheduler_process_reports_what_it_runs(release, version):
    site = release(version, whole=True)
    installed = snapshot(site)
    assert run("apply", "--site-packages", site).exit_code == 0
    state = json.loads((site / ".patchkit/state.json").read_text())
    digests = {pid: d for record in state["files"].values() for pid, d in record["patch_sha256"].items()}
    assert set(digests) == set(state["patches"]) and state["runtime"]["files"]

    probe = behaviour.run_probe(site, PROBE)
    # Found through the overlay's dist-info, loaded by the real load_plugins(): one line.
    assert not probe["loaded_before"] and probe["plugin_file"] == str(site / "sglang_patchkit_runtime/__init__.py")
    [line] = probe["log"]
    assert line.startswith(f"patchkit: pid={probe['child_pid']} rank=dp1-tp0-pp0 sglang={version} active="), line
    active = line.split(" active=")[1].split(" ")[0].split(",")
    assert sorted(active) == sorted(f"{pid}@{d[:12]}" for pid, d in digests.items()), line
    assert line.endswith(" drifted=-"), line

    # The real get_internal_state, wrapped by SGLang's HookRegistry: SGLang's fields and ours.
    assert probe["hooked"], probe
    assert "internal_state" in probe, probe.get("internal_state_error")
    internal = probe["internal_state"]
    assert internal["stand_in"] is True, internal
    report = internal["patchkit"]
    assert report["sglang"] == version and report["patchkit_version"] == state["patchkit_version"]
    assert report["path"] == str(site / "sglang") and report["drifted"] == [] and report["error"] is None
    assert {p["id"]: (p["state"], p["sha256"]) for p in report["patches"]} == {
        pid: ("active", d) for pid, d in digests.items()}
    assert (report["dp_rank"], report["tp_rank"]) == (1, 0)

    # Set in the child, exported by this (parent) process's multiprocess collector.
    assert sorted(probe["metrics"]) == sorted(
        f'sglang:patchkit_patch_active{{patch="{pid}",sha256="{d}"}} 1.0' for pid, d in digests.items())

    # verify --url against that /server_info: passes; the same with one patch missing fails naming it.
    info = {"version": version, "internal_states": [internal]}
    with serving(info) as url:
        ok = run("verify", "--url", url, "--json")
        assert ok.exit_code == 0, (ok.stdout, ok.stderr)
        assert ok.json()["ranks"][0]["ok"] and ok.json()["ranks"][0]["dp_rank"] == 1
    dropped = state["patches"][0]
    internal["patchkit"]["patches"] = [p for p in report["patches"] if p["id"] != dropped]
    with serving(info) as url:
        missing = run("verify", "--url", url)
        assert missing.exit_code == 1 and f"missing   {dropped}:" in missing.stdout, missing.stdout

    assert run("revert", "--site-packages", site).exit_code == 0
    assert without_bytecode(snapshot(site)) == without_bytecode(installed)
