"""fp8-kv-triton-sm89: refuse `--kv-cache-dtype fp8_e4m3` with the Triton backend below SM 8.9.

The Triton decode kernel casts q to the KV buffer's dtype; Triton has no `fp8e4nv` below compute
capability 8.9 (Ampere), so the first decode dies deep inside Triton (`fp8e4nv not supported`).
`TritonAttnBackend.__init__` now refuses that combination at start-up with a message naming both
remedies. The check is a module-level function called right after `super().__init__()`; it only
looks at CUDA devices (on ROCm the e4m3 KV dtype is `float8_e4m3fnuz`, and HIP is excluded), so
nothing changes for any other backend, dtype or GPU.

Runtime switch: `SGLANG_PATCHKIT_DISABLE=fp8-kv-triton-sm89` lets the backend start as the
release does (and die on the first decode), read when TritonAttnBackend is built (start-up),
only where the check would refuse.
"""

from __future__ import annotations

import libcst as cst
import libcst.matchers as m

from patchkit.anchor import Anchor
from patchkit.edits import edit
from patchkit.matchers import string
from patchkit.patch import Patch
from patchkit.runtime_switch import declared, on
from patchkit.template import Snippet, walk_statements

TRITON_BACKEND = "sglang/srt/layers/attention/triton_backend.py"
CHECK_NAME = "_patchkit_refuse_fp8_e4m3_below_sm89"

CHECK = Snippet('''
    def {check}(model_runner):
        """patchkit fp8-kv-triton-sm89: Triton has no fp8e4nv below compute capability 8.9, and the
        decode kernel casts q to the KV cache dtype, so fp8_e4m3 KV would die on the first decode."""
        if (
            getattr(model_runner, "kv_cache_dtype", None) == torch.float8_e4m3fn
            and torch.cuda.is_available()
            and torch.version.hip is None
            and torch.cuda.get_device_capability() < (8, 9)
            and {on}
        ):
            major, minor = torch.cuda.get_device_capability()
            raise ValueError(
                f"--kv-cache-dtype fp8_e4m3 with the Triton attention backend needs compute capability "
                f"8.9 or newer (Ada, Hopper); this GPU is SM{{major}}{{minor}}, where Triton has no fp8e4nv. "
                f"Use --attention-backend flashinfer, or --kv-cache-dtype fp8_e5m2."
            )
''', blank_lines_before=2, check=CHECK_NAME, on=on("fp8-kv-triton-sm89"))
CALL = Snippet(f"{CHECK_NAME}({{model_runner}})  # patchkit fp8-kv-triton-sm89")

_SUPER_INIT = m.SimpleStatementLine(body=[m.Expr(value=m.Call(func=m.Attribute(value=m.Call(func=m.Name("super")), attr=m.Name("__init__"))))])
# Upstream's fix: `__init__` itself tests for the e4m3 KV dtype and raises.
_MENTIONS_E4M3 = m.Attribute(attr=m.Name("float8_e4m3fn")) | string("fp8_e4m3")
_RAISES = m.SimpleStatementLine(body=[m.Raise()])
BACKEND_CLASS = Anchor("TritonAttnBackend", parts=("__init__",), marks=(CALL,), watch=("__init__",))
_INIT_WITH_MODEL_RUNNER = m.FunctionDef(
    name=m.Name("__init__"),
    params=m.MatchIfTrue(lambda params: bool(m.findall(params, m.Param(name=m.Name("model_runner"))))),
)


def _refuses_e4m3(stmt: cst.CSTNode) -> bool:
    return (
        isinstance(stmt, cst.If)
        and bool(m.findall(stmt.test, _MENTIONS_E4M3))
        and any(m.matches(line, _RAISES) for line in walk_statements(stmt))
    )


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
    ANCHORS = {TRITON_BACKEND: (BACKEND_CLASS,)}
    RUNTIME_SWITCH = declared(ID)
    PARTS = {TRITON_BACKEND: (CHECK_NAME,)}
    MARKS = {TRITON_BACKEND: ((None, CHECK),)}

    def is_fixed_upstream(self, path: str, tree: cst.Module) -> bool:
        return any(
            _refuses_e4m3(stmt)
            for cls in BACKEND_CLASS.find(tree) for init in cls.body.body
            if m.matches(init, m.FunctionDef(name=m.Name("__init__"))) for stmt in walk_statements(init)
        )

    @m.call_if_inside(BACKEND_CLASS.matcher)
    @m.call_if_inside(_INIT_WITH_MODEL_RUNNER)
    @edit(_SUPER_INIT, f"{BACKEND_CLASS.name}.__init__(self, model_runner, ...): super().__init__()")
    def call_check(
        self, original_node: cst.SimpleStatementLine, updated_node: cst.SimpleStatementLine
    ) -> cst.FlattenSentinel[cst.BaseStatement]:
        return cst.FlattenSentinel([updated_node, *CALL.fill(model_runner="model_runner")])

    @edit(BACKEND_CLASS.matcher, f"class {BACKEND_CLASS.name}")
    def add_check(self, original_node: cst.ClassDef, updated_node: cst.ClassDef) -> cst.FlattenSentinel[cst.BaseStatement]:
        # The check goes right above the class (whose own leading lines and comments stay with it).
        return cst.FlattenSentinel([*CHECK.fill(), updated_node])
