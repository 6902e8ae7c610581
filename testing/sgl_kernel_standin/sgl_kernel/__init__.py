"""A stand-in for SGLang's compiled kernel package, for the server tests on this machine's CPU
(tests/server): placed first on the server's PYTHONPATH, it is the `sgl_kernel` every process of
the server imports.

Why it exists: the package index's `sgl_kernel` is a CUDA build (it needs libcuda.so.1 at import),
and SGLang's CPU engine imports a few `*_cpu` functions from it by name when its modules load
(`from sgl_kernel import assign_req_to_token_pool_cpu`, ...). It stands in for that binary only,
never for SGLang's Python:

- it registers no torch operators, so `torch.ops.sgl_kernel` stays empty and SGLang takes its
  plain-torch paths (its Intel AMX check, `cpu_has_amx_support()`, stays false);
- a `*_cpu` name resolves to a function that records the call and raises: the tests assert after
  each test that nothing was called, so a path that would need a real kernel fails them;
- any other name is missing, as in a build without it (`from sgl_kernel import x` raises ImportError).

Each process that imports it appends `import <pid>` to the file named by PATCHKIT_SGL_KERNEL_LOG,
and each call `call <name> <pid>`, so the tests can tell that this stand-in was the one in use.
"""

import os

LOG = "PATCHKIT_SGL_KERNEL_LOG"


def _record(event):
    path = os.environ.get(LOG)
    if path:
        with open(path, "a", encoding="utf-8") as log:  # one short line: appended whole
            log.write("%s %d\n" % (event, os.getpid()))


class KernelCalled(RuntimeError):
    """A CPU kernel was called: the server test took a path this stand-in cannot serve."""


def _kernel(name):
    def kernel(*args, **kwargs):
        _record("call %s" % name)
        raise KernelCalled("sgl_kernel.%s was called: the stand-in has no kernels (tests/server)" % name)

    kernel.__name__ = kernel.__qualname__ = name
    return kernel


def __getattr__(name):
    if name.endswith("_cpu"):
        return _kernel(name)
    raise AttributeError("module 'sgl_kernel' (the test stand-in) has no attribute %r" % name)


_record("import")
