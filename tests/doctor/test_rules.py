"""Every rule fires on a launch with its trap and stays silent on the same launch without it."""

from __future__ import annotations

import json

import pytest

from testing.doctor import GIB, QWEN38, model_folder, rules, run

# Every rule is judged on real releases (testing.doctor.run reads one): the slow tier.
pytestmark = pytest.mark.integration

APPLIED = {pid: "applied" for pid in ("mtp-layer-detection", "draft-lmhead-placeholder", "mamba-slot-graceful",
                                      "symm-mem-kill-switch", "autoround-packed-mapping", "eagle3-capture-hook")}


@pytest.fixture
def model(tmp_path):
    return str(model_folder(tmp_path / "qwen3.8-27b"))


def base(model, *extra):
    return ["--model-path", model, "--mem-fraction-static", "0.88", *extra]


def spec(model, *extra):
    return base(model, "--speculative-algorithm", "NEXTN", "--speculative-draft-model-path", model, *extra)


def finding(report, rule):
    return next(f for f in report.findings if f.rule == rule)


def fires(version, argv, rule, **kw):
    report = run(version, argv, **kw)
    assert rule in rules(report), [f.rule for f in report.findings]
    return finding(report, rule)


def silent(version, argv, rule, **kw):
    report = run(version, argv, **kw)
    assert rule not in rules(report), finding(report, rule)
    return report


def test_spec_max_running_default(model):
    f = fires("0.5.20", spec(model), "spec-max-running-default")
    assert "48" in f.message and "really gets" in f.message
    silent("0.5.20", spec(model, "--max-running-requests", "8"), "spec-max-running-default")


def test_mamba_slots_cap(model):
    f = fires("0.5.20", spec(model, "--max-running-requests", "48"), "mamba-slots-cap")
    # 240 slots (48 x 5) would lift the cap, but with 28 GiB of intermediate state beside them the budget goes
    # negative: the fix that works is the concurrency the pool holds (advice.verified tried both).
    assert "240 slots per GPU would lift it" in f.message
    assert f.level == "warning" and f.args == ("--max-running-requests", "12")
    assert "mamba-slots-cap" not in rules(run("0.5.20", spec(model, "--max-running-requests", "12")))
    silent("0.5.20", spec(model, "--max-running-requests", "8"), "mamba-slots-cap")


def test_mamba_slots_zero(model):
    f = fires("0.5.20", base(model, "--max-mamba-cache-size", "4"), "mamba-slots-zero")
    assert f.level == "error"
    report = silent("0.5.20", base(model, "--max-mamba-cache-size", "100"), "mamba-slots-zero")
    assert not report.has_errors


def test_mamba_ratio_ignored(model):
    fires("0.5.20", base(model, "--mamba-full-memory-ratio", "0.5", "--max-mamba-cache-size", "100"),
          "mamba-ratio-ignored")
    silent("0.5.20", base(model, "--mamba-full-memory-ratio", "0.5"), "mamba-ratio-ignored")


def test_kv_below_context(model):
    f = fires("0.5.20", base(model), "kv-below-context", gpu_free=47.0, gpu_memory=48.0)
    assert "HTTP 400" in f.message and f.fix.startswith("--context-length")
    silent("0.5.20", base(model, "--context-length", "32768"), "kv-below-context", gpu_free=47.0, gpu_memory=48.0)


def test_max_total_tokens_cap_only(model):
    fires("0.5.20", base(model, "--max-total-tokens", "50000000"), "max-total-tokens-cap-only")
    report = silent("0.5.20", base(model, "--max-total-tokens", "100000"), "max-total-tokens-cap-only")
    assert report.budget.kv_tokens == 100000


