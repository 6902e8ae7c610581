"""apply / status / dry-run / diff / revert on real SGLang releases from the package index."""

from __future__ import annotations

import hashlib
import json

import pytest

from patchkit.releases import manifest
from patchkit.engine import registry
from testing.cli import fully_applied, run, states
from testing.releases import MODEL_CONFIG, pristine, snapshot

pytestmark = pytest.mark.integration

# What 0.5.17 needs (from its code, recorded in manifests/0.5.17.json), in registry order:
# derived, so that adding a patch does not break these tests.
NEEDED_0_5_17 = [pid for pid in registry.patch_ids() if manifest.load("0.5.17").patches[pid].verdict == "applies"]
APPLIED_0_5_17 = fully_applied("0.5.17")  # every patch's state once all that apply there are applied
assert {"mtp-layer-detection", "draft-lmhead-placeholder"} <= set(NEEDED_0_5_17)
FALLBACK = b'getattr(\n                self.hf_text_config, "mtp_num_hidden_layers", None\n            )'


def sha(path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def manifest_sha(version: str, rel: str) -> str:
    from patchkit.releases import manifest

    return manifest.load(version).files[rel]


def test_apply_patches_0_5_17(release):
    site = release("0.5.17")
    result = run("apply", "--target", "0.5.17", "--site-packages", site)
    assert result.exit_code == 0, result.stderr
    assert "applied         mtp-layer-detection" in result.stdout
    patched = (site / MODEL_CONFIG).read_bytes()
    assert FALLBACK in patched
    state = json.loads((site / ".patchkit/state.json").read_text())
    record = state["files"][MODEL_CONFIG]
    assert state["patches"] == NEEDED_0_5_17
    assert state["sglang_version"] == "0.5.17" and state["patchkit_version"]
    assert record["pristine_sha256"] == manifest_sha("0.5.17", MODEL_CONFIG)
    assert record["patched_sha256"] == hashlib.sha256(patched).hexdigest()
    assert (site / ".patchkit/backups" / MODEL_CONFIG).read_bytes() == (pristine("0.5.17") / MODEL_CONFIG).read_bytes()


def test_second_apply_changes_no_byte_and_says_so(release):
    site = release("0.5.17")
    assert run("apply", "--site-packages", site).exit_code == 0
    before = snapshot(site)
    mtime = (site / MODEL_CONFIG).stat().st_mtime_ns
    result = run("apply", "--site-packages", site)
    assert result.exit_code == 0
    assert "nothing to do" in result.stdout
    assert snapshot(site) == before
    assert (site / MODEL_CONFIG).stat().st_mtime_ns == mtime


def test_apply_keeps_mode_bits(release):
    site = release("0.5.17")
    (site / MODEL_CONFIG).chmod(0o640)
    assert run("apply", "--site-packages", site).exit_code == 0
    assert (site / MODEL_CONFIG).stat().st_mode & 0o7777 == 0o640
    assert run("revert", "--site-packages", site).exit_code == 0
    assert (site / MODEL_CONFIG).stat().st_mode & 0o7777 == 0o640


def test_status_json_before_and_after(release):
    site = release("0.5.17")
    before = run("status", "--site-packages", site, "--json").json()
    assert before["sglang"] == {"version": "0.5.17", "path": str(site)}
    assert {"id": "mtp-layer-detection", "state": "pending", "files": [MODEL_CONFIG], "detail": ""} in before["patches"]
    assert {p["id"]: p["state"] for p in before["patches"]} == {pid: "pending" if state == "applied" else state
                                                                 for pid, state in APPLIED_0_5_17.items()}
    run("apply", "--site-packages", site)
    assert states(site) == APPLIED_0_5_17


def test_dry_run_prints_diff_and_writes_nothing(release):
    site = release("0.5.17")
    before = snapshot(site)
    result = run("apply", "--site-packages", site, "--dry-run")
    assert result.exit_code == 0
    assert f"+++ b/{MODEL_CONFIG}" in result.stdout
    assert '+                self.hf_text_config, "mtp_num_hidden_layers", None' in result.stdout
    assert snapshot(site) == before
    assert not (site / ".patchkit").exists()


def test_diff_shows_pristine_to_current(release):
    site = release("0.5.17")
    assert run("diff", "--site-packages", site).stdout == ""
    run("apply", "--site-packages", site)
    text = run("diff", "--site-packages", site).stdout
    assert text.startswith(f"--- a/{MODEL_CONFIG}\n+++ b/{MODEL_CONFIG}\n")
    assert "+            self.num_nextn_predict_layers is None\n+            and self.is_draft_model\n" in text


def test_revert_restores_release_bytes_and_leaves_nothing_behind(release):
    site = release("0.5.17")
    listing = sorted(p.relative_to(site).as_posix() for p in site.rglob("*"))
    run("apply", "--site-packages", site)
    result = run("revert", "--site-packages", site)
    assert result.exit_code == 0
    assert "reverted        mtp-layer-detection" in result.stdout
    assert sha(site / MODEL_CONFIG) == manifest_sha("0.5.17", MODEL_CONFIG)
    assert sorted(p.relative_to(site).as_posix() for p in site.rglob("*")) == listing
    again = run("revert", "--site-packages", site)
    assert again.exit_code == 0 and "nothing to revert" in again.stdout


def test_only_and_skip(release):
    site = release("0.5.17")
    skipped = run("apply", "--site-packages", site, "--skip", "mtp-layer-detection")
    assert skipped.exit_code == 0
    assert FALLBACK not in (site / MODEL_CONFIG).read_bytes()
    assert states(site) == {**APPLIED_0_5_17, "mtp-layer-detection": "pending"}
    only = run("apply", "--site-packages", site, "--only", "mtp-layer-detection")
    assert only.exit_code == 0 and FALLBACK in (site / MODEL_CONFIG).read_bytes()
    assert run("revert", "--site-packages", site, "--only", "mtp-layer-detection").exit_code == 0
    assert sha(site / MODEL_CONFIG) == manifest_sha("0.5.17", MODEL_CONFIG)
    assert states(site)["mtp-layer-detection"] == "pending"
    assert states(site)["symm-mem-kill-switch"] == "applied"


def test_unknown_patch_id_is_a_usage_error(release):
    site = release("0.5.17")
    before = snapshot(site)
    result = run("apply", "--site-packages", site, "--only", "no-such-patch")
    assert result.exit_code == 2
    assert "unknown patch id 'no-such-patch'" in result.stderr
    assert snapshot(site) == before


def test_0_5_19_is_upstream_fixed_and_left_alone(release):
    site = release("0.5.19")
    before = snapshot(site)
    assert states(site)["mtp-layer-detection"] == "upstream-fixed"
    result = run("apply", "--target", "0.5.19", "--site-packages", site, "--only", "mtp-layer-detection")
    assert result.exit_code == 0
    assert "upstream-fixed" in result.stdout and "nothing to do" in result.stdout
    assert snapshot(site) == before
    assert run("apply", "--target", "0.5.19", "--site-packages", site).exit_code == 0
    assert (site / MODEL_CONFIG).read_bytes() == (pristine("0.5.19") / MODEL_CONFIG).read_bytes()
    assert states(site)["mtp-layer-detection"] == "upstream-fixed"


def test_upstream_fixed_decided_by_code_not_by_manifest(release, monkeypatch):
    """With no manifest verdict to lean on (hash mismatch), the probe still says upstream-fixed."""
    site = release("0.5.19")
    with open(site / MODEL_CONFIG, "ab") as handle:
        handle.write(b"\n# a local build\n")
    assert states(site)["mtp-layer-detection"] == "upstream-fixed"


def test_reinstalled_release_over_patched_tree_is_reapplied(release):
    """pip reinstalling the same release restores pristine files under a stale state."""
    site = release("0.5.17")
    run("apply", "--site-packages", site)
    (site / MODEL_CONFIG).unlink()
    (site / MODEL_CONFIG).write_bytes((pristine("0.5.17") / MODEL_CONFIG).read_bytes())
    assert states(site)["mtp-layer-detection"] == "pending"
    assert run("apply", "--site-packages", site).exit_code == 0
    assert FALLBACK in (site / MODEL_CONFIG).read_bytes()
    assert (site / ".patchkit/backups" / MODEL_CONFIG).read_bytes() == (pristine("0.5.17") / MODEL_CONFIG).read_bytes()


def test_revert_only_of_a_patch_not_applied_changes_nothing(release):
    site = release("0.5.19")
    assert run("apply", "--site-packages", site, "--only", "symm-mem-kill-switch").exit_code == 0
    before = snapshot(site)
    result = run("revert", "--site-packages", site, "--only", "mamba-slot-graceful")
    assert result.exit_code == 0 and "nothing to revert" in result.stdout
    assert snapshot(site) == before
