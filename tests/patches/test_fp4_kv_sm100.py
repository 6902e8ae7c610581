from __future__ import annotations

import pytest

from patchkit.authoring.patch import SkipPatch
from patchkit.patches.fp4_kv_sm100 import KV_CACHE_DTYPE, MODEL_RUNNER, REFUSAL, Fp4KvSm100
from testing.patch_test import PatchTest

# 0.5.16+ shape of mem_cache/kv_cache_dtype.py (fp4_e2m1 refused as deprecated, its own FP4 branch).
RESOLVER_BEFORE = '''
import torch


def configure_kv_cache_dtype(*, server_args_kv_cache_dtype, model, model_dtype):
    if server_args_kv_cache_dtype == "auto":
        kv_cache_dtype = model_dtype
    elif server_args_kv_cache_dtype == "fp8_e5m2":
        kv_cache_dtype = torch.float8_e5m2
    elif server_args_kv_cache_dtype == "fp4_e2m1":
        raise ValueError("--kv-cache-dtype=fp4_e2m1 is deprecated.")
    elif server_args_kv_cache_dtype in ("nvfp4", "fp4_mx_block16"):
        if hasattr(torch, "float4_e2m1fn_x2"):
            kv_cache_dtype = torch.float4_e2m1fn_x2
            logger.warning("%s KV Cache might lead to an accuracy drop!", server_args_kv_cache_dtype.upper())
        else:
            raise ValueError("needs torch.float4_e2m1fn_x2")
    else:
        raise ValueError(f"Unsupported kv_cache_dtype: {server_args_kv_cache_dtype}.")
    return None, kv_cache_dtype
'''

RESOLVER_AFTER = RESOLVER_BEFORE.replace('''            kv_cache_dtype = torch.float4_e2m1fn_x2
''', '''            kv_cache_dtype = torch.float4_e2m1fn_x2
''' + REFUSAL.code(indent=12, requested="server_args_kv_cache_dtype"))

# 0.5.10-0.5.15: ModelRunner.configure_kv_cache_dtype resolves the dtype itself (MXFP4 as fp4_e2m1).
RUNNER_BEFORE = '''
class ModelRunner:
    def configure_kv_cache_dtype(self):
        if self.server_args.kv_cache_dtype == "auto":
            self.kv_cache_dtype = self.dtype
        elif self.server_args.kv_cache_dtype in ("bf16", "bfloat16"):
            self.kv_cache_dtype = torch.bfloat16
        elif self.server_args.kv_cache_dtype == "fp4_e2m1":
            if hasattr(torch, "float4_e2m1fn_x2"):
                self.kv_cache_dtype = torch.float4_e2m1fn_x2
                logger.warning(f"FP4 (E2M1) KV Cache might lead to a accuracy drop!")
            else:
                self.kv_cache_dtype = self.dtype
        else:
            raise ValueError(f"Unsupported kv_cache_dtype: {self.server_args.kv_cache_dtype}.")

    def init_cublas(self):
        pass
'''

RUNNER_AFTER = RUNNER_BEFORE.replace('''                self.kv_cache_dtype = torch.float4_e2m1fn_x2
''', '''                self.kv_cache_dtype = torch.float4_e2m1fn_x2
''' + REFUSAL.code(indent=16, requested="self.server_args.kv_cache_dtype"))

# 0.5.16+: the method hands the work to kv_cache_dtype.py.
RUNNER_DELEGATING = '''
class ModelRunner:
    def configure_kv_cache_dtype(self):
        resolved, self.kv_cache_dtype = kv_cache_dtype.configure_kv_cache_dtype(
            server_args_kv_cache_dtype=self.server_args.kv_cache_dtype, model=self.model, model_dtype=self.dtype
        )
'''

# What an upstream refusal would look like: the FP4 branch tests the capability and raises.
UPSTREAM_FIXED = RESOLVER_BEFORE.replace('''            kv_cache_dtype = torch.float4_e2m1fn_x2
''', '''            if torch.cuda.is_available() and torch.cuda.get_device_capability() < (10, 0):
                raise ValueError("FP4 KV cache needs SM100; use --kv-cache-dtype fp8_e5m2")
            kv_cache_dtype = torch.float4_e2m1fn_x2
''')


class TestKvCacheDtypeResolver(PatchTest):
    PATCH = Fp4KvSm100
    PATH = KV_CACHE_DTYPE

    def test_refusal_after_the_fp4_dtype_is_chosen(self):
        self.assert_transform(RESOLVER_BEFORE, RESOLVER_AFTER)

    def test_upstream_refusal_recognised(self):
        assert Fp4KvSm100().is_fixed_upstream(self.PATH, self.parse(UPSTREAM_FIXED))

    def test_upstream_blackwell_check_recognised(self):
        fixed = UPSTREAM_FIXED.replace("torch.cuda.is_available() and torch.cuda.get_device_capability() < (10, 0)",
                                       "not is_sm100_supported()")
        assert Fp4KvSm100().is_fixed_upstream(self.PATH, self.parse(fixed))

    def test_a_raise_without_a_capability_test_is_no_fix(self):
        # The release's own torch check (no float4 dtype) is not a refusal below SM100.
        unrelated = UPSTREAM_FIXED.replace("torch.cuda.is_available() and torch.cuda.get_device_capability() < (10, 0)",
                                           'not hasattr(torch, "float4_e2m1fn_x2")')
        assert not Fp4KvSm100().is_fixed_upstream(self.PATH, self.parse(unrelated))

    def test_resolver_making_no_fp4_cache_is_skipped(self):
        # Only the deprecated fp4_e2m1 branch, which raises: no FP4 cache to refuse.
        no_fp4 = RESOLVER_BEFORE.replace('''    elif server_args_kv_cache_dtype in ("nvfp4", "fp4_mx_block16"):
        if hasattr(torch, "float4_e2m1fn_x2"):
            kv_cache_dtype = torch.float4_e2m1fn_x2
            logger.warning("%s KV Cache might lead to an accuracy drop!", server_args_kv_cache_dtype.upper())
        else:
            raise ValueError("needs torch.float4_e2m1fn_x2")
''', "")
        with pytest.raises(SkipPatch):
            Fp4KvSm100().transform(self.PATH, self.parse(no_fp4))

    def test_file_without_resolver_is_skipped(self):
        with pytest.raises(SkipPatch):
            Fp4KvSm100().transform(self.PATH, self.parse("x = 1\n"))


class TestModelRunnerResolver(PatchTest):
    PATCH = Fp4KvSm100
    PATH = MODEL_RUNNER

    def test_refusal_after_the_fp4_dtype_is_chosen(self):
        self.assert_transform(RUNNER_BEFORE, RUNNER_AFTER)

    def test_runner_handing_the_work_to_kv_cache_dtype_is_skipped(self):
        with pytest.raises(SkipPatch):
            Fp4KvSm100().transform(self.PATH, self.parse(RUNNER_DELEGATING))