def test_replayssm_spec(model):
    f = fires("0.5.20", spec(model, "--max-running-requests", "8"), "replayssm-spec")
    assert f.fix == "--enable-linear-replayssm-spec" and "GiB of intermediate state" in f.message
    assert fires("0.5.16", spec(model, "--max-running-requests", "8"), "replayssm-spec").fix == "--enable-gdn-replayssm-spec"
    assert "no ReplaySSM flag" in fires("0.5.15", spec(model, "--max-running-requests", "8"), "replayssm-spec").message
    silent("0.5.20", base(model), "replayssm-spec")
    bad = fires("0.5.20", spec(model, "--max-running-requests", "8", "--enable-linear-replayssm-spec",
                               "--speculative-num-steps", "3", "--speculative-eagle-topk", "4",
                               "--speculative-num-draft-tokens", "8"), "replayssm-spec")
    assert bad.level == "error" and bad.fix == "--speculative-eagle-topk 1"
    on = silent("0.5.20", spec(model, "--max-running-requests", "8", "--enable-linear-replayssm-spec"),
                "mamba-slots-zero")
    assert on.budget.intermediate_state_bytes == 0 and on.budget.replayssm_bytes > 0


def test_draft_quantization_inherit(model, tmp_path):
    draft_config = {"architectures": ["LlamaForCausalLMEagle3"], "model_type": "llama", "num_hidden_layers": 1,
                    "num_attention_heads": 32, "num_key_value_heads": 8, "hidden_size": 4096}
    draft = str(model_folder(tmp_path / "eagle3", config=draft_config, total_size=GIB, mtp=False))
    argv = base(model, "--quantization", "fp8", "--speculative-algorithm", "EAGLE3",
                "--speculative-draft-model-path", draft, "--max-running-requests", "8")
    f = fires("0.5.20", argv, "draft-quantization-inherit")
    assert f.fix == "--speculative-draft-model-quantization unquant"
    silent("0.5.20", [*argv, "--speculative-draft-model-quantization", "unquant"], "draft-quantization-inherit")


def test_flag_removed_and_unknown(model):
    f = fires("0.5.20", base(model, "--mamba-scheduler-strategy", "no_buffer"), "flag-removed")
    # The new spelling with no_buffer asserts without --disable-overlap-schedule: the fix carries both.
    assert f.level == "error" and f.args == ("--mamba-radix-cache-strategy", "no_buffer", "--disable-overlap-schedule")
    assert f.remove == ("--mamba-scheduler-strategy",)
    report = silent("0.5.19", base(model, "--mamba-scheduler-strategy", "extra_buffer"), "flag-removed")
    assert "flag-deprecated" in rules(report)
    # The replacement takes the value the old spelling had.
    graphs = fires("0.5.20", base(model, "--cuda-graph-max-bs", "64"), "flag-removed")
    assert graphs.args == ("--cuda-graph-max-bs-decode", "64") and graphs.remove == ("--cuda-graph-max-bs",)
    assert graphs.fix == "--cuda-graph-max-bs-decode 64 in place of --cuda-graph-max-bs"
    assert fires("0.5.20", base(model, "--enable-gdn-replayssm-spec"), "flag-removed").args == \
        ("--enable-linear-replayssm-spec",)
    typo = fires("0.5.20", base(model, "--mem-fraction-statc", "0.8"), "flag-unknown")
    assert typo.message.endswith("did you mean --mem-fraction-static?")
    assert typo.args == ("--mem-fraction-static", "0.8") and typo.remove == ("--mem-fraction-statc",)
    silent("0.5.20", base(model), "flag-unknown")
    silent("0.5.20", base(model), "flag-removed")


def test_feature_missing(model, tmp_path):
    argv = base(model, "--speculative-algorithm", "DSPARK", "--max-running-requests", "8")
    fires("0.5.15", argv, "feature-missing")
    silent("0.5.16", argv, "feature-missing")
    dflash2 = {"architectures": ["DFlash2DraftModel"], "model_type": "qwen3", "num_hidden_layers": 1,
               "num_attention_heads": 32, "num_key_value_heads": 8, "hidden_size": 5120}
    draft = str(model_folder(tmp_path / "dflash2", config=dflash2, total_size=GIB, mtp=False))
    argv = base(model, "--speculative-algorithm", "DFLASH", "--speculative-draft-model-path", draft,
                "--max-running-requests", "8")
    assert "DFlash2" in fires("0.5.18", argv, "feature-missing").message
    silent("0.5.19", argv, "feature-missing")


def test_no_buffer_overlap(model):
    fires("0.5.20", base(model, "--mamba-radix-cache-strategy", "no_buffer"), "no-buffer-overlap")
    silent("0.5.20", base(model, "--mamba-radix-cache-strategy", "no_buffer", "--disable-overlap-schedule"),
           "no-buffer-overlap")


