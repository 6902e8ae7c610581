"""The non-static memory rule (issue 21.9): what a launch needs outside the static pools, against
`(1 - mem_fraction_static) x free`, on the field's figures and on the launches the tests hold (its
arithmetic without a release: tests/unit/doctor/test_non_static.py)."""

from __future__ import annotations

import re

import pytest

from patchkit.doctor import non_static
from testing import releases
from testing.cli import run as cli
from testing.doctor import GIB, model_folder, rules, run

MIB = 1 << 20
CARD_24 = dict(gpu_memory=23.99, gpu_free=23.0, sm="8.9")  # RTX 3090/4090: 24564 MiB
CARD_32 = dict(gpu_memory=31.36, gpu_free=30.4, sm="12.0")  # RTX 5090: 32607 MiB


# --- real releases (slow tier) -------------------------------------------------------------------

@pytest.fixture
def q4(tmp_path):
    """The Qwen3.8-27B geometry as a 4-bit checkpoint (16 GiB): what fits a 24 GB card."""
    return str(model_folder(tmp_path / "qwen3.8-27b-4bit", total_size=16 * GIB))


@pytest.fixture
def dflash2(tmp_path):
    config = {"architectures": ["DFlash2DraftModel"], "model_type": "qwen3", "num_hidden_layers": 1,
              "num_attention_heads": 32, "num_key_value_heads": 8, "hidden_size": 5120, "vocab_size": 248320,
              "intermediate_size": 17408}
    return str(model_folder(tmp_path / "dflash2", config=config, total_size=GIB, mtp=False))


def _release_tier_24gb(version: str) -> tuple[int, int]:
    """(chunked prefill size, decode graph max bs) the release's own source gives a card of
    20-35 GiB at TP < 4, read from its text here (not through the doctor's reader)."""
    for rel in ("srt/arg_groups/memory_hook.py", "srt/server_args.py"):
        path = releases.pristine(version) / "sglang" / rel
        if not path.is_file():
            continue
        branch = re.search(r"gpu_mem < 35 \* 1024:(.*?)elif gpu_mem", path.read_text(), re.S)
        if branch:
            chunk = re.search(r"chunked_prefill_size\s*=\s*(\d+)", branch.group(1))
            max_bs = re.search(r"max_bs\s*=\s*(\d+)", branch.group(1))
            assert chunk and max_bs
            return int(chunk.group(1)), int(max_bs.group(1))
    raise AssertionError(f"no 24 GB branch in {version}")


def _launch(model, fraction, *extra):
    return ["--model-path", model, "--mem-fraction-static", fraction, *extra]


@pytest.mark.integration
@pytest.mark.parametrize("version", ["0.5.12", "0.5.17", "0.5.19", "0.5.23"])
def test_release_defaults_and_both_cases_per_release(version, q4):
    chunk, max_bs = _release_tier_24gb(version)
    short = run(version, _launch(q4, "0.98"), **CARD_24)
    b = short.budget
    # The release's own defaults for this card (0.5.20 on: 4096 and 48, capped by max running
    # requests from 0.5.22), not constants.
    assert b.non_static_chunked_prefill_size == chunk
    assert b.non_static_cuda_graph_max_bs == max_bs
    twice = run(version, _launch(q4, "0.98", "--chunked-prefill-size", str(2 * chunk)), **CARD_24).budget
    assert twice.non_static_terms["prefill_activations"] == 2 * b.non_static_terms["prefill_activations"]
    # Positive: 0.98 leaves 0.46 GiB of 23 free; the finding names the need and the fraction.
    assert b.non_static_available_bytes == int(23.0 * GIB * (1 - 0.98))
    finding = next(f for f in short.findings if f.rule == "non-static-short")
    assert finding.level == "warning"
    assert f"{b.non_static_needed_bytes / GIB:.2f} GiB" in finding.message
    assert finding.fix == f"--mem-fraction-static {b.max_safe_mem_fraction_static:.2f}"
    # Negative: the fraction it names is silent.
    safe = b.max_safe_mem_fraction_static
    assert 0.5 < safe < 0.96
    assert "non-static-short" not in rules(run(version, _launch(q4, f"{safe:.2f}"), **CARD_24))


