"""Run SGLang's real `GDNAttnBackend.forward_extend` on the CPU up to its mamba-track write into
the conv-state cache, for each case in argv ("float16:bfloat16": the model's activations in
float16, the cache in bfloat16), and print, per case, what the write did: refused (the release's
RuntimeError) or written (the cache keeps its dtype and holds the tracked conv window, cast).

One prefill of 6 tokens whose last 3 (the conv window, kernel width 4) are tracked into cache
slot 2 of 4. What runs is the release's own forward_extend: its metadata reads, the track branch
and the `conv_states[...] = ...` write. Stood in: the backend's state (the request pool's layer
cache, the forward metadata, the batch), built here instead of by a model runner, and the
prefill convolution that follows the write (a Triton/CUDA kernel; 0.5.23 calls it through
`_convolve_prefill`), which stops the run: what comes after the write is not this probe's
concern. Run inside the behaviour venv with PYTHONPATH pointing at an SGLang tree.
"""

import json
import sys
import types

import torch

from sglang.srt.layers.attention.linear import gdn_backend

DIM, WIDTH, TOKENS, SLOTS, SLOT = 8, 4, 6, 4, 2


class Reached(Exception):
    """The prefill convolution was called: the write before it went through."""


def convolve(*args, **kwargs):
    raise Reached


class Metadata(types.SimpleNamespace):
    """The forward metadata: what the probe sets, and None for every other field a release reads."""

    def __getattr__(self, name):
        return None


def case(spec: str) -> dict:
    source_dtype, cache_dtype = (getattr(torch, name) for name in spec.split(":"))
    gdn_backend.causal_conv1d_fn = convolve
    backend = object.__new__(gdn_backend.GDNAttnBackend)
    backend.__dict__.update(mis_metadata=None, requires_contiguous_prefill_state=False,
                            _use_strided_target_verify_qkv=False)
    if hasattr(gdn_backend.GDNAttnBackend, "_convolve_prefill"):
        backend._convolve_prefill = convolve
    conv = torch.zeros(SLOTS, DIM, WIDTH - 1, dtype=cache_dtype)
    ssm = torch.zeros(SLOTS, 1, 1, 1, dtype=torch.float32)
    backend.req_to_token_pool = types.SimpleNamespace(
        mamba2_layer_cache=lambda layer_id: types.SimpleNamespace(conv=[conv], temporal=ssm))
    track = torch.arange(TOKENS - (WIDTH - 1), TOKENS).unsqueeze(0)  # the last conv window, one request
    slots = torch.tensor([SLOT])
    backend.forward_metadata = Metadata(
        query_start_loc=torch.tensor([0, TOKENS], dtype=torch.int32), mamba_cache_indices=torch.tensor([0]),
        has_mamba_track_mask=True, track_conv_indices=track, conv_states_mask_indices=slots,
    )
    batch = types.SimpleNamespace(
        forward_mode=types.SimpleNamespace(is_target_verify=lambda: False),
        extend_prefix_lens=torch.tensor([0]), extend_seq_lens_cpu=[TOKENS],
        mamba_track_mask=torch.tensor([True]), mamba_track_indices=slots,
    )
    layer = types.SimpleNamespace(layer_id=0, conv_weights=None, bias=None, activation="silu")
    mixed_qkv = (torch.arange(TOKENS * DIM, dtype=torch.float32).view(TOKENS, DIM) / 7).to(source_dtype)
    try:
        backend.forward_extend(layer, batch, mixed_qkv, a=None, b=None)
    except Reached:
        expected = mixed_qkv[TOKENS - (WIDTH - 1):].transpose(0, 1).to(cache_dtype)
        return {"outcome": "written", "cache_dtype": str(conv.dtype),
                "slot_holds_window": bool(torch.equal(conv[SLOT], expected)),
                "other_slots_untouched": bool(conv[[s for s in range(SLOTS) if s != SLOT]].eq(0).all())}
    except RuntimeError as exc:
        return {"outcome": "refused", "message": str(exc)}
    return {"outcome": "returned"}


print(json.dumps({"module": gdn_backend.__file__, **{spec: case(spec) for spec in sys.argv[1:]}}))
