"""Build SGLang's real GDNKernelDispatcher with `--linear-attn-decode-backend cutedsl` on a GPU
of each compute capability in argv ("8.6" "9.0"), and print, per capability, which decode kernel
it chose, what it logged about CuTe DSL.

Stood in: torch.cuda.get_device_capability (the capability), gdn_backend.is_cuda (True), and the
CuTe-DSL kernel module, which needs the GPU-only `cutlass` package; its stand-in class only
records that it was chosen. Run inside the behaviour venv with PYTHONPATH pointing at an SGLang tree.
"""

import json
import logging
import sys
import types

import torch

from sglang.srt.layers.attention.linear import gdn_backend
from sglang.srt.layers.attention.linear.utils import LinearAttnKernelBackend

CUTEDSL_MODULE = "sglang.srt.layers.attention.linear.kernels.gdn_cutedsl"
gdn_backend.is_cuda = lambda: True


class Records(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(f"{record.levelname}: {record.getMessage()}")


def dispatch(capability: str) -> dict:
    torch.cuda.get_device_capability = lambda device=None: tuple(int(part) for part in capability.split("."))

    class CuteDSLGDNKernel:
        supports_prefill = False

    stand_in = types.ModuleType(CUTEDSL_MODULE)
    stand_in.CuteDSLGDNKernel = CuteDSLGDNKernel
    sys.modules[CUTEDSL_MODULE] = stand_in
    records = Records()
    root = logging.getLogger()
    root.addHandler(records)
    root.setLevel(logging.DEBUG)
    try:
        dispatcher = gdn_backend.GDNKernelDispatcher(
            decode_backend=LinearAttnKernelBackend.CUTEDSL, prefill_backend=LinearAttnKernelBackend.TRITON
        )
    finally:
        root.removeHandler(records)
    return {
        "decode_kernel": type(dispatcher.decode_kernel).__name__,
        "extend_kernel": type(dispatcher.extend_kernel).__name__,
        "log": [line for line in records.lines if "cute" in line.lower()],
    }


print(json.dumps({"sglang_file": gdn_backend.__file__, **{cap: dispatch(cap) for cap in sys.argv[1:]}}))
