"""Model facts from a local model folder: config.json, quantization, weight bytes, MTP weights."""

from __future__ import annotations

import json
import os
import stat
import struct
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from patchkit.base.errors import EnvironmentFailure, UsageError
from patchkit.base.util import BadJson, TooLarge, parse_json, read_regular

if TYPE_CHECKING:
    from patchkit.doctor.launch import Launch

# Bytes per element of the safetensors dtypes.
DTYPE_BYTES = {"F64": 8, "I64": 8, "U64": 8, "F32": 4, "I32": 4, "U32": 4, "F16": 2, "BF16": 2, "I16": 2,
               "U16": 2, "F8_E4M3": 1, "F8_E5M2": 1, "F8_E8M0": 1, "I8": 1, "U8": 1, "BOOL": 1, "F4": 1}
# Bytes per element of the dtypes config.json and --dtype name.
CONFIG_DTYPE_BYTES = {"float32": 4, "fp32": 4, "bfloat16": 2, "bf16": 2, "float16": 2, "fp16": 2, "half": 2}
_MAX_HEADER = 100 * 1024 * 1024
MAX_JSON = 64 * 1024 * 1024  # config.json and the index are kilobytes; a bigger one is not a model config
# The largest number of bytes a model (or one tensor) is believed to have: a petabyte. Past it a
# size is a corrupt or hostile file (`1e400` reads as Infinity), not weights to budget for.
MAX_BYTES = 10**15
MAX_DIMENSION = 2**40  # a config's geometry number or a tensor dimension past this is not a model

# The config.json numbers the budget reads: each, when present and not null, must be a whole number
# at least this large (a typo there would otherwise surface as a crash or a silent nonsense budget).
GEOMETRY_KEYS = {"num_hidden_layers": 1, "num_attention_heads": 1, "num_key_value_heads": 1, "head_dim": 1,
                 "hidden_size": 1, "vocab_size": 1, "max_position_embeddings": 1, "full_attention_interval": 1,
                 "linear_num_key_heads": 1, "linear_num_value_heads": 1, "linear_key_head_dim": 1,
                 "linear_value_head_dim": 1, "linear_conv_kernel_dim": 2, "mtp_num_hidden_layers": 0,
                 "num_nextn_predict_layers": 0}
# A Gated DeltaNet hybrid needs all four to size its state.
GDN_KEYS = ("linear_num_key_heads", "linear_num_value_heads", "linear_key_head_dim", "linear_value_head_dim")


@dataclass
class ModelFacts:
    path: Path
    config: dict
    text: dict  # `text_config` when present (Qwen3.5/3.8, VLMs), else the config itself
    weights_bytes: int | None = None
    weights_source: str = "unknown"  # "index", "headers" or "unknown"
    tensor_names: list[str] = field(default_factory=list)
    mtp_bytes: int | None = None  # bytes of the mtp.* tensors (None: not known)
    tensor_bytes: dict[str, int] = field(default_factory=dict)  # from the safetensors headers (empty: not read)
    headers_complete: bool = False  # the headers size every tensor the index names (or there is no index)

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
        return all(self.text.get(key) is not None for key in GDN_KEYS)

    @property
    def mtp_layers(self) -> int:
        return int(self.text.get("mtp_num_hidden_layers") or self.text.get("num_nextn_predict_layers") or 0)

    def missing_fields(self) -> tuple[list[str], list[str]]:
        """The fields a Qwen3.5/3.8 `config.json` carries on the hub (its text_config) that this one lacks: (those
        the release's classes cannot be built without, those they take a default for). `rope_parameters` (or the
        older `rope_scaling`) gives the RoPE type and the mrope sections (without it: 'Unknown RoPE scaling type,
        rope_scaling is {}'); `partial_rotary_factor` and `attn_output_gate` default to 1.0 and true."""
        if not self.arch.startswith("Qwen3_5"):
            return [], []
        text = self.text
        needed = [] if isinstance(text.get("rope_parameters") or text.get("rope_scaling"), dict) else ["rope_parameters"]
        return needed, [key for key in ("partial_rotary_factor", "attn_output_gate") if key not in text]

    @property
    def has_mtp_weights(self) -> bool | None:
        if not self.tensor_names:
            return None
        return any(name.startswith("mtp.") or ".mtp." in name for name in self.tensor_names)


