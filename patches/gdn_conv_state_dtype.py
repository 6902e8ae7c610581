"""gdn-conv-state-dtype: the GDN prefill's mamba-track write casts the tracked conv window to the
conv-state cache's dtype, so an fp16 launch of a Gated-DeltaNet hybrid (Qwen3.5/3.6, Qwen3-Next)
no longer dies at its first tracked prefill.

The conv-state cache has a dtype of its own: bfloat16 unless SGLANG_MAMBA_CONV_DTYPE says
otherwise (`mamba2_state_dtype` in configs/mamba_utils.py), whatever `--dtype` is. When the
radix cache tracks mamba state (the extra_buffer strategies), `GDNAttnBackend.forward_extend`
copies the last conv window of the prefill's activations into the cache with an indexed write
(`conv_states[forward_metadata.conv_states_mask_indices] = mixed_qkv_to_track`, line 1066 on
0.5.23; `conv_states[conv_dst[mask_indices]] = ...` on 0.5.10), and index_put refuses a source of
another dtype: `RuntimeError: Index put requires the source and destination dtypes match, got
BFloat16 for the destination and Half for the source` (sglang#31719), with the launch's fp16
activations; the same with a float32 cache under `--dtype bfloat16`. Patched, the window is cast
to the cache's dtype right before the write (only where the dtypes differ; the write itself is
the release's).

Where it is not applicable: releases whose prefill convolution itself cannot take a cache of
another dtype, so the cast would only move the crash to the next line. The Triton prefill kernel
(`_causal_conv1d_fwd_kernel` in causal_conv1d_triton.py, under layers/attention/mamba/ to 0.5.15
and kernels/ops/mamba/ from 0.5.16; what the GDN prefill runs, its input being a transposed
view) loads the cached window as the cache's dtype in one branch and makes zeros of the input's
in the other, which Triton refuses to compile ("Mismatched type for col0") until the loads are
cast to the input's dtype (from 0.5.20). That rule is read from the kernel (`CONSULTS`,
`precondition`), never from a version list; on 0.5.10-0.5.19 an fp16 launch needs
SGLANG_MAMBA_CONV_DTYPE=float16.

Runtime switch: `SGLANG_PATCHKIT_DISABLE=gdn-conv-state-dtype` leaves the write as the release
has it, read at the write (each tracked prefill, per GDN layer) and only where the dtypes differ.
"""

from __future__ import annotations

import ast
from collections.abc import Callable

import libcst as cst
import libcst.matchers as m

from patchkit.anchor import Anchor
from patchkit.edits import edit
from patchkit.errors import AnchorError
from patchkit.patch import Patch
from patchkit.runtime_switch import declared, on
from patchkit.template import Snippet, walk_statements

ID = "gdn-conv-state-dtype"
GDN_BACKEND = "sglang/srt/layers/attention/linear/gdn_backend.py"
FORWARD = "forward_extend"
# The Triton prefill convolution the GDN prefill runs, per release layout (first found wins).
CONV_KERNELS = (
    "sglang/kernels/ops/mamba/causal_conv1d_triton.py",  # 0.5.16+
    "sglang/srt/layers/attention/mamba/causal_conv1d_triton.py",  # <= 0.5.15
)
CONV_KERNEL = "_causal_conv1d_fwd_kernel"

CAST = Snippet('''
    if (
        {source}.dtype != {cache}.dtype
        and {on}
    ):
        # patchkit gdn-conv-state-dtype: the conv-state cache keeps its own dtype (bfloat16 unless
        # SGLANG_MAMBA_CONV_DTYPE), and index_put refuses a source of another one (sglang#31719).
        {source} = {source}.to({cache}.dtype)
''', on=on(ID))

BACKEND_CLASS = Anchor("GDNAttnBackend", parts=(FORWARD,), marks=(CAST,), watch=(FORWARD,))

