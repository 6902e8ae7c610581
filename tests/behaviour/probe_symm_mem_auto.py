"""The symm-mem kill switch's automatic decision on SGLang's real, patched triton_symm_mem_ag and
torch_symm_mem modules, with the device facts stood in per scenario (there is no GPU here):
the host's kernel release (WSL2 or not), whether CUDA is initialised, the GPU count, torch's
multicast query (_SymmetricMemory.has_multicast_support) and peer access
(torch.cuda.can_device_access_peer). For each scenario: what torch symmetric memory's `empty`
does through the switch, the decision, the log lines it wrote, and what --enable-torch-symm-mem
(TorchSymmMemCommunicator) does. Prints one JSON object.
"""

import json
import logging
import os
import platform
from types import SimpleNamespace

import torch
import torch.distributed._symmetric_memory as symm_mem

from sglang.srt.distributed.device_communicators import torch_symm_mem
from sglang.srt.distributed.device_communicators import triton_symm_mem_ag as ag

ENV = "SGLANG_PATCH_DISABLE_SYMM_MEM"
SWITCH = "patchkit's symm-mem kill switch"

lines: list[str] = []
handler = logging.Handler()
handler.emit = lambda record: lines.append(record.getMessage())
logging.getLogger(ag.__name__).addHandler(handler)

SCENARIOS = {
    "nvswitch_auto": dict(env=None),
    "nvswitch_explicit_auto": dict(env="auto"),
    "pcie_auto": dict(env=None, multicast=False),
    "no_peer_auto": dict(env=None, peer=False),
    "wsl2_auto": dict(env=None, wsl=True),
    "no_cuda_yet_auto": dict(env=None, cuda=False),
    "nvswitch_forced_on": dict(env="1"),
    "pcie_forced_off": dict(env="0", multicast=False),
}


def scenario(env=None, wsl=False, cuda=True, gpus=8, multicast=True, peer=True):
    if env is None:
        os.environ.pop(ENV, None)
    else:
        os.environ[ENV] = env
    platform.release = lambda: "5.15.167.4-microsoft-standard-WSL2" if wsl else "6.8.0-49-generic"
    torch.cuda.is_available = lambda: cuda
    torch.cuda.is_initialized = lambda: cuda
    torch.cuda.device_count = lambda: gpus
    queried = []

    def can_access(device, peer_device):
        queried.append((device, peer_device))
        return peer

    torch.cuda.can_device_access_peer = can_access
    symm_mem._SymmetricMemory = SimpleNamespace(has_multicast_support=lambda device_type, index: multicast)
    ag._patchkit_symm_mem_blocked.__dict__.clear()  # a fresh process's first call
    lines.clear()
    report = {}
    try:
        symm_mem.empty(16, device="cpu")
        report["empty"] = "torch's own empty returned"
    except Exception as exc:  # what _build()'s `except Exception` sees
        report["empty"] = f"{type(exc).__name__}: {exc}"
    report["blocked"] = ag._patchkit_symm_mem_blocked()  # asked again: decided once
    try:
        torch_symm_mem.TorchSymmMemCommunicator(group=None, device="cpu")
        report["enable_torch_symm_mem"] = "constructed"
    except Exception as exc:
        report["enable_torch_symm_mem"] = f"{type(exc).__name__}: {exc}"
    report["log"] = list(lines)
    report["peer_queries"] = len(queried)
    return report


print(json.dumps({"sglang_file": ag.__file__, **{name: scenario(**kw) for name, kw in SCENARIOS.items()}}))
