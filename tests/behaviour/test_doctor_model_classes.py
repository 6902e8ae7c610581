"""The doctor's weights per GPU from the release's own model classes (patchkit/doctor/model_classes.py): each
release's Qwen3.5 classes built for real on `meta` in the behaviour environment, with its own TP / attention-DP
partitioning, against a count by hand from that code (one process per release, every launch shape in it)."""

from __future__ import annotations

import json

import pytest

from patchkit.doctor import model_classes
from patchkit.doctor.model_classes import ClassWeights, Unavailable
from testing import behaviour, releases
from testing.cli import run
from testing.doctor import qwen35_config

pytestmark = pytest.mark.behaviour

VERSIONS = [f"0.5.{n}" for n in range(10, 24)]
D = 2  # bf16
GROUP = 128  # the W4A16 group size


def _linear(out: int, inp: int, w4a16: bool | str) -> int:
    """A *ParallelLinear's parameters on one rank, as each method's create_weights makes them on a CUDA card: bf16
    weight (False); compressed-tensors' pack-quantized int4 (True: eight to an int32 along the input, a bf16 scale
    per group of 128 and the int64 weight_shape); "awq" (awq_marlin: qweight [in, out/8] and qzeros [in/128, out/8]
    int32, scales [in/128, out]); "gptq" (gptq_marlin: qweight [in/8, out] int32, g_idx [in] int32, qzeros
    [in/128, out/8] int32, scales [in/128, out]); "fp8-online" (a bf16 checkpoint with --quantization fp8, after
    Fp8LinearMethod.process_weights_after_loading: the weight in fp8 and one fp32 scale)."""
    groups = inp // GROUP
    if w4a16 == "fp8-online":
        return out * inp + 4
    if w4a16 == "awq":
        return inp * out // 8 * 4 + groups * out // 8 * 4 + groups * out * D
    if w4a16 == "gptq":
        return inp // 8 * out * 4 + inp * 4 + groups * out // 8 * 4 + groups * out * D
    return out * inp // 8 * 4 + out * (inp // GROUP) * D + 2 * 8 if w4a16 else out * inp * D