_FORWARD_FN = m.FunctionDef(name=m.Name(FORWARD))
_TRACK_FLAG = m.Attribute(attr=m.Name("has_mamba_track_mask") | m.Name("mamba_track_mask"))
# The branch taken when the radix cache tracks mamba state: `if forward_metadata.has_mamba_track_mask:`
# (0.5.11+), `if forward_batch.mamba_track_mask is not None and ....any():` (0.5.10).
_TRACK_BRANCH = m.If(test=m.MatchIfTrue(lambda test: bool(m.findall(test, _TRACK_FLAG))))
# `conv_states[...] = ...`: a write into the conv-state cache; `conv_states[...] = <name>`, the
# tracked window as the releases write it.
_CACHE_TARGET = [m.AssignTarget(target=m.Subscript(value=m.Name("conv_states")))]
_CACHE_WRITE = m.SimpleStatementLine(body=[m.Assign(targets=_CACHE_TARGET)])
_TRACK_WRITE = m.SimpleStatementLine(body=[m.Assign(targets=_CACHE_TARGET, value=m.Name())])
# A cast to the cache's dtype, upstream's fix by its shape: `<x>.to(conv_states.dtype)`,
# `<x>.to(dtype=conv_states.dtype)`, `<x>.type_as(conv_states)`.
_CACHE = m.Name("conv_states")
_CAST_CALL = m.Call(
    func=m.Attribute(attr=m.Name("to")),
    args=[m.ZeroOrMore(), m.Arg(value=m.Attribute(value=_CACHE, attr=m.Name("dtype"))), m.ZeroOrMore()],
) | m.Call(func=m.Attribute(attr=m.Name("type_as")), args=[m.Arg(value=_CACHE)])


def _track_branches(tree: cst.Module) -> list[cst.If]:
    return [stmt for cls in BACKEND_CLASS.find(tree) for fn in cls.body.body if m.matches(fn, _FORWARD_FN)
            for stmt in walk_statements(fn) if isinstance(stmt, cst.If) and m.matches(stmt, _TRACK_BRANCH)]


def _casts_before_write(branch: cst.If) -> bool:
    """Every write into the cache in the branch writes a cast to the cache's dtype: the value is a
    cast, or a name bound to a cast earlier in the branch (not by this patch)."""
    ours = {id(node) for cast in CAST.find(branch.body) for node in [cast, *walk_statements(cast)]}
    cast_names = {
        target.target.value
        for stmt in walk_statements(branch.body) if id(stmt) not in ours and isinstance(stmt, cst.SimpleStatementLine)
        for small in stmt.body if isinstance(small, cst.Assign) and m.findall(small.value, _CAST_CALL)
        for target in small.targets if isinstance(target.target, cst.Name)
    }
    values = [stmt.body[0].value for stmt in branch.body.body
              if m.matches(stmt, _CACHE_WRITE) and isinstance(stmt, cst.SimpleStatementLine)
              and isinstance(stmt.body[0], cst.Assign)]
    return bool(values) and all(
        m.matches(value, _CAST_CALL) or (isinstance(value, cst.Name) and value.value in cast_names) for value in values
    )


def _casts_cached_window(kernel: ast.FunctionDef) -> bool:
    """The kernel's loads of the cached window (`colN = tl.load(...)`) are cast (`.to(...)`)."""
    return any(
        isinstance(node, ast.Assign) and isinstance(node.value, ast.Call)
        and isinstance(node.value.func, ast.Attribute) and node.value.func.attr == "to"
        and isinstance(node.value.func.value, ast.Call) and isinstance(node.value.func.value.func, ast.Attribute)
        and node.value.func.value.func.attr == "load"
        and any(isinstance(target, ast.Name) and target.id.startswith("col") for target in node.targets)
        for node in ast.walk(kernel)
    )