# The field's figures (issue 21.9). Each ran out at this fraction; the card and free memory where
# the issue does not give them are the assumption docs/doctor.md states.
FIELD_OOM = [
    ("0.5.12", "0.96", (), CARD_24),
    ("0.5.12", "0.98", (), CARD_24),
    ("0.5.17", "0.96", (), CARD_24),
    ("0.5.19", "0.96", (), CARD_24),
    ("0.5.19", "0.98", (), CARD_24),
    # DFlash2 reached prefill graph capture: the shape with which this checkpoint gets state slots.
    ("0.5.19", "0.93", ("--speculative-algorithm", "DFLASH", "--speculative-draft-model-path", "{dflash2}",
                        "--max-running-requests", "8", "--mamba-ssm-dtype", "bfloat16"), CARD_32),
    ("0.5.17", "0.95", ("--chunked-prefill-size", "2048"), CARD_32),
    ("0.5.17", "0.94", ("--speculative-algorithm", "NEXTN", "--speculative-draft-model-path", "{model}"), CARD_32),
]


@pytest.mark.integration
@pytest.mark.parametrize("version, fraction, extra, card", FIELD_OOM)
def test_field_launches_that_ran_out_warn(version, fraction, extra, card, q4, dflash2):
    argv = _launch(q4, fraction, *(t.format(model=q4, dflash2=dflash2) for t in extra))
    report = run(version, argv, **card)
    assert "non-static-short" in rules(report), report.budget.non_static_terms
    assert "mamba-slots-zero" not in rules(report)  # the static budget lets it start, as it did
    # Never above a fraction that ran out.
    assert report.budget.max_safe_mem_fraction_static < float(fraction)


@pytest.mark.integration
def test_field_1024_chunk_runs_where_2048_ran_out(q4):
    """The 32 GB report: 2048-token chunked prefill ran out, 1024 ran (at the same fraction)."""
    ran = run("0.5.17", _launch(q4, "0.95", "--chunked-prefill-size", "1024"), **CARD_32)
    assert "non-static-short" not in rules(ran)
    assert ran.budget.max_safe_mem_fraction_static >= 0.95


@pytest.mark.integration
@pytest.mark.parametrize("version, argv, gpu", [
    # The launches tests/doctor holds as working ones (test_rules.base/spec, test_budget, test_cli).
    ("0.5.20", ["--mem-fraction-static", "0.88"], {}),
    ("0.5.20", ["--mem-fraction-static", "0.88", "--context-length", "65536", "--max-running-requests", "8"], {}),
    ("0.5.19", ["--mem-fraction-static", "0.88", "--speculative-algorithm", "NEXTN", "--speculative-draft-model-path",
                "{model}", "--max-running-requests", "48"], dict(gpus=2, gpu_memory=32.0, gpu_free=30.0)),
    ("0.5.15", ["--mem-fraction-static", "0.88", "--kv-cache-dtype", "fp8_e4m3", "--speculative-algorithm", "NEXTN",
                "--speculative-draft-model-path", "{model}", "--max-running-requests", "16",
                "--context-length", "131072"], {}),
    ("0.5.19", ["--mem-fraction-static", "0.88", "--tp-size", "2", "--max-running-requests", "8"],
     dict(gpus=2, gpu_memory=32.0, gpu_free=31.0)),
    ("0.5.23", ["--mem-fraction-static", "0.88"], {}),
])
def test_working_launches_stay_silent(version, argv, gpu, tmp_path):
    model = str(model_folder(tmp_path / "qwen3.8-27b"))
    report = run(version, ["--model-path", model, *(t.format(model=model) for t in argv)], **gpu)
    assert "non-static-short" not in rules(report), report.budget.non_static_terms


