"""Model facts from a local model folder: config.json, quantization, weight bytes, MTP weights."""

from __future__ import annotations

import json
import struct
from dataclasses import dataclass, field
from pathlib import Path

from patchkit.errors import UsageError

# Bytes per element of the safetensors dtypes.
DTYPE_BYTES = {"F64": 8, "I64": 8, "U64": 8, "F32": 4, "I32": 4, "U32": 4, "F16": 2, "BF16": 2, "I16": 2,
               "U16": 2, "F8_E4M3": 1, "F8_E5M2": 1, "F8_E8M0": 1, "I8": 1, "U8": 1, "BOOL": 1, "F4": 1}
_MAX_HEADER = 100 * 1024 * 1024


@dataclass
class ModelFacts:
    path: Path
    config: dict
    text: dict  # `text_config` when present (Qwen3.5/3.8, VLMs), else the config itself
    weights_bytes: int | None = None
    weights_source: str = "unknown"  # "index", "headers" or "unknown"
    tensor_names: list[str] = field(default_factory=list)
    mtp_bytes: int | None = None  # bytes of the mtp.* tensors (None: not known)

    @property
    def architectures(self) -> list[str]:
        return list(self.config.get("architectures") or [])

    @property
    def arch(self) -> str:
        return self.architectures[0] if self.architectures else ""

    @property
    def quantization(self) -> dict | None:
        q = self.config.get("quantization_config") or self.text.get("quantization_config")
        return q if isinstance(q, dict) else None

    @property
    def has_vision(self) -> bool:
        return "vision_config" in self.config or "audio_config" in self.config

    @property
    def layer_types(self) -> list[str]:
        return list(self.text.get("layer_types") or self.text.get("layers_block_type") or [])

    @property
    def is_hybrid_gdn(self) -> bool:
        """Gated DeltaNet hybrid (Qwen3-Next, Qwen3.5/3.8): linear-attention heads in the config."""
        return "linear_num_value_heads" in self.text and "linear_key_head_dim" in self.text

    @property
    def mtp_layers(self) -> int:
        return int(self.text.get("mtp_num_hidden_layers") or self.text.get("num_nextn_predict_layers") or 0)

    @property
    def has_mtp_weights(self) -> bool | None:
        if not self.tensor_names:
            return None
        return any(name.startswith("mtp.") or ".mtp." in name for name in self.tensor_names)


def _load_json(path: Path) -> dict:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise UsageError(f"{path} does not exist") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise UsageError(f"cannot read {path}: {exc}") from None
    except json.JSONDecodeError as exc:
        raise UsageError(f"{path} is not valid JSON ({exc.msg}, line {exc.lineno})") from None
    if not isinstance(data, dict):
        raise UsageError(f"{path} does not hold a JSON object")
    return data


def safetensors_header(path: Path) -> dict:
    """The JSON header of a .safetensors file (8-byte little-endian length, then JSON)."""
    try:
        with open(path, "rb") as handle:
            raw = handle.read(8)
            if len(raw) != 8:
                raise UsageError(f"{path} is not a safetensors file (shorter than its header length)")
            (length,) = struct.unpack("<Q", raw)
            if length > _MAX_HEADER:
                raise UsageError(f"{path} is not a safetensors file (header length {length})")
            header = json.loads(handle.read(length).decode("utf-8"))
    except OSError as exc:
        raise UsageError(f"cannot read {path}: {exc.strerror}") from None
    except (UnicodeDecodeError, json.JSONDecodeError):
        raise UsageError(f"{path} is not a safetensors file (its header is not JSON)") from None
    if not isinstance(header, dict):
        raise UsageError(f"{path} is not a safetensors file")
    return header


def _tensor_bytes(info: dict) -> int:
    offsets = info.get("data_offsets")
    if isinstance(offsets, list) and len(offsets) == 2:
        return int(offsets[1]) - int(offsets[0])
    count = 1
    for dim in info.get("shape") or []:
        count *= int(dim)
    return count * DTYPE_BYTES.get(str(info.get("dtype")), 2)


def load(folder: str | Path) -> ModelFacts:
    """Read a model folder. Missing weights are not an error (their size is then unknown)."""
    path = Path(folder)
    if not path.is_dir():
        raise UsageError(f"--model-path {folder} is not a local folder (doctor reads config.json from it)")
    config = _load_json(path / "config.json")
    text = config.get("text_config") if isinstance(config.get("text_config"), dict) else config
    facts = ModelFacts(path=path, config=config, text=text)
    index = path / "model.safetensors.index.json"
    headers: dict[str, dict] = {}
    for st in sorted(path.glob("*.safetensors")):
        header = safetensors_header(st)
        headers.update({k: v for k, v in header.items() if k != "__metadata__" and isinstance(v, dict)})
    if index.is_file():
        data = _load_json(index)
        total = (data.get("metadata") or {}).get("total_size")
        weight_map = data.get("weight_map") or {}
        facts.tensor_names = sorted(weight_map)
        if isinstance(total, (int, float)) and total > 0:
            facts.weights_bytes, facts.weights_source = int(total), "index"
    if headers:
        if not facts.tensor_names:
            facts.tensor_names = sorted(headers)
        if facts.weights_bytes is None:
            facts.weights_bytes, facts.weights_source = sum(_tensor_bytes(v) for v in headers.values()), "headers"
        mtp = [v for k, v in headers.items() if k.startswith("mtp.") or ".mtp." in k]
        facts.mtp_bytes = sum(_tensor_bytes(v) for v in mtp) if mtp else 0
    return facts