class GdnConvStateDtype(Patch):
    ID = ID
    TITLE = "An fp16 GDN hybrid's tracked prefill casts the conv window to the conv-state cache's dtype"
    RATIONALE = (
        "The conv-state cache is bfloat16 unless SGLANG_MAMBA_CONV_DTYPE says otherwise, whatever --dtype is. "
        "With mamba state tracking (the extra_buffer radix strategies), GDNAttnBackend.forward_extend index_puts "
        "the prefill's conv window into it, and an fp16 launch of Qwen3.5/3.6 dies at its first tracked prefill: "
        "'Index put requires the source and destination dtypes match'. The window is now cast to the cache's "
        "dtype before the write (a no-op when they match). Only where the release's prefill convolution takes "
        "a cache of another dtype (0.5.20+); below, SGLANG_MAMBA_CONV_DTYPE=float16."
    )
    UPSTREAM = (
        "sgl-project/sglang#31719 (open): fp16 hybrid-GDN serving crashes at the first prefill with the index_put "
        "dtype mismatch; its workaround SGLANG_MAMBA_CONV_DTYPE=float16",
        "sgl-project/sglang#19785, #20217 (closed unmerged): the conv cache's dtype derived from the serving dtype",
        "sgl-project/sglang#20924 (closed unmerged; its text not verified)",
        "sgl-project/sglang#36289 (open, 2026-08-25): the same cast at the tracked write",
        "sgl-project/sglang#38039 (merged, in 0.5.20+): the Triton prefill convolution casts the cached window "
        "to the input's dtype, so a cache of another dtype works there",
    )
    DROP_WHEN = ("drop when forward_extend casts the tracked window to the cache's dtype, or the conv-state "
                 "cache takes the serving dtype by default")
    APPLIES_TO = ">=0.5.20"
    STACK_AFTER = ("gdn-cutedsl-decode-sm90",)
    TARGETS = (GDN_BACKEND,)
    CONSULTS = CONV_KERNELS
    ANCHORS = {GDN_BACKEND: (BACKEND_CLASS,)}
    RUNTIME_SWITCH = declared(ID)

    def precondition(self, read: Callable[[str], bytes | None]) -> str | None:
        for rel in CONV_KERNELS:
            data = read(rel)
            kernels = [] if data is None else [node for node in ast.parse(data).body
                                               if isinstance(node, ast.FunctionDef) and node.name == CONV_KERNEL]
            if kernels:
                return None if all(_casts_cached_window(kernel) for kernel in kernels) else (
                    f"the release's prefill convolution cannot take a conv-state cache of another dtype either "
                    f"({rel}: {CONV_KERNEL} loads the cached window uncast), so a cast at the write would only move "
                    f"the crash; SGLANG_MAMBA_CONV_DTYPE=float16 is the way there"
                )
        raise AnchorError(f"anchor not found: the Triton prefill convolution {CONV_KERNEL}() ({' or '.join(CONV_KERNELS)})")

    def is_fixed_upstream(self, path: str, tree: cst.Module) -> bool:
        branches = [branch for branch in _track_branches(tree)
                    if any(m.matches(stmt, _CACHE_WRITE) for stmt in branch.body.body)]
        return bool(branches) and all(_casts_before_write(branch) for branch in branches)

    @m.call_if_inside(BACKEND_CLASS.matcher)
    @m.call_if_inside(_FORWARD_FN)
    @m.call_if_inside(_TRACK_BRANCH)
    @edit(_TRACK_WRITE, f"{BACKEND_CLASS.member(FORWARD)}: the mamba-track write conv_states[...] = <window>",
          times="at least once")
    def cast_window(
        self, original_node: cst.SimpleStatementLine, updated_node: cst.SimpleStatementLine
    ) -> cst.FlattenSentinel[cst.BaseStatement]:
        write = original_node.body[0]
        assert isinstance(write, cst.Assign) and isinstance(write.value, cst.Name)
        target = write.targets[0].target
        assert isinstance(target, cst.Subscript)
        first, *rest = CAST.fill(source=write.value.value, cache=target.value)
        return cst.FlattenSentinel([
            first.with_changes(leading_lines=updated_node.leading_lines), *rest, updated_node.with_changes(leading_lines=[]),
        ])
