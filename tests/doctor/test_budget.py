"""The budget against figures computed by hand from each release's own sizing code (its arithmetic
without a release: tests/unit/doctor/test_budget.py)."""

from __future__ import annotations

import pytest

from testing.doctor import GIB, model_folder, run

MIB = 1 << 20


@pytest.mark.integration  # reads a real release (testing.releases.pristine): slow tier
def test_worked_check_fp8_kv_per_token(tmp_path):
    # 16 full-attention layers x 4 KV heads x 256 x 2 (K, V) x 1 byte = 32 KiB per token at TP1.
    report = run("0.5.20", ["--model-path", str(model_folder(tmp_path / "m")), "--kv-cache-dtype", "fp8_e4m3",
                            "--mem-fraction-static", "0.88"])
    assert report.budget.full_attention_layers == 16
    assert report.budget.kv_bytes_per_token == 32 * 1024


SPEC_LAUNCH = ["--mem-fraction-static", "0.88", "--kv-cache-dtype", "fp8_e4m3", "--speculative-algorithm", "NEXTN",
               "--max-running-requests", "16", "--context-length", "131072"]
PER_SLOT = 153_944_064  # 146.81 MiB, fp32 SSM state at TP1 (tests/unit/doctor/test_budget.py)
TARGET = 30 * GIB - 100 * MIB  # total_size minus the mtp.* tensors the target does not load
DRAFT = 100 * MIB + 2 * 248320 * 5120 * 2  # mtp.* tensors + the draft's own embedding and lm_head (bf16)


def _launch(folder):
    return ["--model-path", str(folder), "--speculative-draft-model-path", str(folder), *SPEC_LAUNCH]


