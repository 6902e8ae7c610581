"""The server tier's one stand-in (testing/sgl_kernel_standin): it imports no torch (so registers
no operators), a `*_cpu` name resolves to a function that records the call and raises, any other
name is missing, each importing process is recorded; and what the tier asserts after each test,
no call, sees a recorded one."""

from __future__ import annotations

import os
import subprocess
import sys

from testing.server import KERNEL_LOG, STANDIN, Server

PROBE = """
import sys
import sgl_kernel
print("torch imported:", "torch" in sys.modules)  # it registers no torch operators: SGLang's CPU paths stay plain torch
from sgl_kernel import assign_req_to_token_pool_cpu
try:
    from sgl_kernel import gptq_gemm
except ImportError as exc:
    print("missing:", exc)
try:
    assign_req_to_token_pool_cpu(1, 2)
except sgl_kernel.KernelCalled as exc:
    print("raised:", exc)
"""


def test_a_cpu_kernel_records_the_call_and_raises(tmp_path):
    log = tmp_path / "sgl_kernel.log"
    env = {**os.environ, "PYTHONPATH": str(STANDIN), KERNEL_LOG: str(log)}
    done = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, env=env, timeout=60)
    assert done.returncode == 0, done.stderr
    assert "torch imported: False" in done.stdout
    assert "missing: cannot import name 'gptq_gemm'" in done.stdout
    assert "raised: sgl_kernel.assign_req_to_token_pool_cpu was called" in done.stdout
    # What Server.kernel_events reads back: the importing process, and the call the tier fails on.
    server = Server("0.5.23", None, 0, tmp_path, tmp_path / "server.log", log)  # type: ignore[arg-type]
    imported, calls = server.kernel_events()
    assert len(imported) == 1 and calls == [f"call assign_req_to_token_pool_cpu {imported.pop()}"]

