"""cpu-offload-tied-params: the `--cpu-offload-gb` forward hook moves each distinct tensor once.

`OffloaderV1.maybe_offload_to_cpu()` wraps a module's forward in a hook that calls
`functional_call(module, {k: v.to(device) for k, v in module.state_dict().items()})`.
`state_dict()` returns a fresh tensor per name, so a tensor registered under two names (the
`dt_bias`/`A_log` that `RadixLinearAttention` re-registers on every Gated-DeltaNet layer) reaches
`functional_call` as two different values for tied keys: `ValueError: functional_call got
multiple values for keys [...], which are tied` on the first forward.

The patch does what 0.5.21 does: a module-level helper walks `state_dict(keep_vars=True)`,
moves each distinct tensor once and reuses the moved tensor for every name it has; the hook's
comprehension is replaced by a call to it. Nothing else in the hook changes.
"""

from __future__ import annotations

import libcst as cst
import libcst.matchers as m

from patchkit.matchers import classes, exactly_one, find_class, parse_statements, replace_member, replace_statement, statements
from patchkit.patch import Patch, SkipPatch

OFFLOADER = "sglang/srt/utils/offloader.py"
CLASS = "OffloaderV1"
HELPER = "_patchkit_device_state"

_HELPER_SOURCE = f'''def {HELPER}(module, device):
    """patchkit cpu-offload-tied-params: the state for functional_call with each distinct
    tensor moved once and shared by all its names, so tied parameters (the dt_bias / A_log
    that RadixLinearAttention re-registers) stay tied instead of arriving as two values."""
    moved = {{}}
    device_state = {{}}
    for name, value in module.state_dict(keep_vars=True).items():
        if id(value) not in moved:
            moved[id(value)] = value.detach().to(device, non_blocking=True)
        device_state[name] = moved[id(value)]
    return device_state
'''


def _state_dict_items(keep_vars: m.BaseMatcherNode) -> m.Call:
    """`<module>.state_dict(...).items()`."""
    return m.Call(
        func=m.Attribute(value=m.Call(func=m.Attribute(attr=m.Name("state_dict")), args=keep_vars), attr=m.Name("items")),
        args=[],
    )


# `device_state = {k: v.to(device, ...) for k, v in module.state_dict().items()}` (the bug).
_COMPREHENSION = m.DictComp(
    value=m.Call(func=m.Attribute(attr=m.Name("to")), args=[m.Arg(m.SaveMatchedNode(m.DoNotCare(), "device")), m.ZeroOrMore()]),
    for_in=m.CompFor(
        iter=m.Call(
            func=m.Attribute(
                value=m.Call(func=m.Attribute(value=m.SaveMatchedNode(m.DoNotCare(), "module"), attr=m.Name("state_dict")), args=[]),
                attr=m.Name("items"),
            ),
            args=[],
        ),
        inner_for_in=None,
        ifs=[],
    ),
)
_BUILDS_STATE = m.SimpleStatementLine(body=[m.Assign(targets=[m.AssignTarget(m.Name())], value=_COMPREHENSION)])
_CALLS_HELPER = m.SimpleStatementLine(body=[m.Assign(value=m.Call(func=m.Name(HELPER)))])

# Upstream's fix (0.5.21, `_get_offloaded_device_state`): a function that walks
# `state_dict(keep_vars=True)` and keys the moved tensors by `id(...)`.
_KEEP_VARS = [m.Arg(keyword=m.Name("keep_vars"), value=m.Name("True"))]
_WALKS_KEEP_VARS = m.For(iter=_state_dict_items(_KEEP_VARS))
_CALLS_ID = m.Call(func=m.Name("id"))


def _dedup_helpers(tree: cst.Module) -> list[cst.FunctionDef]:
    """Top-level functions, other than ours, shaped like upstream's helper."""
    return [
        fn for fn in tree.body
        if m.matches(fn, m.FunctionDef(name=m.Name(m.MatchIfTrue(lambda name: name != HELPER))))
        and any(m.findall(loop, _CALLS_ID) for loop in statements(fn, _WALKS_KEEP_VARS))
    ]


class CpuOffloadTiedParams(Patch):
    ID = "cpu-offload-tied-params"
    TITLE = "--cpu-offload-gb: the offload forward hook keeps tied parameters tied"
    RATIONALE = (
        "With --cpu-offload-gb, OffloaderV1's forward hook builds functional_call's state from "
        "{k: v.to(device) for k, v in module.state_dict().items()}; the dt_bias/A_log that "
        "RadixLinearAttention re-registers on Gated-DeltaNet layers (Qwen3.5/3.8, Qwen3-Next) are "
        "tied, arrive twice as different tensors, and the first forward dies with 'functional_call got "
        "multiple values for keys [...], which are tied'. Each distinct tensor is now moved once and "
        "shared by its names (as 0.5.21 does)."
    )
    UPSTREAM = ("sglang 0.5.21: offloader._get_offloaded_device_state (state_dict(keep_vars=True), one move per tensor)",)
    DROP_WHEN = "drop for releases >= 0.5.21 (the offloader moves each distinct tensor once)"
    APPLIES_TO = ">=0.5.10,<0.5.21"
    TARGETS = (OFFLOADER,)
    ANCHOR_SYMBOLS = (CLASS,)
    WATCH = (f"{CLASS}.maybe_offload_to_cpu", "_get_offloaded_device_state")

    def is_applied(self, path: str, tree: cst.Module) -> bool:
        has_helper = any(m.matches(s, m.FunctionDef(name=m.Name(HELPER))) for s in tree.body)
        return has_helper and any(statements(cls, _CALLS_HELPER) for cls in classes(tree, CLASS))

    def is_fixed_upstream(self, path: str, tree: cst.Module) -> bool:
        if self.is_applied(path, tree) or not classes(tree, CLASS):
            return False
        buggy = any(statements(cls, _BUILDS_STATE) for cls in classes(tree, CLASS))
        return not buggy and bool(_dedup_helpers(tree))

    def transform(self, path: str, tree: cst.Module) -> cst.Module:
        if not classes(tree, CLASS):
            raise SkipPatch(f"{path} has no {CLASS}")
        if self.is_applied(path, tree):
            return tree
        cls = find_class(tree, CLASS, path)
        anchor = exactly_one(
            statements(cls, _BUILDS_STATE), f"{CLASS}: device_state = {{k: v.to(device) for k, v in module.state_dict().items()}}", path
        )
        assign = anchor.body[0]  # type: ignore[attr-defined]
        captured = m.extract(assign.value, _COMPREHENSION)
        call = cst.Call(func=cst.Name(HELPER), args=[cst.Arg(captured["module"]), cst.Arg(captured["device"])])  # type: ignore[index]
        new_line = anchor.with_changes(body=[assign.with_changes(value=call)])
        new_cls = replace_statement(cls, anchor, [new_line])
        body = list(replace_member(tree, cls, new_cls).body)
        position = next(i for i, node in enumerate(body) if m.matches(node, m.ClassDef(name=m.Name(CLASS))))
        helper = parse_statements(_HELPER_SOURCE)
        # Right above the class (whose own leading lines and comments stay with it).
        helper[0] = helper[0].with_changes(leading_lines=[cst.EmptyLine(indent=False)] * 2)
        return tree.with_changes(body=[*body[:position], *helper, *body[position:]])

