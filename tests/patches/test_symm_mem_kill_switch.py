from __future__ import annotations

import pytest

from patchkit.base.errors import AnchorError
from patchkit.authoring.patch import SkipPatch
from patchkit.patches.symm_mem_kill_switch import FLAG_GUARD, KILL_SWITCH, MULTIMEM_AG, TORCH_SYMM_MEM, SymmMemKillSwitch
from testing.patch_test import PatchTest

AG_BEFORE = '''
import torch
import torch.distributed._symmetric_memory as symm_mem
import triton

logger = None


def create_state(group):
    return symm_mem.rendezvous(symm_mem.empty(4), group=group)
'''

AG_AFTER = '''
import torch
import torch.distributed._symmetric_memory as symm_mem
import triton
''' + KILL_SWITCH.code(alias="symm_mem") + '''
logger = None


def create_state(group):
    return symm_mem.rendezvous(symm_mem.empty(4), group=group)
'''

TSM_BEFORE = '''
class TorchSymmMemCommunicator:
    def __init__(self, group, device):
        """Docs."""

        self.disabled = True
'''

TSM_AFTER = '''
class TorchSymmMemCommunicator:
    def __init__(self, group, device):
        """Docs."""
''' + FLAG_GUARD.code(indent=8) + '''
        self.disabled = True
'''


class TestKillSwitchInMultimemAllGather(PatchTest):
    PATCH = SymmMemKillSwitch
    PATH = MULTIMEM_AG

    def test_switch_installed_after_the_imports(self):
        self.assert_transform(AG_BEFORE, AG_AFTER)

    def test_other_alias_is_used(self):
        before = AG_BEFORE.replace("as symm_mem", "as sm").replace("symm_mem.", "sm.")
        patched = SymmMemKillSwitch().transform(self.PATH, self.parse(before)).code
        assert "    sm.empty = guarded(sm.empty)\n    sm.rendezvous = guarded(sm.rendezvous)\n" in patched
        assert "sm._SymmetricMemory.has_multicast_support(sm.DeviceType.CUDA, device)" in patched

    def test_missing_import_is_an_error(self):
        with pytest.raises(AnchorError, match="anchor not found"):
            SymmMemKillSwitch().transform(self.PATH, self.parse("import torch\n"))

    def test_a_switch_set_by_hand_is_no_upstream_fix(self):
        # sglang#36110: off by default, the crash stays until a user sets it; the patch still applies.
        for switch in ('\nif os.environ.get("SGLANG_DISABLE_MULTIMEM_AG"):\n    pass\n',
                       "\nif envs.SGLANG_DISABLE_MULTIMEM_AG.get():\n    pass\n"):
            tree = self.parse(AG_BEFORE + switch)
            assert not SymmMemKillSwitch().is_fixed_upstream(self.PATH, tree)
            assert self.engine_run(AG_BEFORE + switch)[0] == "pending"
            (change,) = [c for c in SymmMemKillSwitch.DROP_WAITS_ON if c.ref.endswith("#36110")]
            assert change.found(lambda rel: (AG_BEFORE + switch).encode() if rel == self.PATH else None)

    def test_upstream_peer_access_check_is_a_narrower_fix(self):
        # sglang#40485's shape: the all-gatherer asks the driver for peer access itself.
        fixed = AG_BEFORE + ("\ndef _local_gpus_have_peer_access():\n    return all(torch.cuda.can_device_access_peer(a, b)"
                             " for a in range(2) for b in range(2) if a != b)\n")
        patch = SymmMemKillSwitch()
        assert patch.is_fixed_upstream(self.PATH, self.parse(fixed)) and patch.is_upstream_narrower(self.PATH, self.parse(fixed))
        assert self.engine_run(fixed)[0] == "upstream-fixed"
        (change,) = [c for c in SymmMemKillSwitch.DROP_WAITS_ON if c.ref.endswith("#40485")]
        assert change.found(lambda rel: fixed.encode() if rel == self.PATH else None)
        assert not change.found(lambda rel: AG_BEFORE.encode() if rel == self.PATH else None)


class TestGuardOnEnableTorchSymmMem(PatchTest):
    PATCH = SymmMemKillSwitch
    PATH = TORCH_SYMM_MEM

    def test_guard_after_docstring(self):
        self.assert_transform(TSM_BEFORE, TSM_AFTER)

    def test_guard_first_without_docstring(self):
        before = TSM_BEFORE.replace('        """Docs."""\n\n', "")
        patched = SymmMemKillSwitch().transform(self.PATH, self.parse(before)).code
        assert patched.index("import os") < patched.index("self.disabled = True")

    def test_file_without_the_communicator_is_skipped(self):
        with pytest.raises(SkipPatch):
            SymmMemKillSwitch().transform(self.PATH, self.parse("x = 1\n"))
