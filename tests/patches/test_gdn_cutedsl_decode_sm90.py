from __future__ import annotations

import pytest

from patchkit.base.errors import AnchorError
from patchkit.authoring.patch import SkipPatch
from patchkit.patches.gdn_cutedsl_decode_sm90 import GDN_BACKEND, GdnCutedslDecodeSm90
from testing.patch_test import PatchTest

BEFORE = '''
class GDNKernelDispatcher:
    def __init__(self, decode_backend, prefill_backend):
        triton_kernel = TritonGDNKernel()

        cutedsl_kernel = None
        if decode_backend.is_triton():
            self.decode_kernel = triton_kernel
        elif decode_backend.is_cutedsl():
            if not is_cuda():
                raise ValueError("GDN CuTe DSL backend requires CUDA")
            from sglang.srt.layers.attention.linear.kernels.gdn_cutedsl import (
                CuteDSLGDNKernel,
            )

            cutedsl_kernel = CuteDSLGDNKernel()
            self.decode_kernel = cutedsl_kernel
        else:
            raise ValueError(f"Unsupported GDN decode backend: {decode_backend}")

        if prefill_backend.is_cutedsl():
            if cutedsl_kernel.supports_prefill:
                self.extend_kernel = cutedsl_kernel
            else:
                rank0_log("CuTe DSL GDN prefill is not supported on this GPU (requires SM100+).")
                self.extend_kernel = triton_kernel
'''

AFTER = BEFORE.replace('''        cutedsl_kernel = None
        if decode_backend.is_triton():
''', '''        cutedsl_kernel = None
        if (
            decode_backend.is_cutedsl()
            and is_cuda()
            and torch.cuda.get_device_capability()[0] < 9
            and "gdn-cutedsl-decode-sm90" not in map(str.strip, __import__("os").environ.get("SGLANG_PATCHKIT_DISABLE", "").split(","))
        ):
            # patchkit gdn-cutedsl-decode-sm90: the CuTe-DSL decode kernel needs SM90+ (it hangs below).
            import logging

            logging.getLogger(__name__).warning(
                "--linear-attn-decode-backend cutedsl needs SM90+ (Hopper or newer); this GPU is SM%d%d. "
                "Falling back to Triton for GDN decode.",
                *torch.cuda.get_device_capability(),
            )
            decode_backend = LinearAttnKernelBackend.TRITON
        if decode_backend.is_triton():
''')

# 0.5.10-0.5.12: the kernel is constructed in the assignment itself; the blank line before the
# chain stays in front of the inserted check.
BEFORE_OLD = BEFORE.replace("            cutedsl_kernel = CuteDSLGDNKernel()\n            self.decode_kernel = cutedsl_kernel\n",
                            "            self.decode_kernel = CuteDSLGDNKernel()\n").replace("        cutedsl_kernel = None\n", "")
AFTER_OLD = AFTER.replace("            cutedsl_kernel = CuteDSLGDNKernel()\n            self.decode_kernel = cutedsl_kernel\n",
                          "            self.decode_kernel = CuteDSLGDNKernel()\n").replace("        cutedsl_kernel = None\n", "")


class TestGdnCutedslDecodeSm90(PatchTest):
    PATCH = GdnCutedslDecodeSm90
    PATH = GDN_BACKEND

    def test_decode_branch_gated_on_sm90(self):
        assert AFTER != BEFORE
        self.assert_transform(BEFORE, AFTER)

    def test_older_branch_shape(self):
        assert AFTER_OLD != AFTER
        self.assert_transform(BEFORE_OLD, AFTER_OLD)

    @pytest.mark.parametrize("gate", [
        "torch.cuda.get_device_capability()[0] < 9",
        "not is_sm90_supported()",
        "get_device_capability() < (9, 0)",
    ])
    def test_upstream_generation_check_recognised(self, gate):
        fixed = BEFORE.replace(
            "            from sglang.srt.layers.attention.linear.kernels.gdn_cutedsl import (",
            f"            if {gate}:\n                raise ValueError('cutedsl GDN decode needs SM90+')\n"
            "            from sglang.srt.layers.attention.linear.kernels.gdn_cutedsl import (",
        )
        assert GdnCutedslDecodeSm90().is_fixed_upstream(self.PATH, self.parse(fixed))

    def test_prefill_fallback_is_not_an_upstream_decode_fix(self):
        tree = self.parse(BEFORE.replace("cutedsl_kernel.supports_prefill", "torch.cuda.get_device_capability()[0] >= 10"))
        assert not GdnCutedslDecodeSm90().is_fixed_upstream(self.PATH, tree)

    def test_prefill_chain_is_not_the_anchor(self):
        source = BEFORE.replace("        if decode_backend.is_triton():\n            self.decode_kernel", "        if decode_backend.is_xpu():\n            self.decode_kernel")
        with pytest.raises(AnchorError, match="anchor not found"):
            GdnCutedslDecodeSm90().transform(self.PATH, self.parse(source))

    def test_no_cutedsl_branch_is_an_error(self):
        source = BEFORE.replace("decode_backend.is_cutedsl()", "decode_backend.is_flashinfer()")
        with pytest.raises(AnchorError, match="is_cutedsl"):
            GdnCutedslDecodeSm90().transform(self.PATH, self.parse(source))

    def test_file_without_dispatcher_is_skipped(self):
        with pytest.raises(SkipPatch):
            GdnCutedslDecodeSm90().transform(self.PATH, self.parse("x = 1\n"))

    def test_upstream_check_in_another_method_recognised(self):
        """Upstream's gate may sit in a helper of the class: PARTS' `:is_cutedsl` parses it."""
        fixed = BEFORE + '''
    def _check_decode(self, decode_backend):
        if decode_backend.is_cutedsl():
            if torch.cuda.get_device_capability()[0] < 9:
                raise ValueError("cutedsl GDN decode needs SM90+")
'''
        assert GdnCutedslDecodeSm90().is_fixed_upstream(self.PATH, self.parse(fixed))

    def test_an_init_without_any_cutedsl_branch_is_an_error(self):
        """No `is_cutedsl` anywhere in __init__: only PARTS' `__init__` has the engine parse it."""
        source = BEFORE.replace(".is_cutedsl()", ".is_flashinfer()")
        with pytest.raises(AnchorError, match="is_cutedsl"):
            GdnCutedslDecodeSm90().transform(self.PATH, self.parse(source))
