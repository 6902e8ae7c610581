"""moe-w2-presharded: MoE w2 group scales that the quantisation scheme keeps whole on every rank
(`load_full_w2`) are copied whole, instead of being narrowed to the rank's share of the groups
(silently, from 0.5.17).

compressed-tensors WNA16 with act-order marks its w2 scales `load_full_w2`
(compressed_tensors_wNa16_moe.py:141-149, :179 on 0.5.23): every rank keeps every group, because
the act-order kernel looks groups up by `g_idx`, numbers across the whole intermediate dimension. `FusedMoE._weight_loader_impl` passes
only the tensor (`param.data[expert_id]`) on to `_load_w2`, which narrows every w2 to the rank's
share: from 0.5.17 the narrow is sized from the checkpoint (`loaded_weight.shape[shard_dim] //
self.moe_tp_size`) and the copy goes into the buffer's leading rows, so a full-size buffer keeps
the rank's groups first and the rest unset (ones, or zeros on 0.5.23), and the server starts
(what the kernel then computes was not checked on a GPU). Patched, the group-scale branch copies such a scale whole, where the parameter
says `load_full_w2` and the checkpoint tensor has the buffer's shape; every other load is the
release's: GPTQ without desc_act (w2 scales as large, not marked), GPTQ with desc_act (marked, but
allocated for the rank's groups only, gptq_moe.py:197-198, so the shapes differ).

Not applicable where `_load_w2` narrows by the buffer's size (to 0.5.16): there the same load fails
loudly at rank >= 1 ("start ... exceeds dimension size"). Read from the method's shape (`check`).

Why not the shape guard in `_load_w2` the field keeps ("the loaded w2's shard dimension is the
rank's shard size: copy it whole", sglang#22476): GPTQ-Marlin without desc_act allocates its w2
scales for every group too (gptq/schemes/gptq_moe.py:197-200 on 0.5.23) and reaches `_load_w2` with
the same shapes, not marked `load_full_w2` (:252); there the release loads the rank's own groups
first, and the guard would give rank 1 rank 0's groups. `use_presharded_weights`, the layer's way to
skip the narrow, is set only by Grok (models/grok.py) and Quark's int4-fp8 MoE, never for
compressed-tensors, whose checkpoints every rank reads whole. Not covered: the zero points of an
asymmetric act-order checkpoint (allocated for every group, not marked), not checked.

Runtime switch: `SGLANG_PATCHKIT_DISABLE=moe-w2-presharded` takes the release's narrow again, read
at each such scale's load (start-up).
"""

from __future__ import annotations

import libcst as cst
import libcst.matchers as m

from patchkit.anchor import Anchor
from patchkit.edits import edit
from patchkit.patch import Patch, SkipPatch
from patchkit.runtime_switch import declared, on
from patchkit.template import Snippet, walk_statements

ID = "moe-w2-presharded"
MOE_LAYER = "sglang/srt/layers/moe/fused_moe_triton/layer.py"
LOAD_W2 = "_load_w2"
LOADER = "_weight_loader_impl"
GROUP_LOAD = "_load_model_weight_or_group_weight_scale"

COPY_WHOLE = Snippet('''
    if (
        shard_id == "w2"
        and getattr(param, "load_full_w2", False)
        and not self.use_triton_kernels
        and loaded_weight.shape == expert_data.shape
        and {on}
    ):
        # patchkit moe-w2-presharded: the scheme keeps every group of the w2 scales on each rank
        # (load_full_w2); _load_w2 would narrow them to this rank's share (silently from 0.5.17).
        expert_data.copy_(loaded_weight)
        return
''', on=on(ID))

MOE_CLASS = Anchor("FusedMoE", parts=(LOADER, LOAD_W2), marks=(COPY_WHOLE,), watch=(LOADER, LOAD_W2))

_LOADER_FN = m.FunctionDef(name=m.Name(LOADER))
_LOAD_W2_FN = m.FunctionDef(name=m.Name(LOAD_W2))
_GROUP = m.Attribute(value=m.Attribute(attr=m.Name("GROUP")), attr=m.Name("value"))
# The group/block-scale branch: `elif quant_method in [...GROUP.value, ...BLOCK.value]:`.
_GROUP_BRANCH = m.If(test=m.Comparison(
    left=m.Name("quant_method"),
    comparisons=[m.ComparisonTarget(operator=m.In(), comparator=m.List(elements=[m.Element(_GROUP), m.ZeroOrMore()]))],
))
# Its load: `self._load_model_weight_or_group_weight_scale(...)`.
_GROUP_LOAD = m.SimpleStatementLine(body=[m.Expr(value=m.Call(
    func=m.Attribute(value=m.Name("self"), attr=m.Name(GROUP_LOAD))))])
