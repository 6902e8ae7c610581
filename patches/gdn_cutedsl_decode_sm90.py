"""gdn-cutedsl-decode-sm90: below SM90, `--linear-attn-decode-backend cutedsl` falls back to Triton.

The CuTe-DSL GDN decode kernel needs SM90+ (its own docstring says so); on an RTX 3090/4090
(SM86/SM89) `GDNKernelDispatcher.__init__` picks it anyway and decode hangs.

Decision: fall back to the Triton decode kernel with one warning naming the flag, instead of
raising. It mirrors what the dispatcher's own prefill branch does for the same flag below SM10x
(a fallback with a log line), so `cutedsl` stays a flag people can set uniformly across a mixed
fleet; both kernels compute the same thing, only speed differs, and a hang turned into a slower
but working server is what the user asked for with a performance flag. The check runs before
the CuTe-DSL module is imported, so nothing of it is loaded on those GPUs.
"""

from __future__ import annotations

import re

import libcst as cst
import libcst.matchers as m

from patchkit.errors import AnchorError
from patchkit.matchers import classes, exactly_one, find_class, find_method, methods, parse_statements, replace_method, self_attr, statements
from patchkit.patch import Patch, SkipPatch

GDN_BACKEND = "sglang/srt/layers/attention/linear/gdn_backend.py"
CLASS = "GDNKernelDispatcher"
FLAG = "--linear-attn-decode-backend cutedsl"

# `elif decode_backend.is_cutedsl():` (an If node in the chain's orelse).
_CUTEDSL_DECODE = m.If(test=m.Call(func=m.Attribute(value=m.Name("decode_backend"), attr=m.Name("is_cutedsl")), args=[]))
# The fallback reuses the dispatcher's own Triton kernel object.
_TRITON_KERNEL = m.SimpleStatementLine(body=[m.Assign(targets=[m.AssignTarget(m.Name("triton_kernel"))], value=m.Call(func=m.Name("TritonGDNKernel")))])
# A leading `if not is_cuda(): raise ...` guard stays in front of the new check.
_GUARD = m.If(body=m.IndentedBlock(body=[m.SimpleStatementLine(body=[m.Raise()])]))

_FALLBACK_SOURCE = f'''\
if torch.cuda.get_device_capability()[0] < 9:
    # patchkit gdn-cutedsl-decode-sm90: the CuTe-DSL decode kernel needs SM90+ (it hangs below).
    import logging

    logging.getLogger(__name__).warning(
        "{FLAG} needs SM90+ (Hopper or newer); this GPU is SM%d%d. "
        "Falling back to Triton for GDN decode.",
        *torch.cuda.get_device_capability(),
    )
    self.decode_kernel = triton_kernel
else:
    pass
'''

_CAPABILITY = m.Call(func=m.Attribute(value=m.Attribute(value=m.Name("torch"), attr=m.Name("cuda")), attr=m.Name("get_device_capability")))
_OURS = m.If(
    test=m.Comparison(left=m.Subscript(value=_CAPABILITY)),
    body=m.IndentedBlock(body=[
        m.ZeroOrMore(),
        m.SimpleStatementLine(body=[m.Assign(targets=[m.AssignTarget(self_attr("decode_kernel"))], value=m.Name("triton_kernel"))]),
    ]),
)
# Upstream's fix, whatever it looks like, gates the branch on the GPU generation: a call whose
# name speaks of the capability or an SM generation (get_device_capability, is_sm90_supported,
# _is_hopper, ...).
_GENERATION_NAME = re.compile(r"capability|^_?is_sm\d|hopper", re.IGNORECASE)
_GENERATION = m.Name(m.MatchIfTrue(lambda name: bool(_GENERATION_NAME.search(name))))
_GENERATION_CALL = m.Call(func=_GENERATION | m.Attribute(attr=_GENERATION))


def _decode_branches(tree: cst.Module) -> list[cst.If]:
    return [
        branch for cls in classes(tree, CLASS) for init in methods(cls, "__init__") for branch in statements(init, _CUTEDSL_DECODE)
    ]


def _members(branch: cst.If) -> list[cst.BaseStatement]:
    return list(branch.body.body) if isinstance(branch.body, cst.IndentedBlock) else []


class _GateDecode(m.MatcherDecoratableTransformer):
    """Puts the SM90 check in front of the CuTe-DSL decode branch's kernel choice."""

    def __init__(self, path: str) -> None:
        super().__init__()
        self.path = path
        self.gated = 0

    @m.leave(_CUTEDSL_DECODE)
    def gate(self, original_node: cst.If, updated_node: cst.If) -> cst.If:
        body = _members(updated_node)
        guards = 0
        while guards < len(body) and m.matches(body[guards], _GUARD):
            guards += 1
        rest = body[guards:]
        if not rest:
            raise AnchorError(f"{self.path}: anchor not found: {CLASS}.__init__: the CuTe-DSL decode kernel choice")
        check = parse_statements(_FALLBACK_SOURCE)[0]
        check = check.with_changes(orelse=check.orelse.with_changes(body=check.orelse.body.with_changes(body=rest)))  # type: ignore[union-attr]
        self.gated += 1
        return updated_node.with_changes(body=updated_node.body.with_changes(body=[*body[:guards], check]))


class GdnCutedslDecodeSm90(Patch):
    ID = "gdn-cutedsl-decode-sm90"
    TITLE = "--linear-attn-decode-backend cutedsl falls back to Triton below SM90 instead of hanging"
    RATIONALE = (
        "GDNKernelDispatcher.__init__ accepts the CuTe-DSL GDN decode kernel on any CUDA GPU, but the "
        "kernel needs SM90+: on RTX 3090/4090 the log shows it chosen and decode hangs. Below SM90 the "
        "dispatcher now uses the Triton decode kernel and logs one warning naming the flag (as its "
        "prefill branch already does below SM10x)."
    )
    UPSTREAM = ("no upstream fix up to 0.5.23",)
    DROP_WHEN = "drop when GDNKernelDispatcher checks the GPU generation in its cutedsl decode branch"
    APPLIES_TO = ">=0.5.10"
    TARGETS = (GDN_BACKEND,)
    ANCHOR_SYMBOLS = (CLASS,)
    WATCH = (f"{CLASS}.__init__",)

    def is_applied(self, path: str, tree: cst.Module) -> bool:
        return any(statements(branch, _OURS) for branch in _decode_branches(tree))

    def is_fixed_upstream(self, path: str, tree: cst.Module) -> bool:
        for branch in _decode_branches(tree):
            ours = {id(node) for node in statements(branch, _OURS)}
            for gate in statements(branch, m.If()):
                if id(gate) not in ours and m.findall(gate.test, _GENERATION_CALL):
                    return True
        return False

    def transform(self, path: str, tree: cst.Module) -> cst.Module:
        if not classes(tree, CLASS):
            raise SkipPatch(f"{path} has no {CLASS}")
        if self.is_applied(path, tree):
            return tree
        cls = find_class(tree, CLASS, path)
        init = find_method(cls, "__init__", path)
        exactly_one(statements(init, _TRITON_KERNEL), f"{CLASS}.__init__: triton_kernel = TritonGDNKernel()", path)
        gate = _GateDecode(path)
        new_init = init.visit(gate)
        if gate.gated != 1:
            what = "anchor not found" if gate.gated == 0 else f"anchor is ambiguous ({gate.gated} matches)"
            raise AnchorError(f"{path}: {what}: {CLASS}.__init__: elif decode_backend.is_cutedsl():")
        return replace_method(tree, cls, init, new_init)  # type: ignore[arg-type]