@pytest.mark.integration
@pytest.mark.parametrize("version, off", [("0.5.12", ("--disable-cuda-graph",)),
                                          ("0.5.23", ("--cuda-graph-backend-decode", "disabled",
                                                      "--cuda-graph-backend-prefill", "disabled"))])
def test_cuda_graphs_off_or_smaller_need_less(version, off, q4):
    on = run(version, _launch(q4, "0.96"), **CARD_24).budget
    without = run(version, _launch(q4, "0.96", *off), **CARD_24).budget
    assert on.non_static_terms["cuda_graphs"] > 0 and without.non_static_terms["cuda_graphs"] == 0
    assert without.non_static_cuda_graph_max_bs is None
    flag = "--cuda-graph-max-bs" if version == "0.5.12" else "--cuda-graph-max-bs-decode"
    small = run(version, _launch(q4, "0.96", flag, "4"), **CARD_24).budget
    assert small.non_static_cuda_graph_max_bs == 4
    assert small.non_static_terms["cuda_graphs"] < on.non_static_terms["cuda_graphs"]


@pytest.mark.integration
def test_no_finding_depends_on_the_default_free_memory(q4):
    """With --gpu-free given, the card's total (from which the default free memory would come)
    changes neither the rule's figures nor its finding; the release's own tier defaults, which
    also follow the total, are pinned by the flags."""
    argv = _launch(q4, "0.97", "--chunked-prefill-size", "2048", "--cuda-graph-max-bs-decode", "24")
    reports = [run("0.5.19", argv, gpu_memory=total, gpu_free=23.0, sm="8.9") for total in (23.99, 32.0, 80.0)]
    assert "non-static-short" in rules(reports[0])
    for other in reports[1:]:
        assert other.findings == reports[0].findings
        assert other.budget.to_dict() == reports[0].budget.to_dict()


@pytest.mark.integration
def test_json_and_text_report_the_figures(q4, monkeypatch):
    monkeypatch.setenv("PATCHKIT_HOME", str(releases.HOME))
    releases.pristine("0.5.19")
    gpu = ("--gpus", "1", "--gpu-memory", "23.99", "--gpu-free", "23", "--sm", "8.9")
    result = cli("doctor", "--version", "0.5.19", *gpu, "--json", "--", "--model-path", q4, "--mem-fraction-static", "0.97")
    # The prefill graphs' capture (2048 tokens) does not fit 0.69 GiB either: start-up dies there (exit 1).
    assert result.exit_code == 1, result.stdout + result.stderr
    assert [f["rule"] for f in result.json()["findings"] if f["level"] == "error"] == ["cuda-graph-capture"]
    budget = result.json()["budget"]
    assert budget["non_static_available_bytes"] == int(23 * GIB * 0.03)
    assert budget["non_static_needed_bytes"] > budget["non_static_available_bytes"]
    assert 0 < budget["max_safe_mem_fraction_static"] < 0.97
    assert [f["rule"] for f in result.json()["findings"] if f["level"] == "warning"].count("non-static-short") == 1
    text = cli("doctor", "--version", "0.5.19", *gpu, "--", "--model-path", q4, "--mem-fraction-static", "0.97")
    assert "max safe mem-fraction-static" in text.stdout and "warning non-static-short" in text.stdout


@pytest.mark.integration
@pytest.mark.parametrize("version, cap_file", [
    ("0.5.10", "srt/model_executor/cuda_graph_runner.py"),
    ("0.5.19", "srt/model_executor/runner/base_cuda_graph_runner.py")])
def test_decode_graphs_never_larger_than_the_request_pool(version, cap_file, q4):
    # Every release's `get_batch_sizes_to_capture` drops the batch sizes above
    # `req_to_token_pool.size` (the max running requests), explicit --cuda-graph-max-bs or not.
    source = (releases.pristine(version) / "sglang" / cap_file).read_text()
    assert "bs <= num_max_requests" in source and "req_to_token_pool.size" in source
    for extra in ((), ("--cuda-graph-max-bs", "16")):
        one = run(version, _launch(q4, "0.9", "--max-running-requests", "1", *extra), **CARD_24).budget
        assert one.non_static_cuda_graph_max_bs == 1


