"""Launch lines parsed against each release's own argument parser, read from its source (what needs
no release: tests/unit/doctor/test_launch.py)."""

from __future__ import annotations

import pytest

from patchkit.doctor.flags import flag_table
from patchkit.doctor.launch import REMOVED_FLAGS, parse
from testing.releases import pristine
from tests.unit.doctor.test_launch import THIRTY

RELEASES = [f"0.5.{n}" for n in range(14, 24)]


@pytest.mark.integration
@pytest.mark.parametrize("version", RELEASES)
def test_thirty_real_flags_parse_on_every_release(version):
    table = flag_table(pristine(version) / "sglang")
    launch = parse(THIRTY, table)
    assert (launch.unknown, launch.bad_values, launch.stray, launch.deprecated, launch.unlisted) == ([], [], [], [], [])
    assert len(launch.explicit) == 30
    assert launch.get("tp_size") == 2 and launch.get("mem_fraction_static") == 0.85
    assert launch.get("trust_remote_code") is True and launch.get("disable_custom_all_reduce") is True
    assert launch.get("speculative_algorithm") == "NEXTN" and launch.get("page_size") == 1
    assert launch.get("mamba_radix_cache_strategy") == "extra_buffer"


@pytest.mark.integration  # reads a real release (testing.releases.pristine): slow tier
def test_removed_flags_are_deprecated_aliases_before_and_gone_in_0_5_20():
    before = flag_table(pristine("0.5.19") / "sglang")
    after = flag_table(pristine("0.5.20") / "sglang")
    for old, new in REMOVED_FLAGS.items():
        assert before.get(old) is not None and before.get(old).deprecated_for == new, old
        assert after.get(old) is None, old
        assert after.get(new.partition("=")[0]) is not None, new


@pytest.mark.integration  # reads a real release (testing.releases.pristine): slow tier
def test_replayssm_flag_renamed():
    assert flag_table(pristine("0.5.15") / "sglang").get("--enable-gdn-replayssm-spec") is None
    assert flag_table(pristine("0.5.16") / "sglang").get("--enable-gdn-replayssm-spec").deprecated_for is None
    assert flag_table(pristine("0.5.17") / "sglang").get("--enable-linear-replayssm-spec") is not None


@pytest.mark.integration  # reads a real release (testing.releases.pristine): slow tier
def test_parse_shapes():
    table = flag_table(pristine("0.5.20") / "sglang")
    launch = parse(["--model", "/m", "--mem-fraction-static=0.8", "--no-such-flag", "x", "y", "--tp", "4",
                    "--cuda-graph-bs-decode", "1", "2", "4", "--mem-fraction-static", "oops", "stray"], table)
    assert launch.get("model_path") == "/m"  # alias
    assert launch.unknown == ["--no-such-flag"]  # its values are skipped, not stray
    assert launch.get("tp_size") == 4  # unique prefix, as argparse's allow_abbrev
    assert launch.get("cuda_graph_bs_decode") == [1, 2, 4]
    assert launch.bad_values == [("--mem-fraction-static", "oops", "is not a valid float")]
    assert launch.get("mem_fraction_static") == 0.8
    assert launch.stray == ["stray"]
    assert parse(["--mamba-radix-cache-strategy", "bogus"], table).bad_values


@pytest.mark.integration  # reads a real release (testing.releases.pristine): slow tier
def test_choices_are_checked():
    table = flag_table(pristine("0.5.20") / "sglang")
    assert "fp8_e4m3" in table.get("--kv-cache-dtype").choices
    launch = parse(["--attention-backend", "flashinfr", "--quantization", "fp8"], table)
    # ATTENTION_BACKEND_CHOICES is a module-level list that plugins may extend: a warning, not an error.
    assert [(n, v) for n, v, _ in launch.unlisted] == [("--attention-backend", "flashinfr")]
    assert launch.bad_values == []


@pytest.mark.integration  # reads a real release (testing.releases.pristine): slow tier
def test_repeated_flags_last_wins_and_booleans():
    table = flag_table(pristine("0.5.20") / "sglang")
    launch = parse(["--tp-size", "2", "--tp-size=4", "--disable-radix-cache", "--disable-radix-cache"], table)
    assert launch.get("tp_size") == 4 and launch.get("disable_radix_cache") is True  # as argparse: the last wins
    assert (launch.bad_values, launch.stray) == ([], [])
    # argparse rejects `=value` on a flag that takes none ("ignored explicit argument").
    launch = parse(["--disable-radix-cache=true"], table)
    assert launch.bad_values == [("--disable-radix-cache", "true", "takes no value (write the flag alone)")]
    assert launch.get("disable_radix_cache") is False


@pytest.mark.integration  # reads a real release (testing.releases.pristine): slow tier
@pytest.mark.parametrize("argv, why", [
    (["--tp-size", "0"], "must be at least 1"),
    (["--tp-size=-1"], "must be at least 1"),
    (["--max-running-requests", "0"], "must be at least 1"),
    (["--context-length", "0"], "must be at least 1"),
    (["--max-mamba-cache-size", "-5"], "must be at least 1"),
    (["--speculative-num-draft-tokens", "0"], "must be at least 1"),
    (["--mem-fraction-static", "1.5"], "must be a fraction of the GPU memory, above 0 and at most 1"),
    (["--mem-fraction-static", "0"], "must be a fraction of the GPU memory, above 0 and at most 1"),
    (["--mamba-full-memory-ratio", "-0.5"], "must be above 0"),
    (["--mamba-full-memory-ratio", "inf"], "must be a finite number"),
    (["--mem-fraction-static", "nan"], "must be a finite number"),
])
def test_values_sglang_cannot_run_with(argv, why):
    table = flag_table(pristine("0.5.20") / "sglang")
    launch = parse(argv, table)
    assert [w for _, _, w in launch.bad_values] == [why]
    flag = table.get(argv[0].partition("=")[0])
    assert launch.get(flag.dest) == flag.default  # the budget keeps the release's default
    assert not parse([argv[0].partition("=")[0], "1"], table).bad_values  # 1 is fine for every one of them


@pytest.mark.integration
@pytest.mark.parametrize("version", ["0.5.10", "0.5.12", "0.5.13", "0.5.14"])
def test_tp_size_alias_counts_where_the_parser_renames_it(version, tmp_path):
    """0.5.10-0.5.13 register `"--tensor-parallel-size", "--tp-size"` (dest tensor_parallel_size)
    and `from_cli_args` copies it into tp_size: both spellings are TP 2 there as on 0.5.14."""
    from testing.doctor import model_folder, rules, run

    model = str(model_folder(tmp_path / "m"))
    for spelling in ("--tp-size", "--tensor-parallel-size"):
        report = run(version, ["--model-path", model, spelling, "2", "--mem-fraction-static", "0.85"],
                     gpus=1, gpu_memory=24.0, gpu_free=23.0, sm="8.6")
        assert report.budget.tp_size == 2, spelling
        assert "gpu-count" in rules(report)


@pytest.mark.integration
def test_boolean_optional_negation_and_store_const_spellings():
    table = flag_table(pristine("0.5.12") / "sglang")
    launch = parse(["--model-path", "m", "--no-lora-strict-loading", "--context-length", "128k"], table)
    assert launch.get("lora_strict_loading") is False and launch.get("context_length") == 128000
    table = flag_table(pristine("0.5.17") / "sglang")
    assert parse(["--enable-breakable-cuda-graph"], table).get("cuda_graph_backend_prefill") == "breakable"
