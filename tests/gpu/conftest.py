"""GPU smoke tests: the real SGLang server with random weights (`--load-format dummy`).

They need a CUDA device and a full SGLang install (its compiled kernels) in this interpreter;
elsewhere every test here is skipped with the reason. The SGLang under test is an overlay
folder (`pip install --no-deps --target`) of the installed version, patched or not, put in
front of the installed one with PYTHONPATH: the installed site-packages are never touched.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from testing.releases import copy_release


def _skip_reason() -> str | None:
    try:
        import torch
    except ImportError:
        return "no torch in this interpreter"
    if not torch.cuda.is_available():
        return "no CUDA device"
    if importlib.util.find_spec("sgl_kernel") is None:
        return "no full SGLang install (sgl_kernel missing)"
    try:
        importlib.metadata.version("sglang")
    except importlib.metadata.PackageNotFoundError:
        return "SGLang is not installed in this interpreter"
    return None


def pytest_collection_modifyitems(config, items):
    reason = _skip_reason()
    for item in items:
        if "gpu" in item.keywords and reason:
            item.add_marker(pytest.mark.skip(reason=reason))


def tiny_qwen3_5(folder: Path, layers: int = 8, interval: int = 4) -> Path:
    """A Qwen3.5-architecture config: `layers` layers, full attention every `interval`, one MTP layer."""
    layer_types = ["full_attention" if (i + 1) % interval == 0 else "linear_attention" for i in range(layers)]
    text = {
        "model_type": "qwen3_5_text", "hidden_size": 256, "num_hidden_layers": layers,
        "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 64,
        "linear_key_head_dim": 64, "linear_value_head_dim": 64, "linear_num_key_heads": 2,
        "linear_num_value_heads": 4, "linear_conv_kernel_dim": 4, "intermediate_size": 512,
        "vocab_size": 32768, "layer_types": layer_types, "full_attention_interval": interval,
        "mtp_num_hidden_layers": 1, "max_position_embeddings": 131072, "rms_norm_eps": 1e-6,
        "tie_word_embeddings": False, "rope_theta": 10000000.0,
        "rope_parameters": {"rope_type": "default", "rope_theta": 10000000.0, "mrope_section": [8, 12, 12],
                            "mrope_interleaved": True, "partial_rotary_factor": 0.25},
    }
    config = {"architectures": ["Qwen3_5ForConditionalGeneration"], "model_type": "qwen3_5",
              "tie_word_embeddings": False, "text_config": text,
              "vision_config": {"depth": 1, "hidden_size": 64, "num_heads": 2, "out_hidden_size": 256}}
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "config.json").write_text(json.dumps(config))
    return folder


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class Server:
    """One SGLang server process on loopback; its log is kept for the assertions."""

    def __init__(self, overlay: Path, model: Path, log: Path, *args: str) -> None:
        self.port = free_port()
        self.log = log
        env = {**os.environ, "PYTHONPATH": str(overlay)}
        argv = [sys.executable, "-m", "sglang.launch_server", "--model-path", str(model), "--load-format", "dummy",
                "--skip-tokenizer-init", "--host", "127.0.0.1", "--port", str(self.port), *args]
        self.process = subprocess.Popen(argv, stdout=log.open("w"), stderr=subprocess.STDOUT, env=env,
                                        start_new_session=True)

    def text(self) -> str:
        return self.log.read_text(errors="replace")

    def wait_ready(self, timeout: float = 600) -> None:
        deadline = time.time() + timeout
        while time.time() < deadline:
            if self.process.poll() is not None:
                raise AssertionError(f"server exited with {self.process.returncode}:\n{self.text()[-4000:]}")
            if self.healthy():
                return
            time.sleep(2)
        raise AssertionError(f"server not ready in {timeout}s:\n{self.text()[-4000:]}")

    def healthy(self) -> bool:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/health", timeout=5) as response:
                return response.status == 200
        except OSError:
            return False

    def generate(self, input_ids: list[int], max_new_tokens: int = 8, timeout: float = 900) -> dict:
        body = json.dumps({"input_ids": input_ids, "sampling_params": {"max_new_tokens": max_new_tokens}}).encode()
        request = urllib.request.Request(f"http://127.0.0.1:{self.port}/generate", data=body,
                                         headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(request, timeout=timeout) as response:
            return json.loads(response.read())

    def stop(self) -> None:
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(timeout=60)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)


def last_int(pattern: str, text: str) -> int:
    found = re.findall(pattern, text)
    assert found, f"no match for {pattern!r} in the server log"
    return int(found[-1])


def draft_weight_gb(text: str) -> float:
    found = re.findall(r"Load weight end\..*type=Qwen3_5ForCausalLMMTP.*mem usage=([0-9.]+) GB", text)
    assert found, "no 'Load weight end' line of the MTP draft in the server log"
    return float(found[-1])


@pytest.fixture(scope="session")
def installed_version() -> str:
    return importlib.metadata.version("sglang")


@pytest.fixture
def overlays(tmp_path, installed_version):
    """(pristine, patched) overlays of the installed SGLang version, patched with `patch_ids`."""
    from testing.cli import run

    def make(*patch_ids: str) -> tuple[Path, Path]:
        plain = copy_release(installed_version, tmp_path / "pristine")
        patched = copy_release(installed_version, tmp_path / "patched")
        only = [arg for pid in patch_ids for arg in ("--only", pid)]
        result = run("apply", "--site-packages", patched, *only)
        assert result.exit_code == 0, result.stderr
        return plain, patched

    return make