def test_spec_extra_buffer(model):
    # An explicit extra_buffer with a draft where the release runs extra_buffer_lazy with one (0.5.18+).
    argv = spec(model, "--max-running-requests", "8", "--mamba-radix-cache-strategy", "extra_buffer")
    f = fires("0.5.20", argv, "spec-extra-buffer")
    assert f.fix == "--mamba-radix-cache-strategy extra_buffer_lazy" and "36537" in f.message
    silent("0.5.16", argv, "spec-extra-buffer")  # its validator refuses the lazy buffer with a draft
    silent("0.5.20", [*argv, "--disable-overlap-schedule"], "spec-extra-buffer")  # lazy would not start
    silent("0.5.20", spec(model, "--max-running-requests", "8"), "spec-extra-buffer")  # auto: the patch's case
    silent("0.5.20", base(model, "--mamba-radix-cache-strategy", "extra_buffer"), "spec-extra-buffer")  # no draft


def test_spec_mamba_lazy_buffer_applied_counts_the_lazy_slots(model):
    # `auto` with a draft: extra_buffer holds 5 state slots per request with overlap, the lazy
    # buffer 4 (kv_cache_configurator's "overlap 5->4, lazy 4->3" without the decode-lock skip).
    argv = spec(model, "--max-running-requests", "8")
    assert run("0.5.20", argv).budget.slots_per_request == 5
    assert run("0.5.20", argv, states={"spec-mamba-lazy-buffer": "applied"}).budget.slots_per_request == 4
    assert run("0.5.20", [*argv, "--disable-overlap-schedule"],
               states={"spec-mamba-lazy-buffer": "applied"}).budget.slots_per_request == \
        run("0.5.20", [*argv, "--disable-overlap-schedule"]).budget.slots_per_request


def test_fp4_kv_below_sm100(model):
    argv = base(model, "--kv-cache-dtype", "fp4_mx_block16")
    f = fires("0.5.20", argv, "fp4-kv-below-sm100", sm="8.6")
    assert f.level == "warning" and "SM 8.6" in f.message and f.fix == "--kv-cache-dtype fp8_e5m2"
    silent("0.5.20", argv, "fp4-kv-below-sm100", sm="10.0")
    silent("0.5.20", base(model, "--kv-cache-dtype", "fp8_e5m2"), "fp4-kv-below-sm100", sm="8.6")


def test_fp4_kv_below_sm100_refused_where_fp4_kv_sm100_is_applied(model):
    argv, applied = base(model, "--kv-cache-dtype", "fp4_mx_block16"), {"fp4-kv-sm100": "applied"}
    f = fires("0.5.20", argv, "fp4-kv-below-sm100", sm="8.6", states=applied)
    assert f.level == "error" and "fp4-kv-sm100 refuses it at start-up" in f.message
    assert f.fix == "--kv-cache-dtype fp8_e5m2"
    switched_off = fires("0.5.20", argv, "fp4-kv-below-sm100", sm="8.6", states=applied,
                         environ={"SGLANG_PATCHKIT_DISABLE": "symm-mem-kill-switch, fp4-kv-sm100"})
    assert switched_off.level == "warning" and "refuses" not in switched_off.message
    silent("0.5.20", argv, "fp4-kv-below-sm100", sm="10.0", states=applied)


def test_fp8_triton_sm89(model):
    argv = base(model, "--kv-cache-dtype", "fp8_e4m3", "--attention-backend", "triton")
    fires("0.5.20", argv, "fp8-triton-sm89", sm="8.9")
    silent("0.5.20", argv, "fp8-triton-sm89", sm="9.0")


def test_cutedsl_decode_sm90(model):
    argv = base(model, "--linear-attn-decode-backend", "cutedsl")
    assert fires("0.5.20", argv, "cutedsl-decode-sm90", sm="8.9").level == "error"
    silent("0.5.20", argv, "cutedsl-decode-sm90", sm="9.0")


def test_flashinfer_gdn_sm90(model):
    argv = base(model, "--linear-attn-backend", "flashinfer")
    fires("0.5.20", argv, "flashinfer-gdn-sm90", sm="8.6")
    silent("0.5.20", argv, "flashinfer-gdn-sm90", sm="9.0")


