"""The runtime report inside SGLang's real scheduler process code.

Run in the behaviour venv with PYTHONPATH at a patched SGLang tree (the read-only overlay way:
the plugin's dist-info is found on PYTHONPATH). A child started with 'spawn' (as SGLang starts
its schedulers), with PROMETHEUS_MULTIPROC_DIR set as SGLang's launcher sets it, imports the real
`sglang.srt.managers.scheduler`, calls its `load_plugins()` from a frame named like SGLang's
`run_scheduler_process` (whose arguments carry the ranks), then the real
`Scheduler.get_internal_state` (attributes it reads stood in: no model is loaded here). The parent
reads the gauge through prometheus_client's multiprocess collector while the child is alive.
Prints one JSON object.
"""

import io
import json
import multiprocessing
import os
import sys
import tempfile


def run_scheduler_process(tp_rank, pp_rank, dp_rank, load_plugins):
    # Stands in for SGLang's own function of this name: the plugin reads the ranks from its frame.
    load_plugins()


def child(queue, proceed):
    from types import SimpleNamespace as NS

    import sglang.srt.managers.scheduler as scheduler_module
    from sglang.srt.managers.io_struct import GetInternalStateReq, GetInternalStateReqOutput

    report = {"loaded_before": "sglang_patchkit_runtime" in sys.modules}
    captured, real_stderr = io.StringIO(), sys.stderr
    sys.stderr = captured
    try:
        run_scheduler_process(0, 0, 1, scheduler_module.load_plugins)
    finally:
        sys.stderr = real_stderr
    report["log"] = [line for line in captured.getvalue().splitlines() if line.startswith("patchkit:")]
    plugin = sys.modules.get("sglang_patchkit_runtime")
    report["plugin_file"] = getattr(plugin, "__file__", None)
    method = scheduler_module.Scheduler.get_internal_state
    report["hooked"] = getattr(method, "__wrapped__", None) is not None

    for name, stand_in in (
        ("get_context", lambda: NS(resolved_server_args_dict=lambda: {"stand_in": True})),
        ("get_global_server_args", lambda: NS(stand_in=True)),
        ("get_exec", lambda: NS(moe=NS(elastic_ep_backend=None))),
    ):
        if hasattr(scheduler_module, name):
            setattr(scheduler_module, name, stand_in)
    scheduler = NS(
        metrics_reporter=NS(last_gen_throughput=0.0, spec_total_num_forward_ct=0, step_time_dict={}),
        draft_worker=None,
        tp_worker=NS(model_runner=NS(weight_load_mem_usage=1.0, graph_mem_usage=0.0), graph_memory_usage={}),
        token_to_kv_pool_allocator=NS(get_kvcache=lambda: NS(mem_usage=1.0)),
        startup_available_gpu_memory_gb=10.0, max_total_num_tokens=100, swa_tokens_per_layer=None,
        startup_time=0.0, max_running_requests=4, spec_algorithm=NS(is_none=lambda: True, is_dspark=lambda: False),
        dp_rank=1, tp_rank=0, pp_rank=0,
        # 0.5.22 on: the method delegates to this controller
        internal_state=NS(get_internal_state=lambda req: GetInternalStateReqOutput(internal_state={"stand_in": True})),
    )
    try:
        out = method(scheduler, GetInternalStateReq())
        report["internal_state"] = out.internal_state
    except Exception as exc:
        report["internal_state_error"] = f"{type(exc).__name__}: {exc}"
    queue.put(json.dumps(report, default=str))
    proceed.wait(120)


def main():
    folder = tempfile.mkdtemp(prefix="prometheus-multiproc-")
    os.environ["PROMETHEUS_MULTIPROC_DIR"] = folder
    context = multiprocessing.get_context("spawn")
    queue, proceed = context.Queue(), context.Event()
    process = context.Process(target=child, args=(queue, proceed))
    process.start()
    report = json.loads(queue.get(timeout=600))
    from prometheus_client import CollectorRegistry, generate_latest
    from prometheus_client.multiprocess import MultiProcessCollector

    registry = CollectorRegistry()
    MultiProcessCollector(registry)
    report["metrics"] = [line for line in generate_latest(registry).decode().splitlines()
                         if line.startswith("sglang:patchkit_patch_active{")]
    report["child_pid"] = process.pid
    proceed.set()
    process.join(60)
    report["child_exit"] = process.exitcode
    print(json.dumps(report))


if __name__ == "__main__":
    main()