def _attention(t: dict, attn_tp: int, w4a16: bool | str) -> int:
    """Qwen3.5's gated full attention: qkv_proj holds q and its output gate (2 x heads x head_dim) and k, v
    (KV heads replicated where attention TP exceeds them), o_proj, and the q/k norms."""
    head_dim, heads = t["head_dim"], t["num_attention_heads"] // attn_tp
    kv = max(1, t["num_key_value_heads"] // attn_tp)
    return (_linear((2 * heads + 2 * kv) * head_dim, t["hidden_size"], w4a16)
            + _linear(t["hidden_size"], heads * head_dim, w4a16) + 2 * head_dim * D)


def _gated_deltanet(t: dict, attn_tp: int, w4a16: bool | str) -> int:
    """Qwen3_5GatedDeltaNet: in_proj_qkvz, in_proj_ba, conv1d (kernel taps per channel, not quantized), dt_bias
    (model dtype), A_log (fp32), the gated norm over one value head, out_proj."""
    h, key = t["hidden_size"], t["linear_num_key_heads"] * t["linear_key_head_dim"]
    value, value_heads = t["linear_num_value_heads"] * t["linear_value_head_dim"], t["linear_num_value_heads"]
    return (_linear((2 * key + 2 * value) // attn_tp, h, w4a16) + _linear(2 * value_heads // attn_tp, h, w4a16)
            + (2 * key + value) // attn_tp * t["linear_conv_kernel_dim"] * D + value_heads // attn_tp * (D + 4)
            + t["linear_value_head_dim"] * D + _linear(h, value // attn_tp, w4a16))


def _mlp(t: dict, tp: int, w4a16: bool | str) -> int:
    """Dense: gate_up and down split over TP. MoE (TP experts, no EP): w13 and w2 of every expert with the
    intermediate split, the router (replicated), the shared expert and its gate (replicated)."""
    h = t["hidden_size"]
    if "num_experts" not in t:
        inter = t["intermediate_size"]
        return _linear(2 * inter // tp, h, w4a16) + _linear(h, inter // tp, w4a16)
    experts, inter, shared = t["num_experts"], t["moe_intermediate_size"], t["shared_expert_intermediate_size"]
    return (experts * 3 * inter // tp * h * D + experts * h * D + _linear(2 * shared // tp, h, w4a16)
            + _linear(h, shared // tp, w4a16) + h * D)


def language_model(t: dict, tp: int, attn_tp: int, dp_attention: bool, w4a16: bool | str = False) -> int:
    """The parameters of `model` (Qwen3_5ForCausalLM) on one rank: the embedding (whole on every rank under
    attention DP), per layer two norms, the mixer (full attention every 4th layer) and the MLP, the final norm."""
    h, vocab = t["hidden_size"], t["vocab_size"]  # 248320: a multiple of 64, no vocab padding
    total = (vocab if dp_attention else vocab // tp) * h * D + h * D
    for layer in range(t["num_hidden_layers"]):
        mixer = _attention if (layer + 1) % t["full_attention_interval"] == 0 else _gated_deltanet
        total += 2 * h * D + mixer(t, attn_tp, w4a16) + _mlp(t, tp, w4a16)
    return total


def mtp_head(t: dict, tp: int, own_vocab: bool) -> int:
    """Qwen3_5ForCausalLMMTP's parameters on one rank: fc (2h -> h, an nn.Linear: whole), the two pre-fc norms,
    `model` with its own embedding (unless draft-lmhead-placeholder leaves it empty), one full-attention layer with
    the target's MLP kind, its norm, and lm_head (own, or empty)."""
    h, vocab = t["hidden_size"], t["vocab_size"]
    layer = 2 * h * D + _attention(t, tp, False) + _mlp(t, tp, False)
    vocab_bytes = vocab // tp * h * D if own_vocab else 0
    return 2 * h * h * D + 2 * h * D + vocab_bytes + layer + h * D + vocab_bytes


# (config, launch flags, TP, attention TP, attention DP on)
LAUNCHES = {
    "dense TP 1": ("dense", (), 1, 1, False),
    "dense TP 2 NEXTN": ("dense", ("--tp-size", "2", "--speculative-algorithm", "NEXTN"), 2, 2, False),
    "dense TP 4 x attention-DP 2": ("dense", ("--tp-size", "4", "--dp-size", "2", "--enable-dp-attention"), 4, 2, True),
    "MoE TP 2 NEXTN": ("moe", ("--tp-size", "2", "--speculative-algorithm", "NEXTN"), 2, 2, False),
    "dense W4A16 TP 2": ("dense-w4a16", ("--tp-size", "2"), 2, 2, False),
}


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    root = tmp_path_factory.mktemp("models")
    found = {}
    for name, kind, w4a16 in (("dense", "dense", False), ("moe", "moe", False), ("dense-w4a16", "dense", True)):
        (root / name).mkdir()
        (root / name / "config.json").write_text(json.dumps(qwen35_config(kind, w4a16)))
        found[name] = str(root / name)
    return found


def _build(site, models, names=tuple(LAUNCHES)):
    launches = [["--model-path", models[LAUNCHES[n][0]], *LAUNCHES[n][1]] for n in names]
    return dict(zip(names, model_classes.build(str(behaviour.python()), str(site), launches, sm=(9, 0),
                                               memory_gib=80.0, gpus=8)))


@pytest.mark.parametrize("version", VERSIONS)
def test_each_rank_holds_what_the_release_code_gives(version, models):
    results = _build(releases.pristine(version), models)
    if version == "0.5.10":
        # 0.5.10's memory_pool_host.py imports sgl_kernel unconditionally; the behaviour environment has no
        # sgl_kernel (a CUDA wheel), so no Qwen3.5 module imports there: the doctor falls back, saying why.
        assert all(isinstance(r, Unavailable) and "Qwen3_5" in r.reason for r in results.values()), results
        return
    for name, result in results.items():
        assert isinstance(result, ClassWeights), f"{name}: {result}"
        kind, _, tp, attn_tp, dp_attention = LAUNCHES[name]
        text = qwen35_config(*(("moe", False) if kind == "moe" else ("dense", kind.endswith("w4a16"))))["text_config"]
        params, buffers = result.target_parts["model"]
        assert params == language_model(text, tp, attn_tp, dp_attention, kind.endswith("w4a16")), name
        assert result.target_parts["lm_head"][0] == text["vocab_size"] // tp * text["hidden_size"] * D, name
        # Buffers: the rotary cos/sin cache of the full-attention layers (262,144 positions x 64 rotary dims,
        # fp32 as on CUDA) and the norms' copies: no more than the cache plus one copy of every norm.
        assert 262_144 * 64 * 4 <= buffers <= 262_144 * 64 * 4 + 64 * 1024 * 1024, (name, buffers)
        assert result.target_bytes == sum(p + b for p, b in result.target_parts.values()), name
        if "NEXTN" in name:
            assert result.draft_class == "Qwen3_5ForCausalLMMTP"
            draft_params = sum(p for p, _ in result.draft_parts.values())
            assert draft_params == mtp_head(text, tp, own_vocab=True), name
            assert result.draft_own_vocab_bytes == 2 * text["vocab_size"] // tp * text["hidden_size"] * D


def test_the_patched_draft_allocates_no_vocab_and_the_doctor_counts_it(release, models):
    """draft-lmhead-placeholder applied to the tree: the release's MTP class, built from the patched code,
    allocates no embedding or lm_head of its own; the doctor's budget (model classes) counts the draft's own
    vocab tensors on the pristine tree (pending) and not on the patched one."""
    site = release("0.5.19", whole=True)
    argv = ["--model-path", models["dense"], "--tp-size", "2", "--speculative-algorithm", "NEXTN"]
    assert run("apply", "--site-packages", site, "--only", "draft-lmhead-placeholder").exit_code == 0
    patched = _build(site, models, ("dense TP 2 NEXTN",))["dense TP 2 NEXTN"]
    assert isinstance(patched, ClassWeights) and patched.draft_own_vocab_bytes == 0
    text = qwen35_config()["text_config"]
    assert sum(p for p, _ in patched.draft_parts.values()) == mtp_head(text, 2, own_vocab=False)

    gpu = ("--gpus", "2", "--gpu-memory", "80", "--gpu-free", "79", "--sm", "9.0", "--json", "--python",
           str(behaviour.python()))
    on_patched = run("doctor", "--site-packages", site, *gpu, "--", *argv, "--max-running-requests", "8")
    on_pristine = run("doctor", "--site-packages", releases.pristine("0.5.19"), *gpu, "--", *argv,
                      "--max-running-requests", "8")
    assert on_patched.exit_code in (0, 1) and on_pristine.exit_code in (0, 1), on_patched.stderr + on_pristine.stderr
    a, b = on_patched.json()["budget"], on_pristine.json()["budget"]
    assert a["weights_from"] == b["weights_from"] == "model classes"
    assert a["weights_bytes"] == b["weights_bytes"] == patched.target_bytes
    assert b["draft_weights_bytes"] - a["draft_weights_bytes"] == 2 * text["vocab_size"] // 2 * text["hidden_size"] * D


def _doctor(folder, *launch, python=True):
    """doctor --json on pristine 0.5.23 (80 GB cards), with the behaviour interpreter as --python or without one."""
    gpu = ("--gpus", "8", "--gpu-memory", "80", "--gpu-free", "79", "--sm", "9.0", "--json")
    result = run("doctor", "--site-packages", releases.pristine("0.5.23"), *gpu,
                 *(("--python", str(behaviour.python())) if python else ()), "--", "--model-path", folder, *launch)
    assert result.exit_code in (0, 1), result.stderr
    return result.json()["budget"]


@pytest.mark.parametrize("kind, launch", [("dense", ("--tp-size", "2")), ("moe", ("--tp-size", "2"))])
def test_config_json_alone_is_an_estimate_from_classes_or_geometry(tmp_path, kind, launch):
    """A folder with config.json alone (what a hub id's two-file fetch gives for a single-file checkpoint): the
    weights were '?' beside 'runtime slack 0.00 GiB'. With an interpreter that has torch they are the release's
    classes' allocation, said to be an estimate; without one, the config's geometry (MoE experts and the vision
    tower included) by the release's split rules, within 1% of the classes' figure."""
    folder = tmp_path / kind
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps(qwen35_config(kind)))
    classes, geometry = _doctor(folder, *launch), _doctor(folder, *launch, python=False)
    assert classes["weights_from"] == "model classes" and classes["weights_estimated"], classes["notes"]
    assert any(note.startswith("weights are an estimate") for note in classes["notes"]), classes["notes"]
    assert geometry["weights_from"] == "config geometry" and geometry["weights_estimated"], geometry["notes"]
    assert abs(geometry["weights_bytes"] - classes["weights_bytes"]) <= 0.01 * classes["weights_bytes"], (
        geometry["weights_bytes"], classes["weights_bytes"])
    assert geometry["kv_tokens"] is not None and geometry["slack_bytes"] > 0 and geometry["not_computed"] is None


def test_a_quantized_config_alone_without_torch_says_what_sizes_it(tmp_path):
    folder = tmp_path / "w4a16"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps(qwen35_config("dense", w4a16=True)))
    budget = _doctor(folder, python=False)
    assert budget["weights_bytes"] is None and "pass --python, an interpreter with torch" in budget["not_computed"]


def test_a_config_without_the_hub_fields_names_the_missing_one(tmp_path):
    """The fixture's config before it carried the hub's fields: the release's classes refuse it ('Unknown RoPE
    scaling type, rope_scaling is {}') and the note said only that; it names rope_parameters now. The fixture as the
    hub ships it builds."""
    from testing.doctor import QWEN38

    old = json.loads(QWEN38.read_text())
    for key in ("rope_parameters", "partial_rotary_factor", "attn_output_gate"):
        old["text_config"].pop(key)
    (tmp_path / "old").mkdir()
    (tmp_path / "old" / "config.json").write_text(json.dumps(old))
    notes = "\n".join(_doctor(tmp_path / "old")["notes"])
    assert "Unknown RoPE scaling type" in notes and ("config.json's text_config lacks rope_parameters, which the "
                                                     "release's classes need and partial_rotary_factor, "
                                                     "attn_output_gate (the release takes its default)") in notes, notes
    (tmp_path / "hub").mkdir()
    (tmp_path / "hub" / "config.json").write_text(QWEN38.read_text())
    assert _doctor(tmp_path / "hub")["weights_from"] == "model classes"


PACKED_W4A16_TP1 = 17_824_723_456  # the W4A16 config's classes on one GPU (0.5.19, 0.5.23; SM 8.9, 9.0 and 12.0)


def test_classes_beyond_what_the_checkpoint_holds_give_way_to_its_index(tmp_path):
    """The field's 4-bit compressed-tensors Qwen3.8-27B was sized at 53.87 GB from the release's classes (bf16
    parameters) where the engine logged 17.67 GB. Here a 4-bit checkpoint (its index's total as the release's classes
    allocate it) whose quantization_config sits in text_config, where the release does not read it: the classes build
    bf16 Linear layers, 2.8x what the checkpoint holds in all. The budget takes the checkpoint's index and says which;
    with the quantization_config where the release reads it, the classes' packed figure stands."""
    from testing.doctor import model_folder

    config = qwen35_config("dense", w4a16=True)
    nested = json.loads(json.dumps(config))
    nested["text_config"]["quantization_config"] = nested.pop("quantization_config")
    folder = model_folder(tmp_path / "nested", config=nested, total_size=PACKED_W4A16_TP1, mtp=False)
    budget = _doctor(folder, "--tp-size", "1")
    assert budget["weights_from"] == "index" and budget["weights_bytes"] == PACKED_W4A16_TP1, budget["notes"]
    beyond = [note for note in budget["notes"] if "more than the checkpoint (compressed-tensors) holds" in note]
    assert beyond and "(no quantization) built on meta allocates 50.20 GiB" in beyond[0], budget["notes"]
    read = _doctor(model_folder(tmp_path / "read", config=config, total_size=PACKED_W4A16_TP1, mtp=False),
                   "--tp-size", "1")
    assert (read["weights_from"], read["weights_bytes"]) == ("model classes", PACKED_W4A16_TP1), read["notes"]


def test_version_with_a_python_that_builds_the_classes_on_a_fresh_home(tmp_path, monkeypatch):
    """Issue 46 item 8 as the field met it: --version V --python PY (torch, no SGLang) on a home holding V's wheel
    and no pristine install: the wheel's sglang/ is unpacked for PY's build, the classes are built from it, and the
    release is read on from the same wheel (exit 70 before: the shared zip was closed)."""
    from testing.checkout import wheel_home

    home = wheel_home(tmp_path / "home", ("0.5.23",))  # V's wheel alone: no pristine install of it
    monkeypatch.setenv("PATCHKIT_HOME", str(home))
    (tmp_path / "m").mkdir()
    (tmp_path / "m" / "config.json").write_text(json.dumps(qwen35_config()))
    result = run("doctor", "--version", "0.5.23", "--python", str(behaviour.python()), "--gpus", "1", "--gpu-memory",
                 "80", "--gpu-free", "79", "--sm", "9.0", "--json", "--", "--model-path", tmp_path / "m")
    assert result.exit_code in (0, 1), result.stdout + result.stderr
    budget = result.json()["budget"]
    assert budget["weights_from"] == "model classes", budget["notes"]
    assert not (home / "releases").exists()


# 4-bit group-128 checkpoints as AutoAWQ and GPTQ write their quantization_config (the vision tower and the MTP
# head left in the model dtype, as the field's exports leave them).
AWQ = {"quant_method": "awq", "bits": 4, "group_size": GROUP, "zero_point": True, "version": "gemm",
       "modules_to_not_convert": ["visual", "mtp"]}
GPTQ = {"quant_method": "gptq", "bits": 4, "group_size": GROUP, "desc_act": False, "sym": True,
        "checkpoint_format": "gptq"}


def _quantized_folder(root, name, quantization, dtype="bfloat16"):
    config = qwen35_config("dense")
    config["quantization_config"] = dict(quantization)
    config["torch_dtype"] = config["text_config"]["torch_dtype"] = dtype
    (root / name).mkdir()
    (root / name / "config.json").write_text(json.dumps(config))
    return str(root / name)


def test_each_quantization_builds_what_the_release_creates_on_the_card(tmp_path):
    """The scheme is resolved as the release resolves it on the launch's card, not on this CPU: an AWQ checkpoint
    becomes awq_marlin on SM 8.0+ (AWQMarlinConfig.is_awq_marlin_compatible asks the module's `_is_cuda`, read at
    import and False here), which takes bfloat16 where plain AWQ refuses it ('torch.bfloat16 is not supported for
    quantization method awq': the build failed and the doctor fell back to the checkpoint); below SM 8.0 the release
    keeps plain AWQ (Marlin needs 8.0), float16 only, as on such a card. GPTQ resolves to gptq_marlin on SM 8.9.
    Each method's parameters are those its create_weights makes, counted by hand (_linear)."""
    tree = str(releases.pristine("0.5.23"))
    awq_bf16 = _quantized_folder(tmp_path, "awq-bf16", AWQ)
    awq_fp16 = _quantized_folder(tmp_path, "awq-fp16", AWQ, "float16")
    gptq = _quantized_folder(tmp_path, "gptq", GPTQ)
    python = str(behaviour.python())
    on_ada = model_classes.build(python, tree, [["--model-path", folder] for folder in (awq_bf16, awq_fp16, gptq)],
                                 (8, 9), 32, 1)
    on_turing = model_classes.build(python, tree, [["--model-path", awq_fp16], ["--model-path", awq_bf16]],
                                    (7, 5), 24, 1)
    text = qwen35_config()["text_config"]
    for result, method, scheme in zip(on_ada, ("AWQMarlinConfig", "AWQMarlinConfig", "GPTQMarlinConfig"),
                                      ("awq", "awq", "gptq")):
        assert isinstance(result, ClassWeights), result
        assert result.quantization == method, result
        assert result.target_parts["model"][0] == language_model(text, 1, 1, False, scheme), (method, result)
    turing_fp16, turing_bf16 = on_turing
    assert isinstance(turing_fp16, ClassWeights) and turing_fp16.quantization == "AWQConfig", turing_fp16
    assert turing_fp16.target_parts["model"][0] == language_model(text, 1, 1, False, "awq")
    assert isinstance(turing_bf16, Unavailable) and "torch.bfloat16 is not supported" in turing_bf16.reason


def test_the_doctor_sizes_a_bfloat16_awq_checkpoint_from_the_classes(tmp_path):
    """doctor --python on 0.5.23 (SM 9.0): the bfloat16 AWQ checkpoint's weights are the classes' (awq_marlin) and
    the note names the method; before, the build failed and the budget took the checkpoint's index."""
    from testing.doctor import model_folder

    config = json.loads((tmp_path / _quantized_folder(tmp_path, "config", AWQ) / "config.json").read_text())
    packed = language_model(config["text_config"], 1, 1, False, "awq")
    budget = _doctor(model_folder(tmp_path / "awq", config=config, total_size=20 << 30, mtp=False), "--tp-size", "1")
    assert budget["weights_from"] == "model classes", budget["notes"]
    assert any("(AWQMarlinConfig)" in note for note in budget["notes"]), budget["notes"]
    assert packed < budget["weights_bytes"] < 20 << 30


def test_online_fp8_is_sized_after_the_release_quantizes_the_loaded_weights(tmp_path):
    """--quantization fp8 of a bf16 checkpoint: Fp8LinearMethod.create_weights makes bf16 weights, and its
    process_weights_after_loading replaces them with their fp8 quantization once loaded; the build sized the bf16
    (53,970,075,520 B on one GPU: 2x), it now runs that step on meta where the launch quantizes online. Here (no CUDA
    version in this torch) the release's cutlass_fp8_supported() is False, so it takes the per-tensor scale; on the
    card it takes one scale per output row (4 B each: 15.6 MB more over the 27B model)."""
    dense = tmp_path / "dense"
    dense.mkdir()
    (dense / "config.json").write_text(json.dumps(qwen35_config("dense")))
    [result] = model_classes.build(str(behaviour.python()), str(releases.pristine("0.5.23")),
                                   [["--model-path", str(dense), "--quantization", "fp8"]], (9, 0), 80, 1)
    assert isinstance(result, ClassWeights), result
    assert result.quantization == "Fp8Config, quantized online: after process_weights_after_loading", result
    text = qwen35_config()["text_config"]
    expected = language_model(text, 1, 1, False, "fp8-online")
    assert abs(result.target_parts["model"][0] - expected) <= 1024, (result.target_parts["model"][0], expected)
