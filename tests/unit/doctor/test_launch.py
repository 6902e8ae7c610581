"""Launch lines read without a release: a real-world line's 30 flags, a pasted command line (the
lines parsed against each release's own argument parser: tests/doctor/test_launch.py)."""

from __future__ import annotations


# A real-world launch line: 30 flags, every one of them accepted by 0.5.14-0.5.23.
THIRTY = [
    "--model-path", "/models/Qwen3.8-27B", "--served-model-name", "qwen3.8", "--host", "0.0.0.0",
    "--port", "30000", "--tp-size", "2", "--dtype", "bfloat16", "--kv-cache-dtype", "fp8_e4m3",
    "--mem-fraction-static", "0.85", "--max-running-requests", "32", "--context-length", "131072",
    "--chunked-prefill-size", "4096", "--page-size", "1", "--trust-remote-code",
    "--attention-backend", "flashinfer", "--speculative-algorithm", "NEXTN",
    "--speculative-draft-model-path", "/models/Qwen3.8-27B", "--speculative-num-steps", "3",
    "--speculative-eagle-topk", "1", "--speculative-num-draft-tokens", "4", "--mamba-ssm-dtype", "bfloat16",
    "--max-mamba-cache-size", "160", "--mamba-radix-cache-strategy", "extra_buffer",
    "--reasoning-parser", "qwen3", "--tool-call-parser", "qwen3_coder", "--disable-custom-all-reduce",
    "--enable-metrics", "--log-level", "info", "--linear-attn-backend", "triton", "--watchdog-timeout", "600",
    "--schedule-policy", "lpm",
]


def test_thirty_flags_are_thirty():
    assert sum(1 for token in THIRTY if token.startswith("--")) == 30


def test_a_pasted_command_line():
    from patchkit.doctor.launch import split_command

    assert split_command(["--model-path", "m"]) == ({}, ["--model-path", "m"])
    assert split_command(["SGLANG_MAMBA_SSM_DTYPE=bfloat16", "python3", "-m", "sglang.launch_server", "--tp", "2"]) \
        == ({"SGLANG_MAMBA_SSM_DTYPE": "bfloat16"}, ["--tp", "2"])
    assert split_command(["env", "X=1", "sglang", "serve", "--tp", "2"]) == ({"X": "1"}, ["--tp", "2"])
