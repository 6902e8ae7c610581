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

Runtime switch: `SGLANG_PATCHKIT_DISABLE=cpu-offload-tied-params` keeps the release's own
comprehension (beside the call, not a copy), read in the hook at each forward.

Releases: the hook and RadixLinearAttention's re-registration are the same from 0.5.10 to 0.5.20
(the issue names 0.5.14-0.5.20; the code of 0.5.10-0.5.13 has the same defect, so the probes say
`applies` there too).
"""

from __future__ import annotations

import libcst as cst
import libcst.matchers as m

from patchkit.anchor import Anchor
from patchkit.edits import edit
from patchkit.launch_trigger import Trigger
from patchkit.patch import Patch
from patchkit.runtime_switch import declared, on
from patchkit.template import Snippet, walk_statements

ID = "cpu-offload-tied-params"
OFFLOADER = "sglang/srt/utils/offloader.py"
HELPER_NAME = "_patchkit_device_state"

HELPER = Snippet('''
    def {helper}(module, device):
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
''', blank_lines_before=2, helper=HELPER_NAME)
# The release's own comprehension stays, taken when SGLANG_PATCHKIT_DISABLE lists the patch
# (read at each forward of an offloaded module: microseconds beside moving its weights).
CALL = Snippet(f"""
{{state}} = (
    {HELPER_NAME}({{module}}, {{device}})
    if {{on}}
    else {{release}}
)
""", on=on(ID))

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

# Upstream's fix (0.5.21, `_get_offloaded_device_state`): a module-level function that walks
# `state_dict(keep_vars=True)` and keys the moved tensors by `id(...)`, called by the hook.
_WALKS_KEEP_VARS = m.For(iter=m.Call(
    func=m.Attribute(
        value=m.Call(func=m.Attribute(attr=m.Name("state_dict")), args=[m.Arg(keyword=m.Name("keep_vars"), value=m.Name("True"))]),
        attr=m.Name("items"),
    ),
    args=[],
))
_CALLS_ID = m.Call(func=m.Name("id"))
# The upstream probe reads the whole class.
OFFLOADER_CLASS = Anchor("OffloaderV1", marks=(CALL,), watch=("maybe_offload_to_cpu",))


def _dedup_helpers(tree: cst.Module) -> set[str]:
    """Names of the top-level functions, other than ours, shaped like upstream's helper."""
    return {
        fn.name.value for fn in tree.body
        if isinstance(fn, cst.FunctionDef) and fn.name.value != HELPER_NAME
        and any(m.matches(loop, _WALKS_KEEP_VARS) and m.findall(loop, _CALLS_ID) for loop in walk_statements(fn))
    }


class CpuOffloadTiedParams(Patch):
    ID = ID
    TITLE = "--cpu-offload-gb: the offload forward hook keeps tied parameters tied"
    RATIONALE = (
        "With --cpu-offload-gb, OffloaderV1's forward hook builds functional_call's state from "
        "{k: v.to(device) for k, v in module.state_dict().items()}; the dt_bias/A_log that "
        "RadixLinearAttention re-registers on Gated-DeltaNet layers (Qwen3.5/3.8, Qwen3-Next) are "
        "tied, arrive twice as different tensors, and the first forward dies with 'functional_call got "
        "multiple values for keys [...], which are tied'. Each distinct tensor is now moved once and "
        "shared by its names (as 0.5.21 does)."
    )
    UPSTREAM = ("sglang 0.5.21: OffloaderV1's hook builds its state with offloader._get_offloaded_device_state "
                "(state_dict(keep_vars=True), one move per distinct tensor): this patch's helper, no narrower (0.5.21 "
                "also keeps weights cached as plain attributes resident); the pull request that carried it is not named "
                "in the release",
                "sgl-project/sglang#36509 (open: tie_weights=False in both functional_call sites, the same defect)")
    DROP_WHEN = "drop for releases >= 0.5.21 (the offloader moves each distinct tensor once)"
    APPLIES_TO = ">=0.5.10,<0.5.21"
    LAUNCH = Trigger(
        level="error", model=("hybrid-gdn",), flags=("cpu_offload_gb>0",),
        why="--cpu-offload-gb's forward hook passes the tied dt_bias/A_log of every Gated DeltaNet layer "
            "twice: functional_call raises on the first forward")
    TARGETS = (OFFLOADER,)
    ANCHORS = {OFFLOADER: (OFFLOADER_CLASS,)}
    RUNTIME_SWITCH = declared(ID)
    # Upstream's helper, whatever its name, walks state_dict(keep_vars=True).
    PARTS = {OFFLOADER: (HELPER_NAME, ":keep_vars")}
    MARKS = {OFFLOADER: ((None, HELPER),)}
    WATCH = ("_get_offloaded_device_state",)

    def is_fixed_upstream(self, path: str, tree: cst.Module) -> bool:
        helpers = _dedup_helpers(tree)
        if not helpers:
            return False
        # The hook builds its state by calling that helper.
        calls_helper = m.SimpleStatementLine(body=[m.Assign(value=m.Call(func=m.Name(m.MatchIfTrue(lambda name: name in helpers))))])
        return any(m.matches(stmt, calls_helper) for cls in OFFLOADER_CLASS.find(tree) for stmt in walk_statements(cls))

    @m.call_if_inside(OFFLOADER_CLASS.matcher)
    @edit(_BUILDS_STATE, f"{OFFLOADER_CLASS.name}: device_state = {{k: v.to(device) for k, v in module.state_dict().items()}}")
    def call_helper(self, original_node: cst.SimpleStatementLine, updated_node: cst.SimpleStatementLine) -> cst.BaseStatement:
        assign = updated_node.body[0]
        assert isinstance(assign, cst.Assign)
        found = m.extract(assign.value, _COMPREHENSION)
        assert found is not None
        module, device = found["module"], found["device"]
        assert isinstance(module, cst.BaseExpression) and isinstance(device, cst.BaseExpression)
        (line,) = CALL.fill(state=assign.targets[0].target, module=module, device=device, release=assign.value)
        return line.with_changes(leading_lines=updated_node.leading_lines)

    @edit(OFFLOADER_CLASS.matcher, f"class {OFFLOADER_CLASS.name}")
    def add_helper(self, original_node: cst.ClassDef, updated_node: cst.ClassDef) -> cst.FlattenSentinel[cst.BaseStatement]:
        # The helper goes right above the class (whose own leading lines and comments stay with it).
        return cst.FlattenSentinel([*HELPER.fill(), updated_node])
