"""A patch whose PARTS leaves out what its probes or edits read fails in the fast tier (issue
22.3): every before/after sample of `PatchTest` also runs through the engine parsing only the
patch's PARTS and parsing the whole file, and the two must agree. Shown here by taking one entry
out of a built-in patch's PARTS in a copy of the patch, and running its own sample tests."""

from __future__ import annotations

import pytest

from tests.patches import test_cpu_offload_tied_params as cpu, test_fp8_kv_triton_sm89 as fp8, test_gdn_cutedsl_decode_sm90 as gdn, \
    test_mtp_layer_detection as mtp  # modules: not collected twice


def without(test_class, entry: str):
    """The test class, on a copy of its patch whose PARTS for the test's file lacks `entry`."""
    patch = test_class.PATCH
    parts = patch.PARTS[test_class.PATH]
    assert entry in parts, f"{patch.ID}: PARTS changed, update this test"
    broken = type(patch.__name__, (patch,), {"PARTS": {**patch.PARTS, test_class.PATH: tuple(p for p in parts if p != entry)}})
    return type(test_class.__name__, (test_class,), {"PATCH": broken})


@pytest.mark.parametrize("test_class, entry, test", [
    # An edit's anchor left out: the skeleton has no TritonAttnBackend.__init__ to edit.
    (fp8.TestFp8KvTritonSm89, "TritonAttnBackend.__init__", "test_refusal_called_after_super_init"),
    # The module-level function the patch adds (and its MARK finds) left out: applied twice.
    (fp8.TestFp8KvTritonSm89, "_patchkit_refuse_fp8_e4m3_below_sm89", "test_refusal_called_after_super_init"),
    # A text selector the matchers need.
    (mtp.TestMtpLayerDetection, "ModelConfig:num_nextn_predict_layers", "test_inserts_fallback_after_the_read"),
    # A probe's sample outside assert_transform (any sample a test parses is checked): upstream's
    # gate in a helper method only `:is_cutedsl` has parsed.
    (gdn.TestGdnCutedslDecodeSm90, "GDNKernelDispatcher:is_cutedsl", "test_upstream_check_in_another_method_recognised"),
    # Both ways the render fails on the anchor; the verdicts differ (upstream-fixed / not).
    (cpu.TestCpuOffloadTiedParams, ":keep_vars", "test_upstream_helper_recognised"),
])
def test_a_parts_entry_left_out_fails_the_patchs_own_sample_test(test_class, entry, test):
    getattr(test_class(), test)()  # as the patch declares it: passes
    with pytest.raises(AssertionError, match="PARTS must name everything its probes and edits read"):
        getattr(without(test_class, entry)(), test)()