@pytest.mark.integration  # reads a real release (testing.releases.pristine): slow tier
def test_budget_0_5_15_by_hand(tmp_path):
    """0.5.15: ModelRunnerKVCacheMixin in model_executor/model_runner_kv_cache_mixin.py."""
    folder = model_folder(tmp_path / "m")
    report = run("0.5.15", _launch(folder), gpu_memory=80.0, gpu_free=79.0)
    b = report.budget
    # _profile_available_bytes: available after target + draft weights, minus pre x (1 - mem_fraction_static).
    # draft-lmhead-placeholder is pending on a pristine 0.5.15, so the draft's vocab tensors count.
    rest = 79.0 - (TARGET + DRAFT) / GIB - 79.0 * (1 - 0.88)
    # No mm_runtime_reservation_gb in 0.5.15.
    assert b.multimodal_reserve_bytes == 0
    # _calculate_mamba_ratio: radix cache on, auto -> extra_buffer with overlap: 3 + 2.
    assert b.slots_per_request == 5
    # handle_max_mamba_cache, ratio branch with speculative decoding (no padding slot in 0.5.15):
    #   max_mamba_cache_size = int(mamba_budget_bytes // (per_req * (1 + D / ratio)))
    mamba_budget_bytes = rest * 0.9 / (1 + 0.9) * GIB
    slots = int(mamba_budget_bytes // (PER_SLOT * (1 + 4 / 5)))
    assert b.state_slots == slots == 63
    capped = min(16, slots // 5)  # capped_reqs = min(max_running_requests, max_mamba_cache_size // ratio)
    assert b.intermediate_state_bytes == PER_SLOT * capped * 4 == 7_389_315_072
    rest -= PER_SLOT * capped * 4 / GIB
    assert b.state_pool_bytes == slots * PER_SLOT == 9_698_476_032
    rest -= slots * PER_SLOT / GIB
    # DefaultPoolConfigurator: cell = 4 KV heads x (256 + 256) x 16 layers x 1 byte = 32768, scaled for the draft
    # by 1 + eagle_draft_num_layers / 16; mtp-layer-detection is pending, so the draft counts as all 64 layers.
    assert b.draft_layers == 64
    assert b.kv_bytes_per_token == int(32768 * (1 + 64 / 16)) == 163_840
    tokens = int(rest * GIB) // 163_840
    assert b.kv_tokens == tokens == 123_662
    # _resolve_max_num_reqs: min(16, tokens // 2, max_mamba_cache_size // ratio).
    assert b.effective_max_running_requests == min(16, tokens // 2, slots // 5) == 12
    assert b.max_request_tokens == min(131072 - 1, tokens - 1)


@pytest.mark.integration  # reads a real release (testing.releases.pristine): slow tier
def test_budget_0_5_20_by_hand(tmp_path):
    """0.5.20: KVCacheConfigurator in mem_cache/kv_cache_configurator.py (padding slot, multimodal reserve)."""
    folder = model_folder(tmp_path / "m")
    report = run("0.5.20", _launch(folder), gpu_memory=80.0, gpu_free=79.0)
    b = report.budget
    # _profile_available_bytes: ... - mm_runtime_reservation_gb (SGLANG_VLM_CACHE_SIZE_MB = 100 for a VLM).
    assert b.multimodal_reserve_bytes == int(100 / 1024 * GIB)
    rest = 79.0 - (TARGET + DRAFT) / GIB - 79.0 * (1 - 0.88) - 100 / 1024
    assert b.slots_per_request == 5
    # _handle_max_mamba_cache, ratio branch with speculative decoding, +1 padding slot on both buffers:
    #   K = int((mamba_budget_bytes - per_req * (1 + D)) // (per_req * (1 + D / ratio)))
    mamba_budget_bytes = rest * 0.9 / (1 + 0.9) * GIB
    slots = int((mamba_budget_bytes - PER_SLOT * (1 + 4)) // (PER_SLOT * (1 + 4 / 5)))
    assert b.state_slots == slots == 60
    capped = min(16, slots // 5)
    assert b.intermediate_state_bytes == PER_SLOT * (capped + 1) * 4 == 8_005_091_328
    rest -= PER_SLOT * (capped + 1) * 4 / GIB
    assert b.state_pool_bytes == (slots + 1) * PER_SLOT == 9_390_587_904
    rest -= (slots + 1) * PER_SLOT / GIB
    # mtp-layer-detection is upstream-fixed in 0.5.20: the draft counts as its 1 MTP layer.
    assert b.draft_layers == 1
    assert b.kv_bytes_per_token == int(32768 * (1 + 1 / 16)) == 34_816
    tokens = int(rest * GIB) // 34_816
    assert b.kv_tokens == tokens == 570_086
    assert b.effective_max_running_requests == min(16, tokens // 2, slots // 5) == 12


@pytest.mark.integration  # reads a real release (testing.releases.pristine): slow tier
def test_the_multimodal_reserve_counts_the_cuda_ipc_feature_pool(tmp_path):
    """0.5.20's `mm_runtime_reservation_gb` adds `SGLANG_MM_FEATURE_CACHE_MB` where the transport is cuda_ipc; the
    release writes its default as `EnvInt(1 * 1024)`, a product the env reader refused (the reserve was 100 MiB)."""
    import re

    from testing import releases

    environ_py = (releases.pristine("0.5.20") / "sglang" / "srt" / "environ.py").read_text()
    a, b_ = re.search(r"SGLANG_MM_FEATURE_CACHE_MB = EnvInt\((\d+) \* (\d+)\)", environ_py).groups()
    pool_mib = int(a) * int(b_)
    argv = ["--model-path", str(model_folder(tmp_path / "m")), "--mem-fraction-static", "0.88",
            "--mm-feature-transport", "cuda_ipc"]
    assert run("0.5.20", argv).budget.multimodal_reserve_bytes == int((100 + pool_mib) / 1024 * GIB)
    b = run("0.5.20", argv, environ={"SGLANG_MM_FEATURE_CACHE_MB": "16"}).budget
    assert b.multimodal_reserve_bytes == int((100 + 16) / 1024 * GIB)
    # The transport as the release resolves it, not only as named: the legacy switch turns an unset one to cuda_ipc.
    legacy = run("0.5.20", argv[:-2], environ={"SGLANG_USE_CUDA_IPC_TRANSPORT": "1"}).budget
    assert legacy.multimodal_reserve_bytes == int((100 + pool_mib) / 1024 * GIB)


@pytest.mark.integration  # reads a real release (testing.releases.pristine): slow tier
def test_explicit_cache_size_and_radix_off_paths(tmp_path):
    folder = model_folder(tmp_path / "m")
    base = ["--model-path", str(folder), "--mem-fraction-static", "0.88"]
    b = run("0.5.20", [*base, "--max-mamba-cache-size", "100"]).budget
    assert (b.state_slots, b.state_slots_source, b.state_pool_bytes) == (100, "flag", 101 * PER_SLOT)
    b = run("0.5.15", [*base, "--max-mamba-cache-size", "100"]).budget
    assert b.state_pool_bytes == 100 * PER_SLOT
    b = run("0.5.20", [*base, "--disable-radix-cache", "--max-running-requests", "24"]).budget
    assert (b.state_slots, b.state_slots_source, b.slots_per_request) == (24, "max-running-requests", 1)
    # bf16 SSM state halves the temporal part.
    b = run("0.5.20", [*base, "--mamba-ssm-dtype", "bfloat16"]).budget
    assert round(b.state_slot_bytes / MIB, 2) == 74.81


@pytest.mark.integration  # reads a real release (testing.releases.pristine): slow tier
def test_skip_decode_lock_lowers_the_ratio_where_the_release_reads_it(tmp_path):
    folder = model_folder(tmp_path / "m")
    argv = ["--model-path", str(folder), "--mem-fraction-static", "0.88"]
    env = {"SGLANG_OPT_MAMBA_SKIP_DECODE_LOCK": "1"}
    assert run("0.5.20", argv, environ=env).budget.slots_per_request == 4  # 3 - 1 + 2
    assert run("0.5.15", argv, environ=env).budget.slots_per_request == 5  # 0.5.15 does not read it


@pytest.mark.integration  # reads a real release (testing.releases.pristine): slow tier
def test_dense_model_and_tp(tmp_path):
    config = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "num_hidden_layers": 32,
              "num_attention_heads": 32, "num_key_value_heads": 8, "hidden_size": 4096,
              "max_position_embeddings": 131072, "torch_dtype": "bfloat16"}
    folder = model_folder(tmp_path / "llama", config=config, total_size=16 * GIB, mtp=False)
    b = run("0.5.20", ["--model-path", str(folder), "--tp-size", "2", "--mem-fraction-static", "0.9"],
            gpus=2).budget
    assert not b.hybrid and b.weights_bytes == 8 * GIB
    assert b.kv_bytes_per_token == 4 * 128 * 2 * 32 * 2  # 8 KV heads / TP2 x (128 + 128) x 32 layers x bf16
    rest = 79.0 - 8 - 79.0 * (1 - 0.9)  # not multimodal: no reserve
    assert b.kv_tokens == int(rest * GIB) // b.kv_bytes_per_token


def _ring(record_len):
    # BaseLinearStateParams.replayssm_ring_bytes_per_req, GDN at TP1 with a bf16 conv dtype:
    # d (48 heads x L x 128) + normalized k (16 x L x 128) in bf16, scalar g (48 x L) fp32, plus the
    # bf16 low parts of d and k; over 48 linear layers.
    per_layer = 2 * (48 * record_len * 128 * 2 + 16 * record_len * 128 * 2) + 48 * record_len * 4
    return per_layer * 48


@pytest.mark.integration  # reads a real release (testing.releases.pristine): slow tier
def test_replayssm_budget_by_hand(tmp_path):
    folder = model_folder(tmp_path / "m")
    argv = ["--model-path", str(folder), "--speculative-draft-model-path", str(folder), "--mem-fraction-static",
            "0.88", "--kv-cache-dtype", "fp8_e4m3", "--speculative-algorithm", "NEXTN", "--max-running-requests", "8",
            "--enable-linear-replayssm-spec"]
    # 0.5.20 `_handle_max_mamba_cache`: ReplaySSM drops the intermediate state; GDN rings are one fixed
    # pool of (max_running_requests + 1) rings of linear_replayssm_cache_len = 16 steps, and the ratio
    # branch sizes slots like non-spec: K = int((budget - fixed - per_slot) // per_slot).
    b = run("0.5.20", argv).budget
    fixed = _ring(16) * (8 + 1)
    assert _ring(16) == 25_313_280 and b.replayssm_bytes == fixed
    assert b.intermediate_state_bytes == 0
    rest = 79.0 - (TARGET + DRAFT) / GIB - 79.0 * (1 - 0.88) - 100 / 1024
    slots = int((rest * 0.9 / 1.9 * GIB - fixed - PER_SLOT) // PER_SLOT)
    assert b.state_slots == slots
    assert b.state_pool_bytes == (slots + 1) * PER_SLOT + fixed
    # 0.5.17: the ring (draft-token length, 4) sits beside every slot, no fixed pool.
    b = run("0.5.17", argv).budget
    assert b.replayssm_bytes == (b.state_slots + 1) * _ring(4)
    assert b.state_pool_bytes == (b.state_slots + 1) * (PER_SLOT + _ring(4))


@pytest.mark.integration  # reads a real release (testing.releases.pristine): slow tier
def test_environment_on_the_pasted_line(tmp_path):
    folder = str(model_folder(tmp_path / "m"))
    report = run("0.5.20", ["SGLANG_MAMBA_SSM_DTYPE=bfloat16", "python3", "-m", "sglang.launch_server",
                            "--model-path", folder, "--mem-fraction-static", "0.88"])
    assert round(report.budget.state_slot_bytes / MIB, 2) == 74.81
    assert "flag-unknown" not in {f.rule for f in report.findings}


@pytest.mark.integration  # reads a real release (testing.releases.pristine): slow tier
def test_aiter_scales_the_fraction(tmp_path):
    folder = str(model_folder(tmp_path / "m"))
    argv = ["--model-path", folder, "--mem-fraction-static", "0.88", "--attention-backend", "aiter"]
    assert run("0.5.15", argv).budget.mem_fraction_static == 0.88 * 0.85
    assert run("0.5.15", [*argv, "--context-length", "8192"]).budget.mem_fraction_static == 0.88
    honored = {"SGLANG_AITER_HONOR_EXPLICIT_MEM_FRACTION": "1"}
    assert run("0.5.20", argv, environ=honored).budget.mem_fraction_static == 0.88


@pytest.mark.integration  # reads a real release (testing.releases.pristine): slow tier
def test_default_mem_fraction_estimate(tmp_path):
    folder = str(model_folder(tmp_path / "m"))
    b = run("0.5.20", ["--model-path", folder]).budget
    # `handle_gpu_memory_settings` (arg_groups/memory_hook.py) on an 80 GiB card, TP1: chunked prefill 8192,
    # decode graph max bs 256; reserved MiB = 512 + 8192 x 1.5 + 256 x 2 + 1 x 1 / 8 x 1024 = 13440 (above the
    # 10 GiB floor); round((81920 - 13440) / 81920, 3) = 0.836. `adjust_mem_fraction_for_vlm`: the fixture's
    # small vision tower gives the 1.05 cap, times the 0.95 base.
    assert b.mem_fraction_source == "estimate"
    assert b.mem_fraction_static == pytest.approx(0.836 * 0.95 * 1.05)



@pytest.mark.integration  # reads a real release (testing.releases.pristine): slow tier
@pytest.mark.parametrize("version, reserved_mib", [
    # 512 + 2048 x 1.5 + 1 x 1 / 8 x 1024: 0.5.10-0.5.19's 24 GB tier (chunked prefill 2048), no decode graphs.
    ("0.5.19", 512 + 2048 * 1.5 + 128),
    # 512 + 4096 x 1.5 + 128: from 0.5.20 the tier below 35 GB takes 4096-token chunks (memory_hook.py).
    ("0.5.23", 512 + 4096 * 1.5 + 128)])
def test_default_mem_fraction_is_the_releases_tier_and_graphs(tmp_path, version, reserved_mib):
    """The default fraction's card tier is the release's own, and decode graphs the launch turns off reserve nothing
    (`reserve_for_graph_mb`: `max_bs * 2` only where the decode backend is not disabled): what the CPU engine of the
    server tier resolves (tests/server/test_reverted.py). Before, the doctor took 0.5.10-0.5.19's tiers for every
    release and charged the decode graphs always: 0.847 for both (512 + 2048 x 1.5 + 24 x 2 + 128 MiB)."""
    folder = str(model_folder(tmp_path / "m"))
    b = run(version, ["--model-path", folder, "--disable-cuda-graph"], gpu_memory=24.0, gpu_free=23.0).budget
    vlm = 0.95 * 1.05  # `adjust_mem_fraction_for_vlm` on the fixture's one-block vision tower (test above)
    assert b.mem_fraction_source == "estimate"
    assert b.mem_fraction_static == pytest.approx(round((24 * 1024 - reserved_mib) / (24 * 1024), 3) * vlm)
    graphs = run(version, ["--model-path", folder], gpu_memory=24.0, gpu_free=23.0).budget
    max_bs = 24 if version == "0.5.19" else 48
    assert graphs.mem_fraction_static == pytest.approx(round((24 * 1024 - reserved_mib - max_bs * 2) / (24 * 1024), 3)
                                                       * vlm)

@pytest.mark.integration  # reads a real release (testing.releases.pristine): slow tier
def test_the_default_fraction_counts_attention_dp_and_deepep_as_0_5_23_does(tmp_path):
    """0.5.20 on read the card's memory themselves (`get_device_memory_capacity`), so their default is held to the
    arithmetic of 0.5.23's sglang/srt/arg_groups/memory_hook.py: handle_gpu_memory_settings, lines 311-319 (512 +
    activation tokens x 1.5 + TP x PP / 8 x 1024 + reserve_for_graph_mb, at least 10 GiB above 60 GiB cards, then +
    reserve_for_deepep_a2a_mb); reserve_for_graph_mb, lines 357-399 (decode max bs x 2; with attention DP max bs x
    attn_dp_size x 3, and x 1.5 more above a max bs of 300); reserve_for_deepep_a2a_mb, lines 402-414 (2 GiB with
    --moe-a2a-backend deepep and decode graphs on). Before, doctor left both terms out (0.720 for all three 24 GB
    launches). 0.5.10-0.5.19 take the memory as an argument: tests/behaviour/test_doctor_default_fraction.py calls
    theirs. Prefill graphs off: their term is not modelled."""
    import json

    from patchkit.doctor import model as model_mod
    from patchkit.doctor import non_static, release_code
    from patchkit.doctor.budget import default_mem_fraction
    from patchkit.doctor.launch import parse
    from patchkit.store.target import find_in
    from testing.doctor import QWEN38
    from testing.releases import pristine

    config = json.loads(QWEN38.read_text())
    config.pop("vision_config", None)  # no `adjust_mem_fraction_for_vlm`
    model = str(model_folder(tmp_path / "m", config=config))
    code, facts = release_code(find_in(pristine("0.5.23"))), model_mod.load(model)

    def fraction(gib: int, *argv: str) -> float:
        launch = parse(["--model-path", model, "--disable-prefill-cuda-graph", *argv], code.flags)
        assert launch.get("disable_prefill_cuda_graph") is True
        return default_mem_fraction(code, launch, facts, float(gib), launch.int_value("tp_size") or 1, 1)

    # 24 GB (below 35 GB): chunked prefill 4096, decode max bs 48 at TP < 4.
    base = 512 + 4096 * 1.5 + 48 * 2 + 2 / 8 * 1024
    assert fraction(24, "--tp", "2", "--dp-size", "2", "--enable-dp-attention") == round(
        (24576 - (base + 48 * 2 * 3)) / 24576, 3)
    assert fraction(24, "--tp", "2", "--ep-size", "2", "--moe-a2a-backend", "deepep") == round(
        (24576 - (base + 2048)) / 24576, 3)
    assert fraction(24, "--tp", "2") == round((24576 - base) / 24576, 3)
    # 80 GB (below 90 GB): chunked prefill 8192, decode max bs 512 at TP >= 4: above 300.
    reserved = 512 + 8192 * 1.5 + 512 * 2 + 4 / 8 * 1024 + 512 * 4 * 3 + 512 * 4 * 1.5
    assert fraction(80, "--tp", "4", "--dp-size", "4", "--enable-dp-attention") == round(
        (81920 - max(reserved, 10 * 1024)) / 81920, 3)
    # The constants are the release's: 0.5.10-0.5.14 reserve nothing for DeepEP, 0.5.15 inline, 0.5.16 on in
    # reserve_for_deepep_a2a_mb.
    for version, deepep in (("0.5.10", 0.0), ("0.5.14", 0.0), ("0.5.15", 2048.0), ("0.5.23", 2048.0)):
        defaults = non_static.graph_defaults(release_code(find_in(pristine(version))))
        assert (defaults.dp_mib_per_bs, defaults.dp_large_mib_per_bs, defaults.dp_large_above,
                defaults.deepep_mib) == (3.0, 1.5, 300, deepep), version


OLD_STRATEGY_RELEASES = ["0.5.10", "0.5.11", "0.5.12", "0.5.13"]


@pytest.mark.integration
@pytest.mark.parametrize("version", [*OLD_STRATEGY_RELEASES, "0.5.14", "0.5.19", "0.5.23"])
def test_mamba_strategy_flag_and_auto_as_each_release_resolves_it(version, tmp_path):
    """0.5.10-0.5.13 take only --mamba-scheduler-strategy and turn `auto` into no_buffer whatever
    the launch (`if self.mamba_scheduler_strategy == "auto": ... = "no_buffer"` in __post_init__):
    3 slots per request (MAMBA_CACHE_SIZE_MAX_RUNNING_REQUESTS_RATIO). From 0.5.14 `auto` with the
    overlap scheduler on becomes extra_buffer: 3 + MAMBA_CACHE_V2_ADDITIONAL_RATIO_OVERLAP 2 = 5."""
    model = str(model_folder(tmp_path / "m"))
    argv = ["--model-path", model, "--mem-fraction-static", "0.88", "--max-running-requests", "8"]
    auto = run(version, argv)
    assert auto.budget.slots_per_request == (3 if version in OLD_STRATEGY_RELEASES else 5)
    flag = "--mamba-radix-cache-strategy" if version == "0.5.23" else "--mamba-scheduler-strategy"  # gone in 0.5.20
    extra = run(version, [*argv, flag, "extra_buffer"])
    assert not [f for f in extra.findings if f.rule in ("flag-unknown", "flag-removed")]
    assert extra.budget.slots_per_request == 5  # 3 + 2 (overlap on) in every release
    no_buffer = run(version, [*argv, flag, "no_buffer"])
    assert no_buffer.budget.slots_per_request == 3
    # Only 0.5.14 on assert "no_buffer do not support overlap schedule"; before, SGLang turns overlap off.
    assert ("no-buffer-overlap" in {f.rule for f in no_buffer.findings}) == (version not in OLD_STRATEGY_RELEASES)


@pytest.mark.integration
@pytest.mark.parametrize("version", ["0.5.12", "0.5.13", "0.5.14", "0.5.19"])
def test_set_max_running_requests_capped_as_the_release_caps_it(version, tmp_path):
    """`_resolve_max_num_reqs`: 0.5.10-0.5.13 cap a set --max-running-requests by the pool-size
    estimate, max(min(tokens / context x 512, 4096), 2048); 0.5.14 on by half the token capacity."""
    config = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "num_hidden_layers": 32,
              "num_attention_heads": 32, "num_key_value_heads": 8, "hidden_size": 4096,
              "max_position_embeddings": 8192, "torch_dtype": "bfloat16"}
    folder = model_folder(tmp_path / "llama", config=config, total_size=10 * GIB, mtp=False)
    b = run(version, ["--model-path", str(folder), "--mem-fraction-static", "0.95", "--max-running-requests", "4000"],
            gpu_memory=12.0, gpu_free=11.0).budget
    cell = 8 * (128 + 128) * 32 * 2  # KV heads x (K + V head dims) x layers x bf16
    tokens = int((11.0 - 10 - 11.0 * (1 - 0.95)) * GIB) // cell
    assert b.kv_tokens == tokens and tokens // 2 < 2048  # the two caps differ on this launch
    estimated = max(min(int(tokens / 8192 * 512), 4096), 2048)
    assert b.effective_max_running_requests == (estimated if version in ("0.5.12", "0.5.13") else tokens // 2)


@pytest.mark.integration  # reads a real release (testing.releases.pristine): slow tier
@pytest.mark.parametrize("version", ["0.5.10", "0.5.11", "0.5.12"])
def test_legacy_handle_max_mamba_cache_with_speculative_decoding(version, tmp_path):
    """0.5.10-0.5.12's handle_max_mamba_cache, by hand from their code: the intermediate state of every running
    request (mamba_cache_per_req x max_running_requests x draft tokens) off the budget first, then the pool's ratio
    share of the rest, no padding slot; and their pool configurator reserves nothing in the cell for an EAGLE draft.
    KV tokens within 2% of that."""
    model = model_folder(tmp_path / "m")  # 30 GiB: 29.9 GiB of target, the 100 MiB mtp.fc the draft loads
    argv = ["--model-path", str(model), "--speculative-algorithm", "NEXTN", "--speculative-draft-model-path",
            str(model), "--mem-fraction-static", "0.85", "--max-running-requests", "16"]
    b = run(version, argv, states={}, gpu_free=79.0).budget
    linear_layers, full_layers = 48, 16
    per_req = linear_layers * ((48 * 128 + 2 * 16 * 128) * 3 * 2 + 48 * 128 * 128 * 4)  # conv bf16 + ssm fp32
    rest = 79.0 * 0.85 - 30.0  # GiB after the weights and the non-static share
    rest -= per_req * 16 * 4 / GIB  # 4 draft tokens (NEXTN's default with no steps given)
    slots = int((rest * 0.9 / 1.9 * GIB) // per_req)
    kv_budget = rest - slots * per_req / GIB
    cell = 4 * 2 * 256 * full_layers * 2  # bf16 KV, the target's layers only
    assert b.state_slots == slots and b.kv_bytes_per_token == cell
    assert b.intermediate_state_bytes == per_req * 16 * 4
    assert b.kv_tokens == pytest.approx(int(kv_budget * GIB) // cell, rel=0.02)


@pytest.mark.integration
@pytest.mark.parametrize("version", ["0.5.12", "0.5.19"])
def test_state_slots_never_negative_in_the_budget(version, tmp_path):
    # A 16 GiB checkpoint at 0.5 of a 24 GB card leaves the state pool nothing: SGLang raises
    # (mamba-slots-zero), and the budget says 0 slots as the text does, not the formula's -16.
    model = str(model_folder(tmp_path / "q4", total_size=16 * GIB))
    report = run(version, ["--model-path", model, "--mem-fraction-static", "0.5"],
                 gpu_memory=23.99, gpu_free=23.0, sm="8.9")
    assert "mamba-slots-zero" in {f.rule for f in report.findings}
    assert report.budget.state_slots == 0


@pytest.mark.integration
@pytest.mark.parametrize("version", ["0.5.17", "0.5.19", "0.5.20", "0.5.23"])
def test_the_mtp_draft_shares_its_vocab_tensors_only_after_the_kv_pool_is_sized(version, tmp_path):
    """Issue 46 item 7, read from the release: the scheduler builds the draft worker (its Qwen3_5ForCausalLMMTP with
    its own embed_tokens and lm_head, on the GPU) before init_memory_pools sizes the target's KV pool from the free
    memory, and the EAGLE worker swaps in the target's tensors (init_lm_head -> set_embed_and_head) only in its
    alloc_memory_pool, after that. So a pristine release counts the draft's vocab tensors, and the doctor does."""
    import ast

    from testing import releases

    srt = releases.pristine(version) / "sglang" / "srt"
    scheduler = ast.parse((srt / "managers" / "scheduler.py").read_text())
    init = next(n for n in ast.walk(scheduler) if isinstance(n, ast.FunctionDef) and n.name == "init_model_worker")
    calls = [c.func.attr for c in ast.walk(init) if isinstance(c, ast.Call) and isinstance(c.func, ast.Attribute)]
    assert calls.index("maybe_init_draft_worker") < calls.index("init_memory_pools"), calls
    worker = ast.parse((srt / "speculative" / "eagle_worker_v2.py").read_text())
    callers = {fn.name for fn in ast.walk(worker) if isinstance(fn, ast.FunctionDef)
               for c in ast.walk(fn) if isinstance(c, ast.Call) and isinstance(c.func, ast.Attribute)
               and c.func.attr == "init_lm_head"}
    assert callers == {"alloc_memory_pool"}, callers
    model = model_folder(tmp_path / "m")
    report = run(version, ["--model-path", str(model), "--speculative-algorithm", "NEXTN", "--mem-fraction-static",
                           "0.88"])
    shared = run(version, ["--model-path", str(model), "--speculative-algorithm", "NEXTN", "--mem-fraction-static",
                           "0.88"], states={"draft-lmhead-placeholder": "applied"})
    vocab = 2 * 248320 * 5120 * 2  # embed_tokens and lm_head (tie_word_embeddings false), bf16, TP 1
    assert report.budget.draft_weights_bytes - shared.budget.draft_weights_bytes == vocab