def test_fa3_sm90(model):
    argv = base(model, "--attention-backend", "fa3")
    fires("0.5.20", argv, "fa3-sm90", sm="8.9")
    fires("0.5.20", argv, "fa3-sm90", sm="12.0")
    silent("0.5.20", argv, "fa3-sm90", sm="9.0")


def test_dtype_fp16_gdn(model):
    fires("0.5.20", base(model, "--dtype", "float16"), "dtype-fp16-gdn")
    silent("0.5.20", base(model, "--dtype", "bfloat16"), "dtype-fp16-gdn")


def test_reasoning_parser_forced(model):
    assert fires("0.5.20", base(model, "--reasoning-parser", "qwen3-thinking"), "reasoning-parser-forced").fix == \
        "--reasoning-parser qwen3"
    silent("0.5.20", base(model, "--reasoning-parser", "qwen3"), "reasoning-parser-forced")


def test_tool_parser_name(model):
    assert fires("0.5.20", base(model, "--tool-call-parser", "qwen3_xml"), "tool-parser-name").fix == \
        "--tool-call-parser qwen3_coder"
    silent("0.5.20", base(model, "--tool-call-parser", "qwen3_coder"), "tool-parser-name")


def test_mtp_weights_missing(tmp_path):
    stripped = str(model_folder(tmp_path / "no-mtp", tensors={"model.layers.0.mlp.weight": ("F8_E4M3", [8, 8])}))
    argv = spec(stripped, "--max-running-requests", "8")
    assert fires("0.5.20", argv, "mtp-weights-missing").level == "error"
    silent("0.5.20", spec(str(model_folder(tmp_path / "full")), "--max-running-requests", "8"), "mtp-weights-missing")


def test_pcie_custom_allreduce(model):
    argv = base(model, "--tp-size", "2")
    fires("0.5.20", argv, "pcie-custom-allreduce", gpus=2, interconnect="pcie")
    silent("0.5.20", [*argv, "--disable-custom-all-reduce"], "pcie-custom-allreduce", gpus=2, interconnect="pcie")
    silent("0.5.20", argv, "pcie-custom-allreduce", gpus=2, interconnect="nvlink")


def test_integrated_gpu_headroom(model):
    fires("0.5.20", base(model), "integrated-gpu-headroom", integrated=True, gpu_memory=119.0, gpu_free=110.0)
    silent("0.5.20", ["--model-path", model, "--mem-fraction-static", "0.8"], "integrated-gpu-headroom",
           integrated=True, gpu_memory=119.0, gpu_free=110.0)


def test_patch_needed_reuses_status(model):
    # Pristine 0.5.15: `patchkit status` reports mtp-layer-detection pending, so the MTP draft is
    # counted as all 64 layers (KV cell x5).
    report = run("0.5.15", spec(model, "--max-running-requests", "8"))
    needed = [f for f in report.findings if f.rule == "patch-needed"]
    assert any("mtp-layer-detection is pending" in f.message and "= 5x" in f.message for f in needed)
    assert report.budget.kv_bytes_per_token == 65536 * 5  # bf16 KV: 16 layers x 4 x 512 x 2 bytes, x5
    others = [f for f in needed if f.level == "info"]
    assert len(others) == 1 and "autoround-packed-mapping" in others[0].message
    assert "mtp-layer-detection" not in others[0].message
    applied = run("0.5.15", spec(model, "--max-running-requests", "8"), states=APPLIED)
    assert "patch-needed" not in rules(applied)
    assert applied.budget.kv_bytes_per_token == int(65536 * (1 + 1 / 16))
    # symm-mem on PCIe with TP > 1
    f = fires("0.5.20", base(model, "--tp-size", "2", "--disable-custom-all-reduce"), "patch-needed",
              gpus=2, interconnect="pcie")
    assert f.level == "error" and "symm-mem-kill-switch" in f.fix
    silent("0.5.20", base(model, "--tp-size", "2"), "patch-needed", gpus=2, interconnect="nvlink",
           states=APPLIED)


def test_budget_negative(tmp_path):
    big = str(model_folder(tmp_path / "big", total_size=100 * GIB))
    assert fires("0.5.20", base(big), "budget-negative").level == "error"
    silent("0.5.20", base(str(model_folder(tmp_path / "small"))), "budget-negative")


