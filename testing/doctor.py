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


def qwen35_config(kind: str = "dense", w4a16: bool = False) -> dict:
    """A Qwen3.5 checkpoint's config.json that the release's own classes build from: the Qwen3.8-27B geometry
    (tests/fixtures) with the RoPE parameters SGLang reads, or (`moe`) a Qwen3.5-35B-A3B-shaped mixture of experts;
    a one-block vision tower with 16 heads (split up to TP 16); `w4a16`: compressed-tensors 4-bit group-128 weights
    (pack-quantized), lm_head, vision and MTP head left in bf16, as the field's W4A16 exports."""
    config = json.loads(QWEN38.read_text())
    text = config["text_config"]
    text.update(attn_output_gate=True, partial_rotary_factor=0.25, torch_dtype="bfloat16", hidden_act="silu",
                rope_parameters={"rope_type": "default", "rope_theta": 10000000, "partial_rotary_factor": 0.25,
                                 "mrope_section": [11, 11, 10], "mrope_interleaved": True})
    config["vision_config"] = {"depth": 1, "hidden_size": 1024, "num_heads": 16, "intermediate_size": 4096,
                               "patch_size": 16, "spatial_merge_size": 2, "temporal_patch_size": 2, "in_channels": 3,
                               "out_hidden_size": 5120, "num_position_embeddings": 2304, "deepstack_visual_indexes": [],
                               "hidden_act": "gelu_pytorch_tanh"}
    config.update(torch_dtype="bfloat16", image_token_id=248056, video_token_id=248057)
    if kind == "moe":
        text.update(model_type="qwen3_5_moe_text", hidden_size=2048, num_hidden_layers=40, num_attention_heads=16,
                    num_key_value_heads=2, linear_num_value_heads=32, num_experts=256, num_experts_per_tok=8,
                    moe_intermediate_size=512, shared_expert_intermediate_size=512, norm_topk_prob=True,
                    decoder_sparse_step=1, mlp_only_layers=[])
        text.pop("intermediate_size")
        text["layer_types"] = ["full_attention" if (i + 1) % 4 == 0 else "linear_attention" for i in range(40)]
        config["vision_config"]["out_hidden_size"] = 2048
        config.update(architectures=["Qwen3_5MoeForConditionalGeneration"], model_type="qwen3_5_moe")
    if w4a16:
        config["quantization_config"] = {
            "quant_method": "compressed-tensors", "format": "pack-quantized", "quantization_status": "compressed",
            "config_groups": {"group_0": {"targets": ["Linear"], "input_activations": None, "output_activations": None,
                                          "weights": {"num_bits": 4, "type": "int", "symmetric": True, "group_size": 128,
                                                      "strategy": "group", "dynamic": False, "actorder": None,
                                                      "observer": "minmax"}}},
            "ignore": ["lm_head", "re:.*visual.*", "re:.*mtp.*"]}
    return config