# The silent path's size, from the checkpoint (0.5.17+):
# `loaded_shard_size = loaded_weight.shape[shard_dim] // self.moe_tp_size`.
_LOADED_DIM = m.Subscript(value=m.Attribute(value=m.Name("loaded_weight"), attr=m.Name("shape")),
                          slice=[m.SubscriptElement(slice=m.Index(value=m.Name("shard_dim")))])
_LOADED_SIZE = m.SimpleStatementLine(body=[m.Assign(value=m.BinaryOperation(
    left=_LOADED_DIM, operator=m.FloorDivide(), right=m.Attribute(attr=m.Name("moe_tp_size"))))])
# Upstream's fix, by its shape (sglang#29178): `load_full_w2` read from the parameter anywhere in the
# loader (a `getattr(param, "load_full_w2", ...)` or `param.load_full_w2`) or taken by `_load_w2`.
_FLAG_NAME = m.SimpleString(value=m.MatchIfTrue(lambda value: value.strip("'\"") == "load_full_w2"))
_READS_FLAG = m.Call(func=m.Name("getattr"), args=[m.Arg(m.Name("param")), m.Arg(_FLAG_NAME), m.ZeroOrMore()]) \
    | m.Attribute(value=m.Name("param"), attr=m.Name("load_full_w2"))


def _methods(tree: cst.Module, matcher: m.FunctionDef) -> list[cst.FunctionDef]:
    return [fn for cls in MOE_CLASS.find(tree) for fn in cls.body.body
            if isinstance(fn, cst.FunctionDef) and m.matches(fn, matcher)]


class MoeW2Presharded(Patch):
    ID = ID
    TITLE = "MoE w2 group scales kept whole on every rank (load_full_w2) are copied whole, not narrowed"
    RATIONALE = (
        "compressed-tensors WNA16 with act-order marks its w2 scales load_full_w2 (every rank keeps every group), "
        "but FusedMoE._weight_loader_impl passes only the tensor to _load_w2, which narrows it to the rank's share, "
        "silently from 0.5.17: at TP 2, rank 1 loads half of its act-order scales (its own groups first, the rest "
        "unset) and the server starts (what the kernel then computes was not checked on a GPU). "
        "Such a scale is now copied whole where the checkpoint tensor has the buffer's shape."
    )
    UPSTREAM = (
        "sgl-project/sglang#29178 (closed unmerged): honour load_full_w2 in _load_w2 (Kimi-K2.6 at TP 8, the loud "
        "crash before 0.5.17)",
        "sgl-project/sglang#22476 (closed unmerged): a shape guard in _load_w2, which would also copy GPTQ's "
        "non-desc_act w2 scales whole",
    )
    DROP_WHEN = "drop when FusedMoE's loader reads the parameter's load_full_w2 (sglang#29178's shape)"
    APPLIES_TO = ">=0.5.17"
    TARGETS = (MOE_LAYER,)
    ANCHORS = {MOE_LAYER: (MOE_CLASS,)}
    RUNTIME_SWITCH = declared(ID)

    def check(self, path: str, tree: cst.Module) -> None:
        super().check(path, tree)
        found = _methods(tree, _LOAD_W2_FN)
        if found and not any(m.matches(stmt, _LOADED_SIZE) for fn in found for stmt in walk_statements(fn)):
            raise SkipPatch(
                f"{path}: {MOE_CLASS.member(LOAD_W2)} narrows by the buffer's shard size, so a full-size w2 scale "
                f"fails loudly in narrow() at rank >= 1 instead of loading the rank's share silently"
            )

    def is_fixed_upstream(self, path: str, tree: cst.Module) -> bool:
        ours = {id(node) for fn in _methods(tree, _LOADER_FN) for stmt in COPY_WHOLE.find(fn)
                for node in m.findall(stmt, _READS_FLAG)}
        return any(id(node) not in ours
                   for fn in [*_methods(tree, _LOADER_FN), *_methods(tree, _LOAD_W2_FN)]
                   for node in m.findall(fn, _READS_FLAG))

    @m.call_if_inside(MOE_CLASS.matcher)
    @m.call_if_inside(_LOADER_FN)
    @m.call_if_inside(_GROUP_BRANCH)
    @edit(_GROUP_LOAD, f"{MOE_CLASS.member(LOADER)}: the group-scale load self.{GROUP_LOAD}(...)")
    def copy_full_scales(
        self, original_node: cst.SimpleStatementLine, updated_node: cst.SimpleStatementLine
    ) -> cst.FlattenSentinel[cst.BaseStatement]:
        first, *rest = COPY_WHOLE.fill()
        return cst.FlattenSentinel([
            first.with_changes(leading_lines=updated_node.leading_lines), *rest, updated_node.with_changes(leading_lines=[]),
        ])
