"""The patched ModelConfig of real SGLang 0.5.17, imported on the CPU, sizes the MTP draft
by its one MTP layer instead of all 64 layers."""

from __future__ import annotations

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
