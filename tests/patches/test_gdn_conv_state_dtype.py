from __future__ import annotations

import pytest

from patchkit.base.errors import AnchorError
from patchkit.authoring.patch import SkipPatch
from patchkit.patches.gdn_conv_state_dtype import CAST, CONV_KERNELS, GDN_BACKEND, GdnConvStateDtype
from testing.patch_test import PatchTest

# 0.5.23's forward_extend, cut to its prefill branch: the mamba-track write, then the scatter of
# the contiguous copies (a write into the cache outside the track branch, left alone).
BEFORE = '''
class GDNAttnBackend(MambaAttnBackendBase):
    def forward_extend(self, layer, forward_batch, mixed_qkv, a, b, **kwargs):
        forward_metadata = self.forward_metadata
        mamba_cache_params = self.req_to_token_pool.mamba2_layer_cache(layer.layer_id)
        conv_states = mamba_cache_params.conv[0]
        if is_target_verify:
            mixed_qkv = causal_conv1d_update(mixed_qkv, conv_states)
        else:
            if forward_metadata.has_mamba_track_mask:
                mixed_qkv_to_track = mixed_qkv[
                    forward_metadata.track_conv_indices
                ].transpose(1, 2)
                conv_states[forward_metadata.conv_states_mask_indices] = (
                    mixed_qkv_to_track
                )

            mixed_qkv = self._convolve_prefill(layer, forward_batch, mixed_qkv, conv_states_contig)
        if needs_state_gather:
            conv_states[cache_indices] = conv_states_contig
        return mixed_qkv

    def forward_decode(self, layer, forward_batch, mixed_qkv, a, b, **kwargs):
        return mixed_qkv
'''

AFTER = BEFORE.replace('''                ].transpose(1, 2)
''', '''                ].transpose(1, 2)
''' + CAST.code(indent=16, source="mixed_qkv_to_track", cache="conv_states"))

# 0.5.10: the track branch tests the batch's mask and the write indexes through the track indices.
BEFORE_OLD = BEFORE.replace('''            if forward_metadata.has_mamba_track_mask:
                mixed_qkv_to_track = mixed_qkv[
                    forward_metadata.track_conv_indices
                ].transpose(1, 2)
                conv_states[forward_metadata.conv_states_mask_indices] = (
                    mixed_qkv_to_track
                )
''', '''            if (
                forward_batch.mamba_track_mask is not None
                and forward_batch.mamba_track_mask.any()
            ):
                conv_dst = forward_batch.mamba_track_indices
                mixed_qkv_to_track = mixed_qkv[
                    :, forward_metadata.track_conv_indices
                ].transpose(0, 1)
                mask_indices = forward_batch.mamba_track_mask.nonzero(as_tuple=True)[0]
                conv_states[conv_dst[mask_indices]] = mixed_qkv_to_track
''')
AFTER_OLD = BEFORE_OLD.replace('''                mask_indices = forward_batch.mamba_track_mask.nonzero(as_tuple=True)[0]
''', '''                mask_indices = forward_batch.mamba_track_mask.nonzero(as_tuple=True)[0]
''' + CAST.code(indent=16, source="mixed_qkv_to_track", cache="conv_states"))

# The Triton prefill convolution, cut to its cached-window loads: 0.5.20+ cast them to the
# input's dtype (so a cache of another dtype compiles), 0.5.10-0.5.19 do not.
KERNEL_CASTS = '''
@triton.jit()
def _causal_conv1d_fwd_kernel(x_ptr, conv_states_ptr, KERNEL_WIDTH: tl.constexpr):
    if load_init_state:
        x_elem_ty = x_ptr.dtype.element_ty
        if KERNEL_WIDTH == 2:
            col0 = tl.load(conv_states_ptrs, mask_w, 0.0).to(x_elem_ty)
    else:
        col0 = tl.zeros((BLOCK_N,), dtype=x_ptr.dtype.element_ty)


def causal_conv1d_fn(x, weight, bias, conv_states):
    return x
'''
KERNEL_UNCAST = KERNEL_CASTS.replace("tl.load(conv_states_ptrs, mask_w, 0.0).to(x_elem_ty)",
                                     "tl.load(conv_states_ptrs, mask_w, 0.0)")
