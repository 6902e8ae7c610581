"""Helpers for the doctor tests: model folders in tmp dirs, and one call to diagnose()."""

from __future__ import annotations

import json
import struct
from pathlib import Path

from patchkit.doctor import diagnose
from patchkit.doctor.gpu import Overrides
from patchkit.doctor.report import Report
from patchkit.store.target import find_in
from testing.releases import pristine

REPO = Path(__file__).resolve().parents[1]
QWEN38 = REPO / "tests" / "fixtures" / "qwen3.8-27b" / "config.json"
GIB = 1 << 30


def write_safetensors_header(path: Path, tensors: dict[str, tuple[str, list[int]]]) -> None:
    """A safetensors file holding only its header (the doctor never reads tensor data)."""
    sizes = {"BF16": 2, "F16": 2, "F32": 4, "F8_E4M3": 1, "I32": 4, "U8": 1}
    header, offset = {}, 0
    for name, (dtype, shape) in tensors.items():
        n = sizes[dtype]
        for dim in shape:
            n *= dim
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [offset, offset + n]}
        offset += n
    raw = json.dumps(header).encode()
    path.write_bytes(struct.pack("<Q", len(raw)) + raw)


def model_folder(folder: Path, config: dict | None = None, total_size: int | None = 30 * GIB,
                 tensors: dict[str, tuple[str, list[int]]] | None = None, mtp: bool = True) -> Path:
    """A model folder: config.json (default: the Qwen3.8-27B fixture), the index with
    metadata.total_size, and (optionally) a header-only safetensors shard."""
    folder.mkdir(parents=True, exist_ok=True)
    config = json.loads(QWEN38.read_text()) if config is None else config
    (folder / "config.json").write_text(json.dumps(config))
    if tensors is None and mtp:
        tensors = {"mtp.fc.weight": ("BF16", [5120, 10240])}  # 100 MiB
    names = ["model.language_model.embed_tokens.weight", *(tensors or {})]
    if total_size is not None:
        index = {"metadata": {"total_size": total_size},
                 "weight_map": {name: "model-00001-of-00001.safetensors" for name in names}}
        (folder / "model.safetensors.index.json").write_text(json.dumps(index))
    if tensors:
        write_safetensors_header(folder / "model-00001-of-00001.safetensors", tensors)
    return folder


def run(version: str, argv: list[str], states: dict[str, str] | None = None, environ: dict | None = None,
        **gpu) -> Report:
    """diagnose() against a real release, with GPU facts from arguments only (no nvidia-smi)."""
    gpu = {"gpus": 1, "gpu_memory": 80.0, "gpu_free": 79.0, "sm": "9.0", **gpu}
    return diagnose(find_in(pristine(version)), argv, Overrides(**gpu), probe=False,
                    environ={} if environ is None else environ, states=states)


def rules(report: Report) -> set[str]:
    return {f.rule for f in report.findings}