# --- start-up's CUDA-graph capture (issue 42 item 4, sglang#35777) --------------------------------

@pytest.mark.integration
@pytest.mark.parametrize("version", ["0.5.12", "0.5.17", "0.5.19", "0.5.23"])
def test_decode_capture_sizes_are_the_releases_list(version):
    """The decode batch sizes each release captures, read from its own batch-size function (0.5.10-0.5.13
    `_generate_cuda_graph_batch_sizes`, 0.5.14-0.5.18 `_generate_decode_cuda_graph_batch_sizes`, 0.5.19 on
    `generate_decode_cuda_graph_batch_sizes`), as the release's code gives them: the normal list up to max bs,
    the speculative one, and max bs appended where the list misses it."""
    defaults = non_static.graph_defaults(_release(version))
    assert non_static.decode_capture_sizes(defaults, 24, speculative=False) == [1, 2, 4, 8, 12, 16, 24]
    assert non_static.decode_capture_sizes(defaults, 30, speculative=False) == [1, 2, 4, 8, 12, 16, 24, 30]
    assert non_static.decode_capture_sizes(defaults, 24, speculative=True) == [*range(1, 9), *range(10, 25, 2)]
    big = non_static.decode_capture_sizes(defaults, 576, speculative=False)
    assert big[:5] == [1, 2, 4, 8, 12] and big[-4:] == [496, 512, 544, 576] and len(big) == 5 + 31 + 15 + 3
    assert non_static.decode_capture_sizes(defaults, 5, speculative=False, padding=False) == [1, 2, 3, 4, 5]


def _release(version: str):
    from patchkit.doctor import release_code
    from patchkit.store.target import find_in

    return release_code(find_in(releases.pristine(version)))


CAPTURE_SHORT = [
    # (release, fraction, extra flags): decode graphs up to 256 on a 32 GB card; on 0.5.19 the prefill graphs off,
    # so that a smaller decode max bs alone can fit the capture.
    ("0.5.12", "0.97", ("--cuda-graph-max-bs", "256")),
    ("0.5.19", "0.96", ("--cuda-graph-max-bs", "256", "--cuda-graph-backend-prefill", "disabled")),
]


@pytest.mark.integration
@pytest.mark.parametrize("version, fraction, extra", CAPTURE_SHORT)
def test_a_capture_that_does_not_fit_is_an_error_whose_fixes_rerun_clean(version, fraction, extra, q4):
    argv = _launch(q4, fraction, *extra)
    report = run(version, argv, **CARD_32)
    b = report.budget
    finding = next(f for f in report.findings if f.rule == "cuda-graph-capture")
    assert finding.level == "error"
    assert b.cuda_graph_capture_sizes[-1] == 256 and len(b.cuda_graph_capture_sizes) == 36
    assert b.cuda_graph_capture_bytes > b.non_static_available_bytes == int(30.4 * GIB * (1 - float(fraction)))
    assert f"{b.cuda_graph_capture_bytes / GIB:.2f} GiB" in finding.message and "36 decode graphs" in finding.message
    # Machine-applicable: the recommended fraction first, a decode max bs whose capture fits as the other.
    assert finding.args == ("--mem-fraction-static", f"{b.recommended_mem_fraction_static:.2f}")
    fits = b.cuda_graph_max_bs_fits
    assert fits is not None and 1 < fits < 256
    assert [fix.args[1:] for fix in finding.alternatives] == [(str(fits),)]
    # Re-checked: each fix applied to the line clears the error and brings none.
    from patchkit.doctor.launch import changed

    table = _release(version).flags
    for fix in (finding, *finding.alternatives):
        again = run(version, changed(argv, table, fix.args, fix.remove), **CARD_32)
        assert not [f for f in again.findings if f.level == "error"], [f.rule for f in again.findings]
    # The size the fix names is the largest that fits: one more does not.
    graphs = "--cuda-graph-max-bs" if version == "0.5.12" else "--cuda-graph-max-bs-decode"
    over = run(version, changed(argv, table, (graphs, str(fits + 1))), **CARD_32)
    assert "cuda-graph-capture" in rules(over)


