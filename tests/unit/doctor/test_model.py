"""Model facts from a local folder: config, weight bytes from the index or the headers, MTP tensors."""

from __future__ import annotations

import pytest

from patchkit.doctor.model import load
from patchkit.base.errors import UsageError
from testing.doctor import GIB, model_folder


def test_index_total_size_and_mtp_headers(tmp_path):
    facts = load(model_folder(tmp_path / "m", total_size=30 * GIB))
    assert (facts.weights_bytes, facts.weights_source) == (30 * GIB, "index")
    assert facts.mtp_bytes == 5120 * 10240 * 2 and facts.has_mtp_weights
    assert facts.is_hybrid_gdn and facts.mtp_layers == 1 and facts.arch == "Qwen3_5ForConditionalGeneration"


def test_headers_without_index(tmp_path):
    folder = model_folder(tmp_path / "m", total_size=None, tensors={
        "model.embed_tokens.weight": ("BF16", [1000, 64]), "model.layers.0.w": ("F8_E4M3", [64, 64])})
    facts = load(folder)
    assert (facts.weights_bytes, facts.weights_source) == (1000 * 64 * 2 + 64 * 64, "headers")
    assert facts.has_mtp_weights is False and facts.mtp_bytes == 0


def test_quantization_and_text_config(tmp_path):
    config = {"architectures": ["X"], "quantization_config": {"quant_method": "fp8"}, "num_hidden_layers": 2}
    facts = load(model_folder(tmp_path / "m", config=config, mtp=False))
    assert facts.quantization == {"quant_method": "fp8"} and facts.text is facts.config
    assert not facts.is_hybrid_gdn and facts.has_vision is False


@pytest.mark.parametrize("setup, message", [
    (lambda d: None, "does not exist"),
    (lambda d: (d / "config.json").write_text("[1]"), "does not hold a JSON object"),
    (lambda d: ((d / "config.json").write_text('{"num_hidden_layers": 2}'), (d / "x.safetensors").write_bytes(b"\x05")), "not a safetensors"),
    (lambda d: ((d / "config.json").write_text('{"num_hidden_layers": 2}'),
                (d / "model.safetensors.index.json").write_text("{")), "is not valid JSON"),
])
def test_bad_folders_are_usage_errors(tmp_path, setup, message):
    folder = tmp_path / "m"
    folder.mkdir()
    setup(folder)
    with pytest.raises(UsageError, match=message):
        load(folder)


@pytest.mark.parametrize("config, message", [
    ({"num_hidden_layers": "abc"}, 'num_hidden_layers must be a whole number >= 1, got "abc"'),
    ({"num_hidden_layers": 4, "num_attention_heads": 0}, "num_attention_heads must be a whole number >= 1, got 0"),
    ({"num_hidden_layers": True}, "num_hidden_layers must be a whole number >= 1, got true"),
    ({"architectures": "LlamaForCausalLM"}, 'architectures must be a list of class names, got "LlamaForCausalLM"'),
    ({"num_hidden_layers": 4, "linear_num_value_heads": 48, "linear_key_head_dim": 128},
     "has linear_num_value_heads but lacks linear_num_key_heads, linear_value_head_dim"),
    ({"text_config": {"num_hidden_layers": 4, "linear_conv_kernel_dim": 1}},
     "linear_conv_kernel_dim must be a whole number >= 2"),
    ({}, "has no num_hidden_layers: not a model config SGLang can load"),
    ({"text_config": {"hidden_size": 8}, "num_hidden_layers": 4}, "has no num_hidden_layers"),
])
def test_malformed_config_is_a_usage_error(tmp_path, config, message):
    folder = model_folder(tmp_path / "m", config=config, mtp=False)
    with pytest.raises(UsageError) as info:
        load(folder)
    assert message in str(info.value) and str(folder / "config.json") in str(info.value)


@pytest.mark.parametrize("index", [{"metadata": [1], "weight_map": {}}, {"metadata": {}, "weight_map": ["a"]}])
def test_malformed_index_is_a_usage_error(tmp_path, index):
    import json

    folder = model_folder(tmp_path / "m", mtp=False)
    (folder / "model.safetensors.index.json").write_text(json.dumps(index))
    with pytest.raises(UsageError, match="metadata and weight_map must be JSON objects"):
        load(folder)


def test_malformed_safetensors_header_is_a_usage_error(tmp_path):
    import json
    import struct

    folder = model_folder(tmp_path / "m", total_size=None, mtp=False)
    header = json.dumps({"w": {"dtype": "BF16", "shape": ["a"], "data_offsets": ["x", 2]}}).encode()
    (folder / "model.safetensors").write_bytes(struct.pack("<Q", len(header)) + header)
    with pytest.raises(UsageError, match="a tensor's shape is not a list of sizes"):
        load(folder)


def test_not_a_folder(tmp_path):
    # The advice fetches the two files doctor reads, never the checkpoint's weights (about 70 GB for a 35B model).
    with pytest.raises(UsageError) as raised:
        load("Qwen/Qwen3.5-27B")
    assert "is a hub id, not a local folder: doctor reads config.json and model.safetensors.index.json" in str(
        raised.value)
    assert ("(hf download Qwen/Qwen3.5-27B --include config.json --include model.safetensors.index.json "
            "--local-dir DIR, then --model-path DIR)") in str(raised.value)
    with pytest.raises(UsageError, match="does not exist"):
        load(tmp_path / "nowhere")
    (tmp_path / "file").write_text("")
    with pytest.raises(UsageError, match="--speculative-draft-model-path .* is a file, not a model folder"):
        load(tmp_path / "file", flag="--speculative-draft-model-path")
