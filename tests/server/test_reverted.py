"""`patchkit revert` on a patched venv, then a real SGLang server from it: it serves, with no
runtime report anywhere (no line, no `/server_info` field, no gauge), and `verify --url` says that
the server carries none (exit 3)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from testing import server, server_checks
from testing.cli import run
from testing.server_checks import Served

pytestmark = pytest.mark.server


@pytest.fixture(scope="module")
def reverted(version, launch, tmp_path_factory) -> Served:
    python = server.python_for(version, tmp_path_factory.mktemp(f"venv-{version}"))
    assert run("apply", "--python", python).exit_code == 0
    site = server.site_packages(python.parents[1])
    assert (site / "sglang_patchkit_runtime").is_dir()
    assert run("revert", "--python", python).exit_code == 0
    assert not (site / "sglang_patchkit_runtime").exists() and not (site / ".patchkit" / "state.json").exists()
    return Served(launch(python), site, {})


def test_it_serves(reverted):
    assert server_checks.generate(reverted.server)["meta_info"]["completion_tokens"] == 8


def test_no_report_anywhere(reverted):
    assert reverted.server.patchkit_lines() == []
    [rank] = server_checks.server_info(reverted.server)["internal_states"]
    assert "patchkit" not in rank and rank  # SGLang's own fields are there
    assert server_checks.gauge(reverted.server) == {}


def test_verify_url_says_there_is_no_report(reverted):
    result = run("verify", "--url", reverted.server.url)
    assert result.exit_code == 3, (result.stdout, result.stderr)
    assert f"(SGLang {reverted.server.version}) carries no patchkit runtime report" in result.stderr, result.stderr


def _host_capacity_gib() -> float:
    """The CPU engine's "GPU memory capacity" (`get_device_memory_capacity("cpu")`: `get_cpu_memory_capacity`, every
    release the tier starts): the host's total memory (capped by the cgroup's memory.max where set) over its NUMA
    nodes, in whole MiB; what its default --mem-fraction-static and card-size defaults are computed from."""
    total = int(next(line.split()[1] for line in Path("/proc/meminfo").read_text().splitlines()
                     if line.startswith("MemTotal:"))) * 1024
    limit = Path("/sys/fs/cgroup/memory.max")
    if limit.exists() and limit.read_text().strip().isdigit():
        total = min(total, int(limit.read_text()))
    nodes = [n for n in Path("/sys/devices/system/node").glob("node[0-9]*") if (n / "cpulist").read_text().strip()] \
        if Path("/sys/devices/system/node").is_dir() else []
    return (total / max(1, len(nodes))) // (1 << 20) / 1024


def test_doctor_gives_the_servers_own_pool(reverted):
    """doctor held to a real engine (issue 46 item 5): the release sizes the CPU engine's KV pool through the same
    code as a GPU's (`ModelRunner.init_memory_pool` -> `KVCacheConfigurator`: `_profile_available_bytes`, the pool
    configurator's cell, `_apply_token_constraints`, page alignment, `resolve_max_num_reqs`; 0.5.17, 0.5.19 and
    0.5.23 alike). Only "available memory" differs: `get_available_gpu_memory("cpu")` is the host's free memory
    (psutil's `available`, from 0.5.23 also capped by the cgroup's free memory) over its NUMA nodes, read once before
    the weights load and again when the pool is sized, so on a shared host the difference holds every other
    process's allocations as well as the weights, and the log gives both to 0.01 GB (40,000 tokens of this model's
    256 B cell): the profiled pool is not reproducible to the token from the log, and the tier caps it
    (`--max-total-tokens 2048`, testing/server.py) so as not to allocate gigabytes of a shared host. So, for the same
    launch line, with the server's own "avail mem" as --gpu-free and the host's capacity as --gpu-memory: doctor's
    KV tokens (the cap, below the profile on both sides: the release did not say the cap was above it), max running
    requests, default --mem-fraction-static (the release's heuristic on the host's capacity), KV dtype and page
    size equal the server's, and its cell is the release's for this config at the server's KV dtype."""
    served = reverted.server
    figures = server_checks.memory_figures(served)
    python = reverted.site.parents[2] / "bin" / "python"
    launch = list(served.argv[served.argv.index("sglang.launch_server") + 1:])
    result = run("doctor", "--python", python, "--gpu-free", f"{figures.avail_before_weights_gib:.2f}",
                 "--gpu-memory", f"{_host_capacity_gib():.6f}", "--json", "--", *launch)
    assert result.exit_code == 0, (result.stdout, result.stderr)
    budget = result.json()["budget"]
    assert not figures.cap_above_profile and figures.kv_tokens == figures.max_total_num_tokens, figures
    assert budget["kv_tokens"] == figures.max_total_num_tokens, (budget, figures)
    assert budget["kv_budget_bytes"] // budget["kv_bytes_per_token"] > figures.max_total_num_tokens  # doctor's cap too
    assert budget["effective_max_running_requests"] == figures.max_running_requests, (budget, figures)
    assert budget["context_length"] == figures.context_len, (budget, figures)
    assert (budget["mem_fraction_static"], budget["mem_fraction_source"]) == (figures.mem_fraction_static, "estimate")
    assert budget["weights_from"] == "model classes", budget
    config = json.loads((Path(launch[launch.index("--model-path") + 1]) / "config.json").read_text())
    dtype_bytes = {"float16": 2, "bfloat16": 2, "float32": 4}[figures.kv_dtype]
    assert budget["kv_dtype_bytes"] == dtype_bytes, (budget, figures)
    assert budget["kv_bytes_per_token"] == (config["num_hidden_layers"] * config["num_key_value_heads"]
                                            * config["head_dim"] * 2 * dtype_bytes), budget
    assert figures.page_size == 1 and budget["kv_tokens"] % figures.page_size == 0