@pytest.mark.integration
@pytest.mark.parametrize("version, fraction, extra", CAPTURE_SHORT)
def test_the_default_graphs_capture_where_256_does_not(version, fraction, extra, q4):
    default = [t for t in extra if t not in ("--cuda-graph-max-bs", "256")]
    report = run(version, _launch(q4, fraction, *default), **CARD_32)
    assert "cuda-graph-capture" not in rules(report), report.budget.cuda_graph_capture_bytes
    assert report.budget.cuda_graph_capture_sizes == [1, 2, 4, 8, 12, 16, 24]


@pytest.mark.integration
@pytest.mark.parametrize("version, fraction, chunk", [("0.5.19", "0.95", 2048), ("0.5.23", "0.95", 4096)])
def test_a_capture_the_prefill_graphs_overfill_offers_a_smaller_chunk(version, fraction, chunk, q4):
    """cuda-graph-capture counts the prefill graphs, captured up to the prefill chunk, so a smaller
    --chunked-prefill-size is a fix of its own (the fix set of issue 46's launch cleared it with 1024 while the
    finding said "no fraction or smaller decode graphs found"): offered, re-checked like the others."""
    argv = _launch(q4, fraction)
    report = run(version, argv, **CARD_32)
    b = report.budget
    finding = next(f for f in report.findings if f.rule == "cuda-graph-capture")
    assert b.cuda_graph_prefill_graphs and b.non_static_chunked_prefill_size == chunk
    assert b.cuda_graph_max_bs_fits is None  # smaller decode graphs alone do not fit: the prefill graphs do not
    chunks = [fix.args for fix in finding.alternatives if fix.args[:1] == ("--chunked-prefill-size",)]
    assert len(chunks) == 1, (finding.fix, [fix.text for fix in finding.alternatives])
    fits = int(chunks[0][1])
    assert 256 <= fits < chunk and fits == b.cuda_graph_chunk_fits
    from patchkit.doctor.launch import changed

    table = _release(version).flags
    again = run(version, changed(argv, table, ("--chunked-prefill-size", str(fits))), **CARD_32)
    assert not [f for f in again.findings if f.level == "error"], [f.rule for f in again.findings]
    # The chunk named is the largest half that fits: twice it does not.
    over = run(version, changed(argv, table, ("--chunked-prefill-size", str(fits * 2))), **CARD_32)
    assert "cuda-graph-capture" in rules(over)


@pytest.mark.integration
@pytest.mark.parametrize("version, gate", [("0.5.10", None), ("0.5.15", None), ("0.5.16", 4.0), ("0.5.17", 4.0),
                                           ("0.5.18", None), ("0.5.23", None)])
def test_the_capture_terms_are_read_from_the_release(version, gate):
    """Issue 42.4's gap, what the code allocates at capture that the estimate missed: the full-attention backend's
    decode-graph state, `init_cuda_graph_state(max_bs, max_num_tokens)` sized by the context (flashinfer, the release's
    default on SM 8.x/12.x: int32 kv indices and a uint8 custom mask, `max_num_tokens * self.max_context_len` each;
    triton: int64 kv indices), and 0.5.16-0.5.17's gate that skips an automatically chosen prefill graph where less
    than 4 GiB is free before its capture (cuda_graph_setup.py, sglang#31204)."""
    defaults = non_static.graph_defaults(_release(version))
    assert defaults.attention_graph_bytes["flashinfer"] == (4 + 1, 0)
    assert defaults.attention_graph_bytes["triton"][0] >= 8
    assert defaults.auto_prefill_min_free_gib == gate