def test_flag_value(model):
    f = fires("0.5.20", base(model, "--attention-backend", "flashinfr"), "flag-value")
    assert f.level == "warning" and f.fix == "--attention-backend flashinfer"
    assert fires("0.5.20", base(model, "--tp-size", "two"), "flag-value").level == "error"
    silent("0.5.20", base(model, "--attention-backend", "flashinfer"), "flag-value")


def test_gpu_count(model):
    assert fires("0.5.20", base(model, "--tp-size", "4"), "gpu-count", gpus=2).fix == "--tp-size 2"
    silent("0.5.20", base(model, "--tp-size", "2"), "gpu-count", gpus=2)


def test_fp8_e4m3_triton_below_sm89_is_an_error(model):
    argv = base(model, "--kv-cache-dtype", "fp8_e4m3", "--attention-backend", "triton")
    f = fires("0.5.20", argv, "fp8-triton-sm89", sm="8.6")
    assert f.level == "error" and "fp8e4nv" in f.message and f.fix.startswith("--attention-backend flashinfer")
    silent("0.5.20", base(model, "--kv-cache-dtype", "fp8_e5m2", "--attention-backend", "triton"), "fp8-triton-sm89",
           sm="8.6")
    silent("0.5.20", base(model, "--kv-cache-dtype", "fp8_e4m3", "--attention-backend", "flashinfer"),
           "fp8-triton-sm89", sm="8.6")


def test_cutedsl_below_sm90_with_the_patch_applied_is_a_note(model):
    argv = base(model, "--linear-attn-decode-backend", "cutedsl")
    f = fires("0.5.20", argv, "cutedsl-decode-sm90", sm="8.9", states={"gdn-cutedsl-decode-sm90": "applied"})
    assert f.level == "info" and "fall back to triton" in f.message
    pending = fires("0.5.20", argv, "cutedsl-decode-sm90", sm="8.9", states={"gdn-cutedsl-decode-sm90": "pending"})
    assert pending.args == ("--linear-attn-decode-backend", "triton")
    assert [a.command for a in pending.alternatives] == [("patchkit", "apply", "--only", "gdn-cutedsl-decode-sm90")]


def test_patch_needed_symm_mem_silent_once_applied(model):
    argv = base(model, "--tp-size", "2", "--disable-custom-all-reduce")
    report = run("0.5.20", argv, gpus=2, interconnect="pcie", states={"symm-mem-kill-switch": "applied"})
    assert not [f for f in report.findings if f.rule == "patch-needed" and "symm-mem" in f.fix]
    report = run("0.5.20", argv, gpus=2, interconnect="pcie", states={"symm-mem-kill-switch": "pending"})
    assert [f for f in report.findings if f.rule == "patch-needed" and "symm-mem" in f.fix and f.level == "error"]


def _needed(report, pid):
    return [f for f in report.findings if f.rule == "patch-needed" and f.fix == f"patchkit apply --only {pid}"]


def test_patch_needed_mtp_draft_kv_budget(model):
    # Built-in MTP without a draft path: the release leaves the draft's KV layers out (sglang#35566).
    argv = base(model, "--speculative-algorithm", "NEXTN", "--max-running-requests", "8")
    pending = run("0.5.20", argv, states={"mtp-draft-kv-budget": "pending"})
    assert _needed(pending, "mtp-draft-kv-budget") and pending.budget.draft_layers is None
    applied = run("0.5.20", argv, states={"mtp-draft-kv-budget": "applied"})
    assert not _needed(applied, "mtp-draft-kv-budget")
    assert applied.budget.draft_layers == 1
    assert applied.budget.kv_bytes_per_token == int(pending.budget.kv_bytes_per_token * (1 + 1 / 16))
    with_path = run("0.5.20", spec(model, "--max-running-requests", "8"), states={"mtp-draft-kv-budget": "pending"})
    assert not _needed(with_path, "mtp-draft-kv-budget")


