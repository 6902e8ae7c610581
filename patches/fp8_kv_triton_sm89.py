"""fp8-kv-triton-sm89: refuse `--kv-cache-dtype fp8_e4m3` with the Triton backend below SM 8.9.

The Triton decode kernel casts q to the KV buffer's dtype; Triton has no `fp8e4nv` below compute
capability 8.9 (Ampere), so the first decode dies deep inside Triton (`fp8e4nv not supported`).
`TritonAttnBackend.__init__` now refuses that combination at start-up with a message naming both
remedies. The check is a module-level function called right after `super().__init__()`; it only
looks at CUDA devices (on ROCm the e4m3 KV dtype is `float8_e4m3fnuz`, and HIP is excluded), so
nothing changes for any other backend, dtype or GPU.
"""

from __future__ import annotations

import libcst as cst
import libcst.matchers as m

from patchkit.errors import AnchorError
from patchkit.matchers import (
    classes,
    exactly_one,
    find_class,
    find_method,
    insert_after,
    methods,
    parse_statements,
    replace_member,
    statements,
    string,
)
from patchkit.patch import Patch, SkipPatch

TRITON_BACKEND = "sglang/srt/layers/attention/triton_backend.py"
CLASS = "TritonAttnBackend"
CHECK = "_patchkit_refuse_fp8_e4m3_below_sm89"

_CHECK_SOURCE = f'''def {CHECK}(model_runner):
    """patchkit fp8-kv-triton-sm89: Triton has no fp8e4nv below compute capability 8.9, and the
    decode kernel casts q to the KV cache dtype, so fp8_e4m3 KV would die on the first decode."""
    if (
        getattr(model_runner, "kv_cache_dtype", None) == torch.float8_e4m3fn
        and torch.cuda.is_available()
        and torch.version.hip is None
        and torch.cuda.get_device_capability() < (8, 9)
    ):
        major, minor = torch.cuda.get_device_capability()
        raise ValueError(
            f"--kv-cache-dtype fp8_e4m3 with the Triton attention backend needs compute capability "
            f"8.9 or newer (Ada, Hopper); this GPU is SM{{major}}{{minor}}, where Triton has no fp8e4nv. "
            f"Use --attention-backend flashinfer, or --kv-cache-dtype fp8_e5m2."
        )
'''

_SUPER_INIT = m.SimpleStatementLine(body=[m.Expr(value=m.Call(func=m.Attribute(value=m.Call(func=m.Name("super")), attr=m.Name("__init__"))))])
_CALLS_CHECK = m.SimpleStatementLine(body=[m.Expr(value=m.Call(func=m.Name(CHECK)))])
# Upstream's fix: `__init__` itself tests for the e4m3 KV dtype and raises.
_MENTIONS_E4M3 = m.Attribute(attr=m.Name("float8_e4m3fn")) | string("fp8_e4m3")
_REFUSES_E4M3 = m.If(
    test=m.MatchIfTrue(lambda test: bool(m.findall(test, _MENTIONS_E4M3))),
    body=m.MatchIfTrue(lambda body: bool(m.findall(body, m.Raise()))),
)


def _inits(tree: cst.Module) -> list[cst.FunctionDef]:
    return [init for cls in classes(tree, CLASS) for init in methods(cls, "__init__")]


class Fp8KvTritonSm89(Patch):
    ID = "fp8-kv-triton-sm89"
    TITLE = "Refuse --kv-cache-dtype fp8_e4m3 with the Triton backend below SM 8.9, naming the remedies"
    RATIONALE = (
        "With --kv-cache-dtype fp8_e4m3 and the Triton attention backend on GPUs below compute "
        "capability 8.9 (Ampere: A100, RTX 3090), the decode kernel casts q to the KV dtype and Triton "
        "dies with 'fp8e4nv not supported' on the first decode. TritonAttnBackend.__init__ now raises "
        "at start-up, naming --attention-backend flashinfer and --kv-cache-dtype fp8_e5m2."
    )
    UPSTREAM = ("no upstream fix up to 0.5.23",)
    DROP_WHEN = "drop when TritonAttnBackend (or server_args) refuses fp8_e4m3 KV below SM 8.9"
    APPLIES_TO = ">=0.5.10"
    TARGETS = (TRITON_BACKEND,)
    ANCHOR_SYMBOLS = (CLASS,)
    WATCH = (f"{CLASS}.__init__",)

    def is_applied(self, path: str, tree: cst.Module) -> bool:
        has_check = any(m.matches(s, m.FunctionDef(name=m.Name(CHECK))) for s in tree.body)
        return has_check and any(statements(init, _CALLS_CHECK) for init in _inits(tree))

    def is_fixed_upstream(self, path: str, tree: cst.Module) -> bool:
        return any(statements(init, _REFUSES_E4M3) for init in _inits(tree))

    def transform(self, path: str, tree: cst.Module) -> cst.Module:
        if not classes(tree, CLASS):
            raise SkipPatch(f"{path} has no {CLASS}")
        if self.is_applied(path, tree):
            return tree
        cls = find_class(tree, CLASS, path)
        init = find_method(cls, "__init__", path)
        if not m.findall(init.params, m.Param(name=m.Name("model_runner"))):
            raise AnchorError(f"{path}: anchor not found: {CLASS}.__init__(self, model_runner, ...)")
        anchor = exactly_one(statements(init, _SUPER_INIT), f"{CLASS}.__init__: super().__init__()", path)
        call = parse_statements(f"{CHECK}(model_runner)  # patchkit fp8-kv-triton-sm89\n")
        body = list(replace_member(tree, cls, replace_member(cls, init, insert_after(init, anchor, call))).body)
        position = next(i for i, node in enumerate(body) if m.matches(node, m.ClassDef(name=m.Name(CLASS))))
        check = parse_statements(_CHECK_SOURCE)
        # Right above the class (whose own leading lines and comments stay with it).
        check[0] = check[0].with_changes(leading_lines=[cst.EmptyLine(indent=False)] * 2)
        return tree.with_changes(body=[*body[:position], *check, *body[position:]])