def _load_json(path: Path) -> dict:
    try:
        text = read_regular(path, MAX_JSON).decode("utf-8")
    except FileNotFoundError:
        raise UsageError(f"{path} does not exist") from None
    except TooLarge as exc:
        raise UsageError(f"{exc}: not a model config") from None
    except EnvironmentFailure:
        raise  # not a regular file (a FIFO): exit 6, naming it
    except (OSError, UnicodeDecodeError) as exc:
        raise UsageError(f"cannot read {path}: {exc}") from None
    try:
        data: dict = parse_json(text)
    except BadJson as exc:
        raise UsageError({BadJson.NOT_JSON: f"{path} is not valid JSON ({exc.detail})",
                          BadJson.NESTED_TOO_DEEP: f"{path} is not a model config (JSON nested too deep)",
                          BadJson.NOT_AN_OBJECT: f"{path} does not hold a JSON object"}[exc.kind]) from None
    return data


def safetensors_header(path: Path) -> dict:
    """The JSON header of a .safetensors file (8-byte little-endian length, then JSON). Opened
    without blocking: a FIFO is refused."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as exc:
        raise UsageError(f"cannot read {path}: {exc.strerror}") from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise EnvironmentFailure(f"{path}: not a regular file; patchkit refuses to read it")
        os.set_blocking(fd, True)
        with os.fdopen(os.dup(fd), "rb") as handle:
            raw = handle.read(8)
            if len(raw) != 8:
                raise UsageError(f"{path} is not a safetensors file (shorter than its header length)")
            (length,) = struct.unpack("<Q", raw)
            if length > min(_MAX_HEADER, info.st_size - 8):
                raise UsageError(f"{path} is not a safetensors file (header length {length})")
            raw = handle.read(length)
    except OSError as exc:
        raise UsageError(f"cannot read {path}: {exc.strerror}") from None
    finally:
        os.close(fd)
    try:
        header: dict = parse_json(raw)
    except BadJson as exc:
        raise UsageError({BadJson.NOT_JSON: f"{path} is not a safetensors file (its header is not JSON)",
                          BadJson.NESTED_TOO_DEEP: f"{path} is not a safetensors file (its header is nested too deep)",
                          BadJson.NOT_AN_OBJECT: f"{path} is not a safetensors file"}[exc.kind]) from None
    return header


def _whole(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _tensor_bytes(info: dict, where: Path) -> int:
    """A tensor's bytes: from its data_offsets, else its shape. (Not checked against the file's
    size: a folder of header-only copies is how a model is checked without its weights.)"""
    offsets = info.get("data_offsets")
    if isinstance(offsets, list) and len(offsets) == 2 and all(_whole(o) for o in offsets):
        if not 0 <= offsets[0] <= offsets[1] <= MAX_BYTES:
            raise UsageError(f"{where} is not a safetensors file (data_offsets {json.dumps(offsets)[:80]} are not "
                             f"two increasing offsets from 0 to {MAX_BYTES:.0e})")
        return offsets[1] - offsets[0]
    shape = info.get("shape") or []
    if not isinstance(shape, list) or not all(_whole(dim) and 0 <= dim <= MAX_DIMENSION for dim in shape):
        raise UsageError(f"{where} is not a safetensors file (a tensor's shape is not a list of sizes)")
    count = 1
    for dim in shape:
        count *= dim
        if count > MAX_BYTES:
            raise UsageError(f"{where} is not a safetensors file (a tensor's shape holds more than {MAX_BYTES:.0e} "
                             "elements)")
    return count * DTYPE_BYTES.get(str(info.get("dtype")), 2)


def check_config(config: dict, text: dict, where: Path) -> None:
    """The fields the doctor computes with have the types SGLang expects (one error line otherwise)."""
    archs = config.get("architectures")
    if archs is not None and not (isinstance(archs, list) and all(isinstance(a, str) for a in archs)):
        raise UsageError(f"{where}: architectures must be a list of class names, got {json.dumps(archs)}")
    if text.get("num_hidden_layers") is None:
        raise UsageError(f"{where} has no num_hidden_layers: not a model config SGLang can load")
    for key, least in GEOMETRY_KEYS.items():
        value = text.get(key)
        if value is not None and not (_whole(value) and least <= value <= MAX_DIMENSION):
            raise UsageError(f"{where}: {key} must be a whole number >= {least}, got {json.dumps(value)[:40]}")
    present = [key for key in GDN_KEYS if text.get(key) is not None]
    if present and len(present) != len(GDN_KEYS):
        missing = ", ".join(key for key in GDN_KEYS if key not in present)
        raise UsageError(f"{where}: has {present[0]} but lacks {missing} (needed for the linear-attention "
                         f"state size)")


def is_hub_id(text: str) -> bool:
    """`org/name` (or `name`) as SGLang passes it to the hub, rather than a local path."""
    return not text.startswith(("/", ".", "~")) and text.count("/") <= 1 and not Path(text).exists()


# The two files doctor reads of a checkpoint: what a hub id's advice fetches (never the weights).
READ_FILES = ("config.json", "model.safetensors.index.json")


def fetch_command(repo: str, folder: str = "DIR") -> str:
    """The command that fetches only READ_FILES of a hub checkpoint into `folder`: `hf` (huggingface_hub's CLI
    since 0.34; from 1.0 `huggingface-cli` no longer works), one `--include` per file (a file the repo lacks, such
    as the index of a single-file checkpoint, is skipped, where a filename argument would fail the download)."""
    return f"hf download {repo} " + " ".join(f"--include {name}" for name in READ_FILES) + f" --local-dir {folder}"


def load(folder: str | Path, flag: str = "--model-path") -> ModelFacts:
    """Read a model folder. Missing weights are not an error (their size is then unknown)."""
    path = Path(folder)
    if not path.is_dir():
        if path.exists():
            raise UsageError(f"{flag} {folder} is a file, not a model folder")
        if is_hub_id(str(folder)):
            raise UsageError(f"{flag} {folder} is a hub id, not a local folder: doctor reads {' and '.join(READ_FILES)} "
                             f"from a local folder, not the weights ({fetch_command(str(folder))}, then {flag} DIR)")
        raise UsageError(f"{flag} {folder} does not exist (doctor reads config.json from a local model folder)")
    config = _load_json(path / "config.json")
    text_config = config.get("text_config")
    text: dict = text_config if isinstance(text_config, dict) else config
    check_config(config, text, path / "config.json")
    facts = ModelFacts(path=path, config=config, text=text)
    index = path / "model.safetensors.index.json"
    headers: dict[str, tuple[dict, Path]] = {}
    for st in sorted(path.glob("*.safetensors")):
        header = safetensors_header(st)
        headers.update({k: (v, st) for k, v in header.items() if k != "__metadata__" and isinstance(v, dict)})
    if index.exists():  # not is_file(): a FIFO there is refused (exit 6), as everywhere else, not taken for absent
        data = _load_json(index)
        metadata, weight_map = data.get("metadata") or {}, data.get("weight_map") or {}
        if not isinstance(metadata, dict) or not isinstance(weight_map, dict):
            raise UsageError(f"{index}: metadata and weight_map must be JSON objects")
        total = metadata.get("total_size")
        facts.tensor_names = sorted(weight_map)
        if total is not None and not (isinstance(total, (int, float)) and not isinstance(total, bool)
                                      and 0 <= total <= MAX_BYTES):
            raise UsageError(f"{index}: metadata.total_size must be a number of bytes from 0 to {MAX_BYTES:.0e}, got "
                             f"{json.dumps(total)[:40]}")
        if total:
            facts.weights_bytes, facts.weights_source = int(total), "index"
    if headers:
        if not facts.tensor_names:
            facts.tensor_names = sorted(headers)
        if facts.weights_bytes is None:
            facts.weights_bytes = sum(_tensor_bytes(v, st) for v, st in headers.values())
            facts.weights_source = "headers"
        facts.tensor_bytes = {k: _tensor_bytes(v, st) for k, (v, st) in headers.items()}
        facts.headers_complete = set(facts.tensor_names) <= set(headers)
        mtp_names = {k for k in [*facts.tensor_names, *headers] if k.startswith("mtp.") or ".mtp." in k}
        if mtp_names <= set(headers):  # else the index names mtp.* tensors no header here sizes: unknown
            facts.mtp_bytes = sum(facts.tensor_bytes[k] for k in mtp_names)
    return facts


def model_dtype_bytes(model: ModelFacts, launch: Launch) -> int:
    """Bytes per element of the dtype the release serves the model in (`_get_and_verify_dtype`): --dtype, else the
    config's; a float32 checkpoint under `auto` is served in float16 (bfloat16 for Gemma), 2 bytes either way (the
    server tier's fp32 tiny model logs a torch.float16 KV cache)."""
    dtype = str(launch.get("dtype", "auto"))
    if dtype == "auto":
        dtype = str(model.text.get("torch_dtype") or model.config.get("torch_dtype") or model.text.get("dtype")
                    or "bfloat16")
        if dtype in ("float32", "fp32"):
            dtype = "float16"
    return CONFIG_DTYPE_BYTES.get(dtype, 2)
