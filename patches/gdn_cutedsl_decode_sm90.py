"""gdn-cutedsl-decode-sm90: below SM90, `--linear-attn-decode-backend cutedsl` falls back to Triton.

The CuTe-DSL GDN decode kernel needs SM90+ (its own docstring says so); on an RTX 3090/4090
(SM86/SM89) `GDNKernelDispatcher.__init__` picks it anyway and decode hangs.

Decision: fall back to the Triton decode kernel with one warning naming the flag, instead of
raising. It mirrors what the dispatcher's own prefill branch does for the same flag below SM10x
(a fallback with a log line), so `cutedsl` stays a flag people can set uniformly across a mixed
fleet; both kernels compute the same thing, only speed differs, and a performance flag should
not turn into a hang or a refusal to start.

How: right before the dispatcher's `if decode_backend.is_triton(): ... elif ...` chain, a CUDA
GPU below SM90 turns a `cutedsl` decode backend into `triton`, so the chain (and everything after
it that looks at `decode_backend`) takes the Triton path, and the CuTe-DSL module is never
imported on those GPUs. Off CUDA the chain's own "requires CUDA" error is kept.

Runtime switch: `SGLANG_PATCHKIT_DISABLE=gdn-cutedsl-decode-sm90` keeps the cutedsl decode
backend below SM90 as the release does, read when the dispatcher is built (once per model,
at start-up) and only where the fallback would act (a cutedsl backend on a GPU below SM90).
"""

from __future__ import annotations

import re

import libcst as cst
import libcst.matchers as m

from patchkit.anchor import Anchor
from patchkit.edits import edit
from patchkit.errors import AnchorError
from patchkit.patch import Patch
from patchkit.runtime_switch import declared, on
from patchkit.template import Snippet, walk_statements

GDN_BACKEND = "sglang/srt/layers/attention/linear/gdn_backend.py"
FLAG = "--linear-attn-decode-backend cutedsl"

FALLBACK = Snippet('''
    if (
        {decode_backend}.is_cutedsl()
        and is_cuda()
        and torch.cuda.get_device_capability()[0] < 9
        and {on}
    ):
        # patchkit gdn-cutedsl-decode-sm90: the CuTe-DSL decode kernel needs SM90+ (it hangs below).
        import logging

        logging.getLogger(__name__).warning(
            "{flag} needs SM90+ (Hopper or newer); this GPU is SM%d%d. "
            "Falling back to Triton for GDN decode.",
            *torch.cuda.get_device_capability(),
        )
        {decode_backend} = LinearAttnKernelBackend.TRITON
''', flag=FLAG, on=on("gdn-cutedsl-decode-sm90"))

# `:is_cutedsl`: every decode branch the probes look for.
DISPATCHER_CLASS = Anchor("GDNKernelDispatcher", parts=("__init__", ":is_cutedsl"), marks=(FALLBACK,), watch=("__init__",))

# The head of the decode chain: `if decode_backend.is_triton():`, whose first statement picks
# the dispatcher's Triton kernel.
_CHAIN = m.If(
    test=m.Call(func=m.Attribute(value=m.SaveMatchedNode(m.Name(), "backend"), attr=m.Name("is_triton")), args=[]),
    body=m.IndentedBlock(body=[
        m.SimpleStatementLine(body=[m.Assign(targets=[m.AssignTarget(m.Attribute(value=m.Name("self"), attr=m.Name("decode_kernel")))])]),
        m.ZeroOrMore(),
    ]),
)
# `elif decode_backend.is_cutedsl():` (an If node in the chain's orelse).
_CUTEDSL_DECODE = m.If(test=m.Call(func=m.Attribute(value=m.Name("decode_backend"), attr=m.Name("is_cutedsl")), args=[]))
# Upstream's fix, whatever it looks like, gates the cutedsl decode branch on the GPU generation:
# a call whose name speaks of the capability or an SM generation (get_device_capability,
# is_sm90_supported, _is_hopper, ...).
_GENERATION_NAME = re.compile(r"capability|^_?is_sm\d|hopper", re.IGNORECASE)
_GENERATION = m.Name(m.MatchIfTrue(lambda name: bool(_GENERATION_NAME.search(name))))
_GENERATION_CALL = m.Call(func=_GENERATION | m.Attribute(attr=_GENERATION))


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
    DROP_WHEN = "drop when GDNKernelDispatcher checks the GPU generation for its cutedsl decode kernel"
    APPLIES_TO = ">=0.5.10"
    TARGETS = (GDN_BACKEND,)
    ANCHORS = {GDN_BACKEND: (DISPATCHER_CLASS,)}
    RUNTIME_SWITCH = declared(ID)

    def is_fixed_upstream(self, path: str, tree: cst.Module) -> bool:
        return any(
            m.matches(branch, _CUTEDSL_DECODE) and any(
                isinstance(gate, cst.If) and m.findall(gate.test, _GENERATION_CALL) for gate in walk_statements(branch)
            )
            for cls in DISPATCHER_CLASS.find(tree) for branch in walk_statements(cls)
        )

    @m.call_if_inside(DISPATCHER_CLASS.matcher)
    @m.call_if_inside(m.FunctionDef(name=m.Name("__init__")))
    @edit(_CHAIN, f"{DISPATCHER_CLASS.name}.__init__: if decode_backend.is_triton(): self.decode_kernel = ...")
    def gate(self, original_node: cst.If, updated_node: cst.If) -> cst.FlattenSentinel[cst.BaseStatement]:
        found = m.extract(original_node, _CHAIN)
        assert found is not None and isinstance(found["backend"], cst.Name)
        if not m.findall(updated_node, _CUTEDSL_DECODE):
            raise AnchorError(f"{DISPATCHER_CLASS.name}.__init__: the decode chain has no `elif decode_backend.is_cutedsl():`")
        first, *rest = FALLBACK.fill(decode_backend=found["backend"])
        return cst.FlattenSentinel([
            first.with_changes(leading_lines=updated_node.leading_lines), *rest, updated_node.with_changes(leading_lines=[]),
        ])