def test_patch_needed_cpu_offload_tied_params(model):
    argv = base(model, "--cpu-offload-gb", "8")
    f = _needed(run("0.5.20", argv, states={"cpu-offload-tied-params": "pending"}), "cpu-offload-tied-params")
    assert f and f[0].level == "error" and "functional_call" in f[0].message
    assert not _needed(run("0.5.20", base(model), states={"cpu-offload-tied-params": "pending"}),
                       "cpu-offload-tied-params")
    assert not _needed(run("0.5.20", argv, states={"cpu-offload-tied-params": "applied"}), "cpu-offload-tied-params")
    # 0.5.21 fixed it upstream: a pristine 0.5.21 reports no such patch as pending.
    assert not _needed(run("0.5.21", argv), "cpu-offload-tied-params")


EAGLE3_DRAFT = {"architectures": ["LlamaForCausalLMEagle3"], "model_type": "llama", "num_hidden_layers": 1,
                "num_attention_heads": 32, "num_key_value_heads": 8, "hidden_size": 5120, "vocab_size": 248320}


@pytest.mark.integration
@pytest.mark.parametrize("version", ["0.5.15", "0.5.17"])
def test_mtp_patch_triggers_only_for_the_mtp_draft(version, model, tmp_path):
    """mtp-layer-detection and draft-lmhead-placeholder concern the Qwen3_5ForCausalLMMTP draft that
    ModelConfig makes of a Qwen3.5/3.8 checkpoint; an external EAGLE-3 drafter (its own
    LlamaForCausalLMEagle3 config, 1 layer) runs neither path. Patch states are the release's real
    `patchkit status` (both pending on pristine 0.5.15 and 0.5.17)."""
    mtp = run(version, spec(model, "--max-running-requests", "8"))
    assert {"mtp-layer-detection", "draft-lmhead-placeholder"} <= set(_needed_ids(mtp))
    drafter = str(model_folder(tmp_path / "eagle3", config=EAGLE3_DRAFT, total_size=GIB, mtp=False))
    eagle3 = run(version, base(model, "--speculative-algorithm", "EAGLE3", "--speculative-draft-model-path", drafter,
                               "--max-running-requests", "8"))
    assert not {"mtp-layer-detection", "draft-lmhead-placeholder"} & set(_needed_ids(eagle3))
    assert eagle3.budget.draft_layers == 1
    assert eagle3.budget.kv_bytes_per_token == int(65536 * (1 + 1 / 16))  # one draft layer over 16 full-attention


def _needed_ids(report):
    return [f.fix.removeprefix("patchkit apply --only ") for f in report.findings
            if f.rule == "patch-needed" and f.fix.startswith("patchkit apply --only ")]


@pytest.mark.integration
@pytest.mark.parametrize("version", ["0.5.12", "0.5.19", "0.5.23"])
def test_gpu_count_counts_data_parallel_replicas(version, model):
    """`launch_dp_schedulers` gives every DP replica its own tp x pp GPUs (base_gpu_id += tp_size x
    pp_size); with attention DP the DP groups share one TP group (0.5.22 on: --attn-dp-size, and
    --dp-size N --enable-dp-attention is turned into --attn-dp-size N --dp-size 1)."""
    f = fires(version, base(model, "--dp-size", "2"), "gpu-count", gpus=1)
    assert "needs 2 GPUs" in f.message and f.fix in ("--dp-size 1", "--data-parallel-size 1")  # 0.5.12: its first name
    assert "needs 8 GPUs" in fires(version, base(model, "--dp-size", "2", "--tp-size", "2", "--pp-size", "2"),
                                   "gpu-count", gpus=4).message
    silent(version, base(model, "--dp-size", "2", "--tp-size", "2", "--enable-dp-attention"), "gpu-count", gpus=2)
    if version == "0.5.23":
        silent(version, base(model, "--attn-dp-size", "2", "--tp-size", "2"), "gpu-count", gpus=2)
        assert "needs 4 GPUs" in fires(version, base(model, "--attn-dp-size", "2", "--dp-size", "2", "--tp-size", "2"),
                                       "gpu-count", gpus=2).message


