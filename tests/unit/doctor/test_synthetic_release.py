"""`patchkit doctor` in the offline fast tier: a synthetic release the test writes (a small
`sglang/srt/server_args.py` registering a few flags by hand, as SGLang does for its aliases), so
the launch parsing, the flag findings and the bad-input exits run without a download. The same
behaviour on the real releases is the slow tier (tests/doctor/test_cli.py, test_launch.py)."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from testing.cli import run
from testing.doctor import model_folder

GPU = ("--gpus", "1", "--gpu-memory", "80", "--gpu-free", "79", "--sm", "9.0")

SERVER_ARGS = '''
import argparse
import dataclasses


@dataclasses.dataclass
class ServerArgs:
    model_path: str = None
    tp_size: int = 1
    mem_fraction_static: float = None
    kv_cache_dtype: str = "auto"
    disable_radix_cache: bool = False

    @staticmethod
    def add_cli_args(parser: argparse.ArgumentParser):
        parser.add_argument("--model-path", type=str, required=True)
        parser.add_argument("--tensor-parallel-size", "--tp-size", type=int, dest="tp_size", default=ServerArgs.tp_size)
        parser.add_argument("--mem-fraction-static", type=float, default=ServerArgs.mem_fraction_static)
        parser.add_argument("--kv-cache-dtype", type=str, choices=["auto", "fp8_e4m3", "fp8_e5m2"],
                            default=ServerArgs.kv_cache_dtype)
        parser.add_argument("--disable-radix-cache", action="store_true")
'''


@pytest.fixture
def site(tmp_path) -> Path:
    """A release patchkit has no manifest for (0.5.99): sglang/, its version and a dist-info."""
    root = tmp_path / "site"
    (root / "sglang" / "srt").mkdir(parents=True)
    (root / "sglang" / "srt" / "server_args.py").write_text(textwrap.dedent(SERVER_ARGS))
    (root / "sglang" / "version.py").write_text('__version__ = "0.5.99"\n')
    (root / "sglang" / "__init__.py").write_text("from sglang.version import __version__\n")
    info = root / "sglang-0.5.99.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: sglang\nVersion: 0.5.99\n")
    (info / "RECORD").write_text("")
    return root


@pytest.fixture
def model(tmp_path) -> str:
    return str(model_folder(tmp_path / "qwen3.8-27b"))


def findings(site: Path, *launch: str) -> dict[str, list[str]]:
    result = run("doctor", "--site-packages", site, *GPU, "--json", "--", *launch)
    assert result.exit_code in (0, 1), result.stdout + result.stderr
    found: dict[str, list[str]] = {}
    for finding in result.json()["findings"]:
        found.setdefault(finding["rule"], []).append(finding["message"])
    return found


def test_flags_the_release_does_not_have_or_cannot_take_are_errors(site, model):
    result = run("doctor", "--site-packages", site, *GPU, "--", "--model-path", model, "--no-such-flag",
                 "--tp-size", "0", "--kv-cache-dtype", "fp9")
    assert result.exit_code == 1, result.stdout + result.stderr
    assert "--no-such-flag is not a flag of SGLang 0.5.99" in result.stdout
    assert "--tp-size 0: must be at least 1" in result.stdout
    assert "--kv-cache-dtype fp9: is not one of auto, fp8_e4m3, fp8_e5m2" in result.stdout


def test_every_spelling_the_release_registers_is_a_flag(site, model):
    found = findings(site, "--model-path", model, "--tensor-parallel-size", "1", "--kv-cache-dtype", "fp8_e4m3",
                     "--disable-radix-cache", "--mem-fraction-static", "0.85")
    assert "flag-unknown" not in found and "flag-value" not in found, found
    assert "flag-unknown" in findings(site, "--model-path", model, "--enable-torch-symm-mem")


@pytest.mark.parametrize("args, message", [
    (("--",), "no --model-path"),
    (("--", "--model-path", "/does/not/exist"), "/does/not/exist does not exist"),
    (("--", "--model-path", "Qwen/Qwen3.5-27B"), "--model-path Qwen/Qwen3.5-27B is a hub id, not a local folder"),
    (("--sm", "nine", "--", "--model-path", "."), "--sm nine"),
    (("--gpu-memory", "-1", "--", "--model-path", "."), "must be positive"),
])
def test_bad_input_exits_2_with_one_line(site, args, message):
    result = run("doctor", "--site-packages", site, *args)
    assert result.exit_code == 2, result.stdout + result.stderr
    assert result.stderr.startswith("error: ") and message in result.stderr
    assert result.stderr.count("\n") == 1


def test_a_need_beyond_the_free_memory_names_no_fraction(site, model):
    """Outside the static pools this launch needs more than the 1 GiB free: no --mem-fraction-static leaves
    enough, and the report says so instead of a negative fraction."""
    launch = ("--", "--model-path", model, "--mem-fraction-static", "0.5")
    small = ("--gpus", "1", "--gpu-memory", "2", "--gpu-free", "1", "--sm", "9.0")
    text = run("doctor", "--site-packages", site, *small, *launch)
    assert "max safe mem-fraction-static" in text.stdout
    line = next(line for line in text.stdout.splitlines() if "max safe mem-fraction-static" in line)
    assert line.split()[-1] == "none", line
    budget = run("doctor", "--site-packages", site, *small, "--json", *launch).json()["budget"]
    assert budget["max_safe_mem_fraction_static"] is None
    assert budget["non_static_needed_bytes"] > 1 << 30


def test_a_typo_gets_the_flag_it_meant_with_its_value(site, model):
    """flag-unknown says "did you mean" and its fix is machine-applicable: the flag meant, with the value the typo
    had, in place of the typo (--json: fix_args and fix_remove); applied, the launch has no error."""
    result = run("doctor", "--site-packages", site, *GPU, "--json", "--", "--model-path", model,
                 "--mem-fraction-statc", "0.8")
    assert result.exit_code == 1, result.stdout + result.stderr
    typo = next(f for f in result.json()["findings"] if f["rule"] == "flag-unknown")
    assert typo["message"].endswith("did you mean --mem-fraction-static?")
    assert typo["fix_args"] == ["--mem-fraction-static", "0.8"] and typo["fix_remove"] == ["--mem-fraction-statc"]
    assert typo["fix"] == "--mem-fraction-static 0.8 in place of --mem-fraction-statc"
    assert typo["fix_command"] == [] and typo["alternatives"] == [{"fix": "drop --mem-fraction-statc", "fix_args": [],
                                                                   "fix_remove": ["--mem-fraction-statc"],
                                                                   "fix_command": []}]
    fixed = run("doctor", "--site-packages", site, *GPU, "--json", "--", "--model-path", model,
                *typo["fix_args"])
    # (This synthetic release has no Qwen3.5 class: feature-missing stays, an error the launch had before.)
    assert not [f for f in fixed.json()["findings"] if f["level"] == "error" and f["rule"].startswith("flag-")]


def test_bad_values_get_a_value_the_release_takes(site, model):
    result = run("doctor", "--site-packages", site, *GPU, "--json", "--", "--model-path", model, "--tp-size", "0",
                 "--kv-cache-dtype", "fp9", "--disable-radix-cache=true")
    fixes = {f["message"].split()[0]: f for f in result.json()["findings"] if f["rule"] == "flag-value"}
    assert fixes["--tp-size"]["fix_remove"] == ["--tp-size"] and "default: 1" in fixes["--tp-size"]["fix"]
    assert fixes["--kv-cache-dtype"]["fix_args"] in (["--kv-cache-dtype", "fp8_e4m3"], ["--kv-cache-dtype", "fp8_e5m2"])
    assert fixes["--disable-radix-cache"]["fix_args"] == ["--disable-radix-cache"]  # the switch alone
    assert all("<" not in f["fix"] for f in result.json()["findings"])


def test_the_free_memory_given_is_only_the_free_memory(site, model):
    """--gpu-free without the card's total: the budget takes it as the free memory at load and nothing else (no
    default fraction estimated from it, no card-size default from it), and says what it assumed instead."""
    launch = ("--", "--model-path", model)
    budget = run("doctor", "--site-packages", site, "--gpus", "1", "--gpu-free", "23", "--sm", "8.9", "--json",
                 *launch).json()["budget"]
    assert budget["free_at_load_gib"] == 23 and budget["mem_fraction_static"] is None
    assumed = {term["term"]: term for term in budget["assumed"]}
    assert "the card's total memory" in assumed and "free at load" not in assumed
    estimated = run("doctor", "--site-packages", site, "--gpus", "1", "--gpu-memory", "24", "--sm", "8.9", "--json",
                    *launch).json()["budget"]
    terms = {term["term"]: term for term in estimated["assumed"]}
    assert terms["free at load"]["low"] < terms["free at load"]["value"] < terms["free at load"]["high"]
    assert "mem-fraction-static" in terms
