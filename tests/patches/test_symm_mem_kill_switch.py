from __future__ import annotations

import pytest

from patchkit.errors import AnchorError
from patchkit.patch import SkipPatch
from patchkit.patches.symm_mem_kill_switch import MULTIMEM_AG, TORCH_SYMM_MEM, SymmMemKillSwitch
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


def _patchkit_symm_mem_blocked():
    """patchkit symm-mem-kill-switch: why torch symmetric memory must not run in this process
    ("" when it may), decided once, before its first native call, from what the process already
    has (it initialises nothing). SGLANG_PATCH_DISABLE_SYMM_MEM=auto (the default) blocks it only where the native
    rendezvous would crash (SIGFPE, which no try/except catches): a WSL2 host, or GPUs without
    multicast or without peer access; SGLANG_PATCH_DISABLE_SYMM_MEM=1 always blocks it, 0 never does."""
    verdict = _patchkit_symm_mem_blocked.__dict__
    if "reason" in verdict:
        return verdict["reason"]
    import logging
    import os
    import platform

    import torch

    setting = os.environ.get("SGLANG_PATCH_DISABLE_SYMM_MEM", "auto").strip().lower()
    reason, why = "", ""
    if setting == "0":
        why = "SGLANG_PATCH_DISABLE_SYMM_MEM=0"
    elif setting == "1":
        reason = "SGLANG_PATCH_DISABLE_SYMM_MEM=1"
    elif "microsoft" in platform.release().lower():
        reason = "auto: WSL2 host"
    elif not (torch.cuda.is_available() and torch.cuda.is_initialized()):
        reason = "auto: no initialised CUDA device whose facts could be read"
    else:
        count = torch.cuda.device_count()
        why = f"auto: {count} GPU(s) with multicast and peer access, not WSL2"
        try:
            for device in range(count):
                if not symm_mem._SymmetricMemory.has_multicast_support(symm_mem.DeviceType.CUDA, device):
                    reason = f"auto: GPU {device} has no multicast support"
                    break
                blind = [peer for peer in range(count) if peer != device and not torch.cuda.can_device_access_peer(device, peer)]
                if blind:
                    reason = f"auto: GPU {device} has no peer access to GPU {blind[0]}"
                    break
        except Exception as exc:  # this torch cannot tell: the safe side
            reason = f"auto: device facts unreadable ({type(exc).__name__}: {exc})"
    logging.getLogger(__name__).warning(
        "patchkit symm-mem-kill-switch: torch symmetric memory %s (%s)",
        "blocked, SGLang falls back to NCCL" if reason else "allowed",
        reason or why,
    )
    verdict["reason"] = reason
    return reason


def _patchkit_symm_mem_kill_switch():
    """patchkit symm-mem-kill-switch: torch symmetric memory's empty/rendezvous raise a Python
    error, which lets _build() fall back to NCCL, where _patchkit_symm_mem_blocked() says the native rendezvous
    would crash. SGLANG_PATCH_DISABLE_SYMM_MEM=0 leaves them untouched."""
    import os

    if os.environ.get("SGLANG_PATCH_DISABLE_SYMM_MEM", "auto").strip().lower() == "0":
        return

    def guarded(real):
        def call(*args, **kwargs):
            reason = _patchkit_symm_mem_blocked()
            if reason:
                raise RuntimeError(
                    "torch symmetric memory is off: patchkit's symm-mem kill switch stops it before "
                    f"its native rendezvous ({reason}); set SGLANG_PATCH_DISABLE_SYMM_MEM=0 to allow it"
                )
            return real(*args, **kwargs)

        return call

    symm_mem.empty = guarded(symm_mem.empty)
    symm_mem.rendezvous = guarded(symm_mem.rendezvous)


_patchkit_symm_mem_kill_switch()

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
        import os

        if os.environ.get("SGLANG_PATCH_DISABLE_SYMM_MEM", "auto").strip().lower() != "0":
            from sglang.srt.distributed.device_communicators.triton_symm_mem_ag import _patchkit_symm_mem_blocked

            symm_mem_off = _patchkit_symm_mem_blocked()
            if symm_mem_off:
                raise RuntimeError(
                    "--enable-torch-symm-mem needs torch symmetric memory, which patchkit's symm-mem "
                    f"kill switch turns off here ({symm_mem_off}); set SGLANG_PATCH_DISABLE_SYMM_MEM=0 to use it, or drop the flag"
                )

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

    def test_upstream_switch_recognised(self):
        fixed = AG_BEFORE + '\nif os.environ.get("SGLANG_DISABLE_MULTIMEM_AG"):\n    pass\n'
        assert SymmMemKillSwitch().is_fixed_upstream(self.PATH, self.parse(fixed))
        via_envs = AG_BEFORE + "\nif envs.SGLANG_DISABLE_MULTIMEM_AG.get():\n    pass\n"
        assert SymmMemKillSwitch().is_fixed_upstream(self.PATH, self.parse(via_envs))


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
