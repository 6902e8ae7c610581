from __future__ import annotations

import pytest

from patchkit.base.errors import AnchorError
from patchkit.authoring.patch import SkipPatch
from patchkit.patches.fp8_kv_triton_sm89 import CHECK, TRITON_BACKEND, Fp8KvTritonSm89
from testing.patch_test import PatchTest

BEFORE = '''
import torch


@dataclass
class ForwardMetadata:
    attn_logits: torch.Tensor


# The Triton attention backend.
class TritonAttnBackend(AttentionBackend):
    def __init__(
        self,
        model_runner: ModelRunner,
        skip_prefill: bool = False,
    ):
        # Lazy import to avoid the initialization of cuda context
        from sglang.kernels.ops.attention.decode_attention import decode_attention_fwd

        super().__init__()

        self.decode_attention_fwd = decode_attention_fwd
'''

AFTER = '''
import torch


@dataclass
class ForwardMetadata:
    attn_logits: torch.Tensor
''' + CHECK.code() + '''

# The Triton attention backend.
class TritonAttnBackend(AttentionBackend):
    def __init__(
        self,
        model_runner: ModelRunner,
        skip_prefill: bool = False,
    ):
        # Lazy import to avoid the initialization of cuda context
        from sglang.kernels.ops.attention.decode_attention import decode_attention_fwd

        super().__init__()
        _patchkit_refuse_fp8_e4m3_below_sm89(model_runner)  # patchkit fp8-kv-triton-sm89

        self.decode_attention_fwd = decode_attention_fwd
'''

UPSTREAM_FIXED = BEFORE.replace("        super().__init__()\n", '''        super().__init__()
        if (
            model_runner.kv_cache_dtype == torch.float8_e4m3fn
            and torch.cuda.get_device_capability() < (8, 9)
            and "fp8-kv-triton-sm89" not in map(str.strip, __import__("os").environ.get("SGLANG_PATCHKIT_DISABLE", "").split(","))
        ):
            raise ValueError("fp8_e4m3 KV cache needs SM89+ with the Triton backend")
''')

# 0.5.23 reads the e4m3 dtype in __init__ for a feature switch, which is no refusal.
FEATURE_SWITCH = BEFORE.replace("        super().__init__()\n", '''        super().__init__()
        if model_runner.kv_cache_dtype == torch.float8_e4m3fn and self.use_mla:
            self.use_dense_fp8_chunked_prefill = True
''')


class TestFp8KvTritonSm89(PatchTest):
    PATCH = Fp8KvTritonSm89
    PATH = TRITON_BACKEND

    def test_refusal_called_after_super_init(self):
        self.assert_transform(BEFORE, AFTER)

    def test_upstream_refusal_recognised(self):
        assert Fp8KvTritonSm89().is_fixed_upstream(self.PATH, self.parse(UPSTREAM_FIXED))

    def test_e4m3_feature_switch_is_not_an_upstream_fix(self):
        assert not Fp8KvTritonSm89().is_fixed_upstream(self.PATH, self.parse(FEATURE_SWITCH))
        self.assert_transform(FEATURE_SWITCH, AFTER.replace("        super().__init__()\n", "        super().__init__()\n", 1).replace(
            "  # patchkit fp8-kv-triton-sm89\n",
            "  # patchkit fp8-kv-triton-sm89\n        if model_runner.kv_cache_dtype == torch.float8_e4m3fn and self.use_mla:\n"
            "            self.use_dense_fp8_chunked_prefill = True\n"))

    def test_init_without_super_call_is_an_error(self):
        with pytest.raises(AnchorError, match="super"):
            Fp8KvTritonSm89().transform(self.PATH, self.parse(BEFORE.replace("        super().__init__()\n", "")))

    def test_init_without_model_runner_is_an_error(self):
        with pytest.raises(AnchorError, match="model_runner"):
            Fp8KvTritonSm89().transform(self.PATH, self.parse(BEFORE.replace("model_runner: ModelRunner", "runner")))

    def test_file_without_backend_is_skipped(self):
        with pytest.raises(SkipPatch):
            Fp8KvTritonSm89().transform(self.PATH, self.parse("x = 1\n"))