@pytest.mark.integration
def test_the_35777_launch_counts_what_0_5_17_allocates_at_capture(q4):
    """sglang#35777: 0.5.17 on an RTX 5090 (30.4 GiB free), the 4-bit fixture, no draft, the default 2048-token chunk
    and decode graphs to 24. The decode graphs' attention state is counted: 24 rows x the context x 5 B (30 MiB at the
    model's 262,144 tokens); at 0.90-0.94, where the field crashed, less than 4 GiB is left, so the release captures
    no prefill graph unless one is named, and with it named it captures 42; at 0.80 with the prefill graphs off (what
    booted) the capture fits. The field's ~5 GB at capture is not reached: docs/doctor.md lists the terms checked."""
    def budget(*extra):
        return run("0.5.17", _launch(q4, *extra), **CARD_32).budget

    full, short = budget("0.90"), budget("0.90", "--context-length", "4096")
    assert full.context_length == 262_144
    assert full.cuda_graph_capture_bytes - short.cuda_graph_capture_bytes == 24 * 5 * (262_144 - 4096)
    assert full.cuda_graph_prefill_graphs == 0 and full.non_static_available_bytes == int(30.4 * GIB * 0.10)
    named = budget("0.90", "--cuda-graph-backend-prefill", "tc_piecewise")
    assert named.cuda_graph_prefill_graphs == 42
    assert named.cuda_graph_capture_bytes > full.cuda_graph_capture_bytes
    assert budget("0.80").cuda_graph_prefill_graphs == 42  # 6.08 GiB left: the gate lets them be captured
    booted = run("0.5.17", _launch(q4, "0.80", "--cuda-graph-backend-prefill", "disabled"), **CARD_32)
    assert "cuda-graph-capture" not in rules(booted)


@pytest.mark.integration
def test_0_5_17_puts_the_multimodal_feature_pool_in_the_capture(q4):
    """sglang#35777's release resolves an unset --mm-feature-transport to cuda_ipc on a single-node CUDA launch of a
    multimodal model (the fixture has a vision tower), and the tokenizer manager then allocates SGLANG_MM_FEATURE_CACHE_MB
    (EnvInt(1 * 1024)) on the base GPU, which the scheduler's profiling does not see (sglang#34141): it lands in the
    rest the capture runs in. 0.5.18 resolves cpu there. The field's own setting (SGLANG_MM_FEATURE_CACHE_MB=16) and the
    fix the finding offers (--mm-feature-transport cpu) shrink the capture by the pool."""
    source = (releases.pristine("0.5.17") / "sglang" / "srt" / "server_args.py").read_text()
    assert re.search(r'self\.nnodes == 1 and self\.disaggregation_mode == "null":\n(\s*#.*\n)*\s*'
                     r'requested_transport = "cuda_ipc"', source)
    argv = _launch(q4, "0.95")
    report = run("0.5.17", argv, **CARD_32)
    b = report.budget
    assert b.mm_feature_pool_bytes == 1024 * MIB
    small = run("0.5.17", argv, environ={"SGLANG_MM_FEATURE_CACHE_MB": "16"}, **CARD_32)
    assert b.cuda_graph_capture_bytes - small.budget.cuda_graph_capture_bytes == (1024 - 16) * MIB
    assert "cuda-graph-capture" not in rules(small)
    finding = next(f for f in report.findings if f.rule == "cuda-graph-capture")
    assert "multimodal feature pool (1024 MiB, cuda_ipc)" in finding.message
    # Offered only as re-checked (advice.verified keeps the fixes that clear the error).
    assert ("--mm-feature-transport", "cpu") in [f.args for f in (finding, *finding.alternatives)]
    from patchkit.doctor import mm_feature_pool

    assert mm_feature_pool.auto_cuda_ipc(_release("0.5.17"))
    later = _release("0.5.18")  # resolves cpu on one node, and reserves a named cuda_ipc pool in the KV budget
    assert not mm_feature_pool.auto_cuda_ipc(later) and later.multimodal_reservation
