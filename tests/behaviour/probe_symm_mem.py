"""What a spawned SGLang child process sees of torch symmetric memory.

Run in the behaviour venv with PYTHONPATH at an SGLang tree. A child started with the
'spawn' method (as SGLang starts its schedulers) imports SGLang's real triton_symm_mem_ag,
calls torch's symmetric-memory empty/rendezvous, runs the real MultimemAllGatherer._build()
(TP group of 2 stood in: there is no GPU here), and builds TorchSymmMemCommunicator as
--enable-torch-symm-mem would. Prints one JSON object.
"""

import json
import multiprocessing
import sys


def child(queue):
    report = {"torch_loaded_at_start": "torch" in sys.modules}
    import logging
    from types import SimpleNamespace

    import torch
    import torch.distributed._symmetric_memory as symm_mem

    import sglang.srt.distributed as distributed
    from sglang.srt.distributed import parallel_state
    from sglang.srt.distributed.device_communicators import triton_symm_mem_ag as ag

    for name, call in (("empty", lambda: symm_mem.empty(16, device="cpu")),
                       ("rendezvous", lambda: symm_mem.rendezvous(torch.zeros(1), group="0"))):
        try:
            call()
            report[name] = "returned"
        except Exception as exc:  # what _build's `except Exception` would see
            report[name] = f"{type(exc).__name__}: {exc}"

    warnings = []
    handler = logging.Handler()
    handler.emit = lambda record: warnings.append(record.getMessage())
    ag.logger.addHandler(handler)
    # Stand-ins for what a GPU box has: a TP group of 2 and a current CUDA device, so that
    # _build() goes as far as it does there (up to symm_mem.empty).
    import tempfile

    import torch.distributed as dist

    dist.init_process_group("gloo", init_method=f"file://{tempfile.mktemp()}", rank=0, world_size=1)
    tp_group = SimpleNamespace(world_size=2, rank_in_group=0, device_group=dist.group.WORLD)
    parallel_state.get_tp_group = distributed.get_tp_group = lambda: tp_group
    torch.cuda.current_device = lambda: 0
    gatherer = object.__new__(ag.MultimemAllGatherer)
    gatherer._max_tokens = 8
    x = torch.zeros(2, ag._NUMEL_PER_THREAD * 4, dtype=torch.bfloat16)
    report["build"] = repr(gatherer._build(x))
    report["build_warnings"] = warnings

    from sglang.srt.distributed.device_communicators import torch_symm_mem

    try:
        torch_symm_mem.TorchSymmMemCommunicator(group=None, device="cpu")
        report["enable_torch_symm_mem"] = "constructed"
    except Exception as exc:
        report["enable_torch_symm_mem"] = f"{type(exc).__name__}: {exc}"
    dist.destroy_process_group()
    queue.put(report)


if __name__ == "__main__":
    context = multiprocessing.get_context("spawn")
    queue = context.Queue()
    process = context.Process(target=child, args=(queue,))
    process.start()
    report = queue.get(timeout=300)
    process.join()
    report["child_exitcode"] = process.exitcode
    print(json.dumps(report))
