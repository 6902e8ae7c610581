"""The patched ModelConfig of real SGLang 0.5.17, imported on the CPU, sizes the MTP draft
by its one MTP layer instead of all 64 layers; with a two-layer MTP head, the patch counts 2 where
upstream's fix (0.5.18+) counts 1, which `status` says."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from testing.behaviour import run_probe
from testing.cli import run

pytestmark = pytest.mark.behaviour

HERE = Path(__file__).parent
CONFIG_DIR = HERE.parent / "fixtures" / "qwen3.8-27b"


def test_draft_layer_count_drops_from_64_to_1(release):
    site = release("0.5.17", whole=True)
    before = run_probe(site, HERE / "probe_mtp_layers.py", str(CONFIG_DIR))
    assert before["sglang_file"].startswith(str(site))
    assert before["architecture"] == "Qwen3_5ForCausalLMMTP"
    assert before["num_nextn_predict_layers"] is None
    assert before["draft_num_layers"] == 64

    assert run("apply", "--target", "0.5.17", "--site-packages", site).exit_code == 0
    after = run_probe(site, HERE / "probe_mtp_layers.py", str(CONFIG_DIR))
    assert after["num_nextn_predict_layers"] == 1
    assert after["draft_num_layers"] == 1


def test_switched_off_the_patched_config_counts_the_releases_64_layers(release, monkeypatch):
    """SGLANG_PATCHKIT_DISABLE=mtp-layer-detection: the patched ModelConfig takes the release's
    own path (64 draft layers); unset, or listing other ids, the patched one (1)."""
    site = release("0.5.17", whole=True)
    assert run("apply", "--target", "0.5.17", "--site-packages", site).exit_code == 0
    monkeypatch.setenv("SGLANG_PATCHKIT_DISABLE", " symm-mem-kill-switch , mtp-layer-detection ")
    off = run_probe(site, HERE / "probe_mtp_layers.py", str(CONFIG_DIR))
    assert (off["num_nextn_predict_layers"], off["draft_num_layers"]) == (None, 64)
    monkeypatch.setenv("SGLANG_PATCHKIT_DISABLE", "symm-mem-kill-switch")
    on = run_probe(site, HERE / "probe_mtp_layers.py", str(CONFIG_DIR))
    assert (on["num_nextn_predict_layers"], on["draft_num_layers"]) == (1, 1)


def test_target_model_is_unchanged_by_the_patch(release):
    """The fallback is for drafts only: the target model keeps num_nextn_predict_layers None."""
    site = release("0.5.17", whole=True)
    assert run("apply", "--site-packages", site).exit_code == 0
    probe = HERE / "probe_target_config.py"
    result = run_probe(site, probe, str(CONFIG_DIR))
    assert result["architecture"] == "Qwen3_5ForConditionalGeneration"
    assert result["num_nextn_predict_layers"] is None


def test_a_two_layer_head_tells_the_patch_from_upstreams_narrower_fix(release, tmp_path):
    config = json.loads((CONFIG_DIR / "config.json").read_text())
    config["text_config"]["mtp_num_hidden_layers"] = 2
    two_layers = tmp_path / "two-layer-mtp"
    two_layers.mkdir()
    (two_layers / "config.json").write_text(json.dumps(config))

    patched = release("0.5.17", whole=True)
    assert run("apply", "--site-packages", patched, "--only", "mtp-layer-detection").exit_code == 0
    said = run_probe(patched, HERE / "probe_mtp_layers.py", str(two_layers))
    assert (said["num_nextn_predict_layers"], said["draft_num_layers"]) == (2, 2)

    upstream = release("0.5.23", whole=True)
    said = run_probe(upstream, HERE / "probe_mtp_layers.py", str(two_layers))
    assert (said["num_nextn_predict_layers"], said["draft_num_layers"]) == (1, 1)  # the checkpoint says 2
    verdict = {p["id"]: p for p in run("status", "--site-packages", upstream, "--json").json()["patches"]}
    assert verdict["mtp-layer-detection"]["state"] == "upstream-fixed"
    assert verdict["mtp-layer-detection"]["detail"].startswith("upstream's fix is narrower than this patch")
