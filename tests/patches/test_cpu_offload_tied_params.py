from __future__ import annotations

import pytest

from patchkit.base.errors import AnchorError
from patchkit.authoring.patch import SkipPatch
from patchkit.patches.cpu_offload_tied_params import OFFLOADER, CpuOffloadTiedParams
from testing.patch_test import PatchTest

BEFORE = '''
import torch
from torch.func import functional_call


def create_offloader():
    return None


class OffloaderV1:
    def maybe_offload_to_cpu(self, module):
        device = next(module.parameters()).device
        if offloaded_parameters:
            original_forward = module.forward

            def forward(*args, **kwargs):
                module.forward = original_forward
                device_state = {
                    # here we blindly call `to(device)`
                    k: v.to(device, non_blocking=True)
                    for k, v in module.state_dict().items()
                }
                output = functional_call(module, device_state, args=args, kwargs=kwargs)
                module.forward = forward
                return output

            module.forward = forward
        return module
'''

AFTER = '''
import torch
from torch.func import functional_call


def create_offloader():
    return None


def _patchkit_device_state(module, device):
    """patchkit cpu-offload-tied-params: the state for functional_call with each distinct
    tensor moved once and shared by all its names, so tied parameters (the dt_bias / A_log
    that RadixLinearAttention re-registers) stay tied instead of arriving as two values."""
    moved = {}
    device_state = {}
    for name, value in module.state_dict(keep_vars=True).items():
        if id(value) not in moved:
            moved[id(value)] = value.detach().to(device, non_blocking=True)
        device_state[name] = moved[id(value)]
    return device_state


class OffloaderV1:
    def maybe_offload_to_cpu(self, module):
        device = next(module.parameters()).device
        if offloaded_parameters:
            original_forward = module.forward

            def forward(*args, **kwargs):
                module.forward = original_forward
                device_state = (
                    _patchkit_device_state(module, device)
                    if "cpu-offload-tied-params" not in map(str.strip, __import__("os").environ.get("SGLANG_PATCHKIT_DISABLE", "").split(","))
                    else {
                    # here we blindly call `to(device)`
                    k: v.to(device, non_blocking=True)
                    for k, v in module.state_dict().items()
                }
                )
                output = functional_call(module, device_state, args=args, kwargs=kwargs)
                module.forward = forward
                return output

            module.forward = forward
        return module
'''

# 0.5.21's shape: a helper walking state_dict(keep_vars=True), one move per id().
UPSTREAM_FIXED = '''
def _get_offloaded_device_state(module, device):
    transferred = {}
    device_state = {}
    for name, value in module.state_dict(keep_vars=True).items():
        key = id(value)
        if key not in transferred:
            transferred[key] = value.detach().to(device, non_blocking=True)
        device_state[name] = transferred[key]
    return device_state


class OffloaderV1:
    def maybe_offload_to_cpu(self, module):
        def forward(*args, **kwargs):
            device_state = _get_offloaded_device_state(module, device)
            return functional_call(module, device_state, args=args, kwargs=kwargs)
'''


class TestCpuOffloadTiedParams(PatchTest):
    PATCH = CpuOffloadTiedParams
    PATH = OFFLOADER

    def test_hook_moves_each_tensor_once(self):
        self.assert_transform(BEFORE, AFTER)

    def test_upstream_helper_recognised(self):
        assert CpuOffloadTiedParams().is_fixed_upstream(self.PATH, self.parse(UPSTREAM_FIXED))

    def test_helper_without_keep_vars_is_not_a_fix(self):
        tree = self.parse(UPSTREAM_FIXED.replace("state_dict(keep_vars=True)", "state_dict()"))
        assert not CpuOffloadTiedParams().is_fixed_upstream(self.PATH, tree)

    def test_helper_beside_the_old_comprehension_is_not_a_fix(self):
        tree = self.parse(BEFORE + UPSTREAM_FIXED.split("class OffloaderV1")[0])
        assert not CpuOffloadTiedParams().is_fixed_upstream(self.PATH, tree)

    def test_comprehension_over_keep_vars_is_not_the_anchor(self):
        source = BEFORE.replace("module.state_dict().items()", "module.state_dict(keep_vars=True).items()")
        with pytest.raises(AnchorError, match="anchor not found"):
            CpuOffloadTiedParams().transform(self.PATH, self.parse(source))

    def test_file_without_offloader_v1_is_skipped(self):
        with pytest.raises(SkipPatch):
            CpuOffloadTiedParams().transform(self.PATH, self.parse("class OffloaderV2:\n    pass\n"))