@pytest.mark.integration
def test_mamba_slots_cap_costs_per_gpu_under_attention_dp(model):
    """TP 2 x attention-DP 2, 48 requests: each rank serves 24 from its own state pool of attention-TP
    1 slots (146.81 MiB fp32, test_worked_check_state_per_slot), so lifting the cap costs
    (24 x 5 - slots) slots per GPU, and --max-mamba-cache-size (divided by the DP size in
    `_handle_max_mamba_cache`) must be twice that."""
    argv = spec(model, "--tp-size", "2", "--dp-size", "2", "--enable-dp-attention", "--max-running-requests", "48")
    report = run("0.5.19", argv, gpus=2, gpu_memory=32.0, gpu_free=31.0)
    f = finding(report, "mamba-slots-cap")
    b = report.budget
    assert b.attn_dp_size == 2 and b.slots_per_request == 5 and round(b.state_slot_bytes / (1 << 20), 2) == 146.81
    per_gpu = (24 * 5 - b.state_slots) * b.state_slot_bytes
    assert f"({per_gpu / GIB:.2f} GiB)" in f.message and "120 slots per GPU" in f.message
    # --max-mamba-cache-size 240 (120 per rank, divided by the DP size) leaves no KV pool on these cards: the fix
    # that works is the concurrency the pools hold, 3 per attention-DP rank.
    assert f.args == ("--max-running-requests", "6")


@pytest.mark.integration
@pytest.mark.parametrize("version", ["0.5.10", "0.5.19", "0.5.23"])
def test_context_length_over_model(version, tmp_path):
    """Every release's `_derive_context_length` raises ValueError for a --context-length above
    `get_context_length(config)` (here max_position_embeddings 40960, no rope scaling) unless
    SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN=1; then it warns and takes it."""
    config = json.loads(QWEN38.read_text())
    config["text_config"]["max_position_embeddings"] = 40960
    short = str(model_folder(tmp_path / "short", config=config))
    f = fires(version, base(short, "--context-length", "131072"), "context-length-over-model")
    assert f.level == "error" and "40,960" in f.message and f.fix.startswith("--context-length 40960")
    assert fires(version, base(short, "--context-length", "128Ki"), "context-length-over-model").level == "error"
    allowed = ["SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN=1", "python", "-m", "sglang.launch_server",
               *base(short, "--context-length", "131072")]
    assert fires(version, allowed, "context-length-over-model").level == "warning"
    silent(version, base(short, "--context-length", "40960"), "context-length-over-model")
    silent(version, base(short), "context-length-over-model")


@pytest.mark.integration
@pytest.mark.parametrize("extra", [
    (),
    ("--speculative-algorithm", "NEXTN", "--speculative-draft-model-path", "{model}", "--max-running-requests", "48"),
    ("--tp-size", "2", "--max-running-requests", "8"),
])
def test_no_finding_depends_on_the_default_free_memory_once_gpu_free_is_given(model, extra):
    """With --gpu-free (the "avail mem" SGLang logs) and --mem-fraction-static given, the card's total
    (from which the default free memory would be derived) changes no finding and no budget figure. The
    release's chunked-prefill and CUDA-graph defaults also follow the total (`handle_gpu_memory_settings`):
    pinned, so only the free-memory default could differ."""
    argv = base(model, "--chunked-prefill-size", "4096", "--cuda-graph-max-bs-decode", "32",
                *(token.format(model=model) for token in extra))
    # What the default is derived from: the card's total, its SM, the custom all-reduce's buffers (V2's size from
    # the environment), the interconnect's NCCL range.
    shapes = [({"gpu_memory": total}, env) for total in (32.0, 48.0, 80.0)
              for env in ({}, {"SGLANG_OPT_USE_CUSTOM_ALL_REDUCE_V2": "0"}, {"SGLANG_CUSTOM_ALL_REDUCE_V2_MAX_SIZE_KB": "1"})]
    defaults = {run("0.5.19", argv, environ=env, gpus=2, gpu_free=None, **gpu).gpu.free_gib for gpu, env in shapes}
    assert len(defaults) >= (6 if "--tp-size" in extra else 3)  # the default really differs between these shapes
    reports = [run("0.5.19", argv, environ=env, gpus=2, gpu_free=30.0, **gpu) for gpu, env in shapes]
    first = reports[0]
    for other in reports[1:]:
        assert other.findings == first.findings
        assert other.budget.to_dict() == first.budget.to_dict()
    assert first.budget.free_at_load_gib == 30.0
    assert first.budget.kv_tokens_low is None and "gpu-free-estimated" not in rules(first)