NEW_KERNEL, OLD_KERNEL = CONV_KERNELS  # kernels/ops/mamba/ (0.5.16+), layers/attention/mamba/ (<= 0.5.15)


class TestGdnConvStateDtype(PatchTest):
    PATCH = GdnConvStateDtype
    PATH = GDN_BACKEND
    CONSULTED = {NEW_KERNEL: KERNEL_CASTS}

    def test_track_write_casts_the_window_to_the_cache_dtype(self):
        assert AFTER != BEFORE
        self.assert_transform(BEFORE, AFTER)

    def test_older_track_branch_shape(self):
        # 0.5.10's shape, with its kernel at the older path, casting (as no such release does).
        self.CONSULTED = {OLD_KERNEL: KERNEL_CASTS}
        assert AFTER_OLD != AFTER
        self.assert_transform(BEFORE_OLD, AFTER_OLD)

    def test_the_cast_is_switchable_and_acts_only_on_a_mismatch(self):
        code = CAST.code(source="window", cache="conv_states")
        assert 'window.dtype != conv_states.dtype' in code
        assert '"gdn-conv-state-dtype" not in map(str.strip, __import__("os").environ.get("SGLANG_PATCHKIT_DISABLE"' in code

    @pytest.mark.parametrize("kernel", [NEW_KERNEL, OLD_KERNEL])
    def test_not_applicable_where_the_prefill_convolution_takes_one_dtype(self, kernel):
        self.CONSULTED = {kernel: KERNEL_UNCAST}
        assert self.engine_run(BEFORE)[0] == "not-applicable"
        reason = GdnConvStateDtype().precondition(lambda rel: self.CONSULTED.get(rel, "").encode() or None)
        assert reason is not None and kernel in reason and "SGLANG_MAMBA_CONV_DTYPE=float16" in reason

    def test_no_prefill_convolution_is_a_missing_anchor(self):
        self.CONSULTED = {NEW_KERNEL: "def causal_conv1d_fn(x):\n    return x\n"}
        verdict, detail = self.engine_run(BEFORE)
        assert verdict == "failed", detail
        with pytest.raises(AnchorError, match="_causal_conv1d_fwd_kernel"):
            GdnConvStateDtype().precondition(lambda rel: self.CONSULTED.get(rel, "").encode() or None)

    @pytest.mark.parametrize("cast", [
        "mixed_qkv_to_track.to(conv_states.dtype)",
        "mixed_qkv_to_track.to(dtype=conv_states.dtype)",
        "mixed_qkv_to_track.type_as(conv_states)",
    ])
    def test_upstream_cast_at_the_write_recognised(self, cast):
        fixed = BEFORE.replace('''                conv_states[forward_metadata.conv_states_mask_indices] = (
                    mixed_qkv_to_track
                )
''', f'''                conv_states[forward_metadata.conv_states_mask_indices] = {cast}
''')
        assert GdnConvStateDtype().is_fixed_upstream(self.PATH, self.parse(fixed))
        assert self.engine_run(fixed)[0] == "upstream-fixed"

    def test_upstream_cast_of_the_window_recognised(self):
        fixed = BEFORE.replace("                ].transpose(1, 2)\n",
                               "                ].transpose(1, 2).to(conv_states.dtype)\n")
        assert GdnConvStateDtype().is_fixed_upstream(self.PATH, self.parse(fixed))

    def test_a_cast_elsewhere_is_not_upstream_s_fix(self):
        elsewhere = BEFORE.replace("            conv_states[cache_indices] = conv_states_contig\n",
                                   "            conv_states[cache_indices] = conv_states_contig.to(conv_states.dtype)\n")
        assert not GdnConvStateDtype().is_fixed_upstream(self.PATH, self.parse(elsewhere))

    def test_no_track_write_is_a_missing_anchor(self):
        source = BEFORE.replace('''                conv_states[forward_metadata.conv_states_mask_indices] = (
                    mixed_qkv_to_track
                )
''', '''                self.track(mixed_qkv_to_track)
''')
        with pytest.raises(AnchorError, match="anchor not found"):
            GdnConvStateDtype().transform(self.PATH, self.parse(source))

    def test_file_without_the_backend_is_skipped(self):
        with pytest.raises(SkipPatch):
            GdnConvStateDtype().transform(self.PATH, self.parse("class MambaAttnBackendBase:\n    pass\n"))
