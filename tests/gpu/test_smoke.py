"""The patched engine on a GPU: what a CPU cannot show (see conftest.py for how it runs)."""

from __future__ import annotations

import threading

import pytest

from testing.cli import states
from tests.gpu.conftest import Server, draft_weight_gb, last_int, tiny_qwen3_5

pytestmark = pytest.mark.gpu

NEXTN = ("--speculative-algorithm", "NEXTN", "--speculative-num-steps", "1", "--speculative-eagle-topk", "1",
         "--speculative-num-draft-tokens", "2", "--mem-fraction-static", "0.5", "--context-length", "65536")


def serve_and_read(overlay, model, log, *args) -> str:
    server = Server(overlay, model, log, *args)
    try:
        server.wait_ready()
        return server.text()
    finally:
        server.stop()


def test_mtp_layer_detection_grows_the_kv_pool(tmp_path, overlays):
    plain, patched = overlays("mtp-layer-detection")
    if states(patched)["mtp-layer-detection"] != "applied":
        pytest.skip("this SGLang release does not need mtp-layer-detection")
    layers, interval = 8, 4
    model = tiny_qwen3_5(tmp_path / "model", layers, interval)
    args = (*NEXTN, "--speculative-draft-model-path", str(model))
    before = last_int(r"max_total_num_tokens=(\d+)", serve_and_read(plain, model, tmp_path / "plain.log", *args))
    after = last_int(r"max_total_num_tokens=(\d+)", serve_and_read(patched, model, tmp_path / "patched.log", *args))
    kv_layers = layers // interval
    # Cell scaled by 1 + all_layers/kv_layers before, by 1 + mtp_layers/kv_layers after.
    expected = (1 + layers / kv_layers) / (1 + 1 / kv_layers)
    assert after / before == pytest.approx(expected, rel=0.15), (before, after, expected)


def test_draft_lmhead_placeholder_shrinks_the_draft_load(tmp_path, overlays):
    plain, patched = overlays("draft-lmhead-placeholder")
    model = tiny_qwen3_5(tmp_path / "model")
    args = (*NEXTN, "--speculative-draft-model-path", str(model))
    before = draft_weight_gb(serve_and_read(plain, model, tmp_path / "plain.log", *args))
    after = draft_weight_gb(serve_and_read(patched, model, tmp_path / "patched.log", *args))
    vocab_layers_gb = 2 * 32768 * 256 * 2 / 2**30  # embed_tokens + lm_head, bf16
    assert before - after >= 0.8 * vocab_layers_gb, (before, after)


def test_two_long_prompts_with_few_mamba_slots_keep_the_server_up(tmp_path, overlays):
    _, patched = overlays("mamba-slot-graceful")
    model = tiny_qwen3_5(tmp_path / "model")
    server = Server(patched, model, tmp_path / "patched.log", "--chunked-prefill-size", "2048",
                    "--max-mamba-cache-size", "4", "--mem-fraction-static", "0.5", "--context-length", "65536")
    try:
        server.wait_ready()
        results, errors = [], []

        def one(seed: int) -> None:
            try:
                results.append(server.generate([(seed * 7919 + i) % 30000 + 10 for i in range(60000)]))
            except Exception as exc:  # noqa: BLE001 - reported below
                errors.append(exc)

        threads = [threading.Thread(target=one, args=(seed,)) for seed in (1, 2)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=1800)
        assert not errors and len(results) == 2, (errors, server.text()[-4000:])
        assert server.healthy(), server.text()[-4000:]
        assert "Can not alloc mamba cache" not in server.text()
    finally:
        server.stop()


def test_tp2_starts_with_the_kill_switch_on(tmp_path, overlays):
    import torch

    if torch.cuda.device_count() < 2:
        pytest.skip("needs two GPUs")
    _, patched = overlays("symm-mem-kill-switch")
    model = tiny_qwen3_5(tmp_path / "model")
    text = serve_and_read(patched, model, tmp_path / "tp2.log", "--tp-size", "2", "--mem-fraction-static", "0.5")
    assert "max_total_num_tokens=" in text
