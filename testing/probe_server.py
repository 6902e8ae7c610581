"""Runs probe scripts for testing/behaviour.py, in the behaviour environment, each in a process
forked from this one after the heavy libraries SGLang imports are loaded once.

A probe run as `python probe.py` spends ~20 of its ~25 s importing torch, torchvision,
transformers and friends before SGLang's own modules; forked from here, it starts with them in
memory and imports only the SGLang tree it is pointed at. SGLang itself is never imported here
(every probe gets its own tree), and every probe is a process of its own, as before.

Protocol (one JSON object per line): a request on stdin {"script", "args", "site", "env",
"stdout", "stderr", "timeout"}; the reply on stdout, a line `probe-exit {"status": N}` (N as
subprocess reports it: the exit code, or minus the signal that ended the probe).
"""

import json
import os
import signal
import sys

# SGLang's heavy third-party imports (`python -X importtime` of the probes), in import order.
PRELOAD = (
    "numpy", "torch", "torchvision", "torchvision.io", "triton", "transformers",
    "transformers.models.llama", "torch._inductor.compile_fx", "torch._dynamo.repro.after_dynamo",
    "openai", "openai.types.responses", "xgrammar", "aiohttp", "compressed_tensors",
)
REPLY = "probe-exit "


def preload() -> None:
    import importlib

    for name in PRELOAD:
        try:
            importlib.import_module(name)
        except ImportError:
            pass  # SGLang's own import fails the probe then, with its real message
    assert not [name for name in sys.modules if name == "sglang" or name.startswith("sglang.")]


def become_probe(request: dict) -> None:
    """In the forked child: what `PYTHONPATH=site python script args` would have set up."""
    signal.alarm(int(request["timeout"]))  # default action: the probe ends, the reply says SIGALRM
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    for fd, path in ((1, request["stdout"]), (2, request["stderr"])):
        out = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        os.dup2(out, fd)
        os.close(out)
    os.environ.clear()
    os.environ.update(request["env"])  # child processes (multiprocessing spawn) get it too
    script = request["script"]
    sys.path[:0] = [os.path.dirname(script), request["site"]]
    sys.argv = [script, *request["args"]]
    import runpy

    runpy.run_path(script, run_name="__main__")


def main() -> None:
    del sys.path[0]  # this file's folder: a probe sees its own folder and the SGLang tree only
    preload()
    replies = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)  # whatever a library prints goes to stderr, not into the replies
    for line in sys.stdin:
        request = json.loads(line)
        sys.stdout.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:
            replies.close()
            become_probe(request)
            return  # the probe's end is this interpreter's normal end (atexit, exit code 0)
        _, status = os.waitpid(pid, 0)
        replies.write(REPLY + json.dumps({"status": os.waitstatus_to_exitcode(status)}) + "\n")
        replies.flush()


main()
