"""Put on a benchmarked SGLang server's PYTHONPATH by bench/server.py (never in the tests): in
every process of the server, times patchkit's runtime plugin, `register()` (what the plugin adds
to the process's start) against the time the process spent before SGLang loaded its plugins
(interpreter start-up and SGLang's imports), and appends one JSON line per process to the file
named by PATCHKIT_BENCH_PLUGIN_LOG."""

import json
import os
import sys
import time

_STARTED = time.perf_counter()  # sitecustomize is imported as the interpreter starts
_PLUGIN = "sglang_patchkit_runtime"


class _TimeRegister:
    """Finds the plugin module as Python would, and wraps its `register` once it is loaded."""

    def find_spec(self, name, path=None, target=None):
        if name != _PLUGIN:
            return None
        sys.meta_path.remove(self)
        import importlib.util

        spec = importlib.util.find_spec(name)
        if spec is None or spec.loader is None:
            return spec
        load = spec.loader.exec_module

        def exec_module(module):
            load(module)
            module.register = _timed(module.register)

        spec.loader.exec_module = exec_module
        return spec


def _timed(register):
    def timed():
        before = time.perf_counter()
        try:
            return register()
        finally:
            after = time.perf_counter()
            line = {"pid": os.getpid(), "before_plugins_s": before - _STARTED, "register_s": after - before,
                    "modules": len(sys.modules)}
            with open(os.environ["PATCHKIT_BENCH_PLUGIN_LOG"], "a") as log:
                log.write(json.dumps(line) + "\n")

    return timed


if os.environ.get("PATCHKIT_BENCH_PLUGIN_LOG"):
    sys.meta_path.insert(0, _TimeRegister())
