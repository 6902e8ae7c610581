"""mtp-draft-kv-budget: count the built-in MTP draft's KV layers when no draft path is given.

The target worker resolves how many KV layers the EAGLE/NEXTN draft adds (`eagle_draft_num_layers`,
which scales the per-token KV cost when the pool is sized). It derives that count only from a
`--speculative-draft-model-path` config (0.5.14-0.5.19) or from the target's
`num_nextn_predict_layers` (0.5.20+), which Qwen3.5/3.8 do not have: they declare
`text_config.mtp_num_hidden_layers`. Built-in MTP without a draft path so leaves the draft's KV out
of the budget and the pool over-commits by one MTP layer's share (sglang#35566).

Where the count is resolved, right after the release's own resolution, the patch adds: when
speculative decoding (EAGLE/STANDALONE, which NEXTN maps to) is on, this is the target worker, no
draft path is set, the count is still unknown and the target's `mtp_num_hidden_layers` > 0, use
that. The release's own way of reading the draft path is reused (`server_args...` or
`get_spec()...`).

Runtime switch: `SGLANG_PATCHKIT_DISABLE=mtp-draft-kv-budget` leaves the count as the release
resolves it, read where it is resolved (once per model runner, at start-up).
"""

from __future__ import annotations

import libcst as cst
import libcst.matchers as m

from patchkit.anchor import Anchor
from patchkit.edits import edit
from patchkit.errors import AnchorError
from patchkit.launch_trigger import Trigger
from patchkit.matchers import methods, self_attr, string
from patchkit.patch import Patch, SkipPatch
from patchkit.runtime_switch import declared, on
from patchkit.template import Snippet, walk_statements

MODEL_RUNNER = "sglang/srt/model_executor/model_runner.py"
SPEC_AUX = "sglang/srt/model_executor/model_runner_components/spec_aux_hidden_state.py"
RESOLVER = "resolve_spec_aux_hidden_state_config"
EAGLE_RESOLVER = "_resolve_eagle_aux_hidden_state"

FALLBACK = Snippet("""
    if (
        {count} is None
        and ({spec}.is_eagle() or {spec}.is_standalone())
        and not {draft_worker}
        and not {draft_path}
        and (getattr({model_config}.hf_text_config, "mtp_num_hidden_layers", 0) or 0) > 0
        and {on}
    ):
        # patchkit mtp-draft-kv-budget: built-in MTP (no draft path) still has draft KV layers
        {count} = int({model_config}.hf_text_config.mtp_num_hidden_layers)
""", on=on("mtp-draft-kv-budget"))

# 0.5.14-0.5.15 resolve the count in ModelRunner.__init__.
RUNNER_CLASS = Anchor("ModelRunner", parts=("__init__",), marks=(FALLBACK,), watch=("__init__",))
_DRAFT_PATH = m.Attribute(attr=m.Name("speculative_draft_model_path"))
_READS_MTP = m.Call(func=m.Name("getattr"), args=[m.DoNotCare(), m.Arg(string("mtp_num_hidden_layers")), m.ZeroOrMore()]) | m.Attribute(
    attr=m.Name("mtp_num_hidden_layers")
)

# 0.5.14-0.5.15, ModelRunner.__init__: `if (...) and not self.is_draft_worker and
# server_args.speculative_draft_model_path:` whose body sets self.eagle_draft_num_layers.
_SETS_SELF_COUNT = m.SimpleStatementLine(body=[m.Assign(targets=[m.AssignTarget(self_attr("eagle_draft_num_layers"))])])
_RESOLVES_WITH_PATH = m.If(
    test=m.BooleanOperation(right=_DRAFT_PATH),
    body=m.MatchIfTrue(lambda body: any(m.matches(s, _SETS_SELF_COUNT) for s in walk_statements(body))),
)
# 0.5.16+, resolve_spec_aux_hidden_state_config(): the call of _resolve_eagle_aux_hidden_state(...).
_CALLS_EAGLE_RESOLVER = m.SimpleStatementLine(body=[m.Expr(value=m.Call(func=m.Name(EAGLE_RESOLVER)))])


def _top_functions(tree: cst.Module, *names: str) -> list[cst.FunctionDef]:
    return [fn for fn in tree.body if isinstance(fn, cst.FunctionDef) and fn.name.value in names]


def _runner_inits(tree: cst.Module) -> list[cst.FunctionDef]:
    return [fn for cls in RUNNER_CLASS.find(tree) for fn in methods(cls, "__init__")]


def _reads_mtp_outside_ours(scope: cst.CSTNode) -> bool:
    ours = {id(node) for fallback in FALLBACK.find(scope) for node in [fallback, *walk_statements(fallback)]}
    for stmt in walk_statements(scope):
        if id(stmt) in ours:
            continue
        head = stmt if isinstance(stmt, cst.SimpleStatementLine) else getattr(stmt, "test", None)
        if head is not None and m.findall(head, _READS_MTP):
            return True
    return False


class MtpDraftKvBudget(Patch):
    ID = "mtp-draft-kv-budget"
    TITLE = "Budget the built-in MTP draft's KV layers when no --speculative-draft-model-path is set"
    RATIONALE = (
        "With built-in MTP (NEXTN/EAGLE on Qwen3.5/3.8) and no --speculative-draft-model-path, the target "
        "worker never learns how many KV layers the draft adds: the count comes only from a draft-path "
        "config or from num_nextn_predict_layers, and Qwen3.5/3.8 declare text_config.mtp_num_hidden_layers. "
        "The draft's KV is left out of the budget and the pool over-commits by one MTP layer's share "
        "(1/16 of the KV bytes for Qwen3.8-27B). The target's mtp_num_hidden_layers is now used there."
    )
    UPSTREAM = ("sgl-project/sglang#35566 (open)",)
    DROP_WHEN = "drop when #35566 ships (the path-less MTP draft's layers are counted in the KV budget)"
    APPLIES_TO = ">=0.5.14"
    LAUNCH = Trigger(
        level="warning", speculative=("EAGLE", "EAGLE3", "NEXTN", "STANDALONE"), model=("qwen3.5-mtp",),
        flags=("!speculative_draft_model_path",),
        why="without --speculative-draft-model-path the built-in MTP draft's KV layers are left out of "
            "the KV budget, which over-commits the pool")
    TARGETS = (MODEL_RUNNER, SPEC_AUX)
    ANCHORS = {MODEL_RUNNER: (RUNNER_CLASS,)}
    RUNTIME_SWITCH = declared(ID)
    PARTS = {SPEC_AUX: (RESOLVER, EAGLE_RESOLVER)}
    MARKS = {SPEC_AUX: ((None, FALLBACK),)}
    ANCHOR_SYMBOLS = (RESOLVER, RUNNER_CLASS.name)  # track looks for the resolver first
    WATCH = (RESOLVER, EAGLE_RESOLVER)

    def is_fixed_upstream(self, path: str, tree: cst.Module) -> bool:
        # Upstream's fix (still open) has to read mtp_num_hidden_layers where the count is resolved.
        if path == MODEL_RUNNER:
            return any(
                any(m.matches(s, _SETS_SELF_COUNT) for s in walk_statements(init)) and _reads_mtp_outside_ours(init)
                for init in _runner_inits(tree)
            )
        return any(_reads_mtp_outside_ours(fn) for fn in _top_functions(tree, RESOLVER, EAGLE_RESOLVER))

    def check(self, path: str, tree: cst.Module) -> None:
        super().check(path, tree)
        if path == MODEL_RUNNER and not any(
            m.matches(s, _RESOLVES_WITH_PATH) or FALLBACK.matches(s) for init in _runner_inits(tree) for s in walk_statements(init)
        ):
            # 0.5.16+ resolve the count in spec_aux_hidden_state.py; before 0.5.14 no release
            # sizes the KV pool for an EAGLE draft at all.
            raise SkipPatch(f"{path}: ModelRunner.__init__ does not resolve eagle_draft_num_layers")
        if path == SPEC_AUX and not _top_functions(tree, RESOLVER):
            raise SkipPatch(f"{path} has no {RESOLVER}()")

    # 0.5.14-0.5.15: right after ModelRunner.__init__'s own resolution with the draft path.
    @m.call_if_inside(RUNNER_CLASS.matcher)
    @m.call_if_inside(m.FunctionDef(name=m.Name("__init__")))
    @edit(_RESOLVES_WITH_PATH, "ModelRunner.__init__: if ... and server_args.speculative_draft_model_path: self.eagle_draft_num_layers = ...",
          files=(MODEL_RUNNER,))
    def add_runner_fallback(self, original_node: cst.If, updated_node: cst.If) -> cst.FlattenSentinel[cst.BaseStatement]:
        assert isinstance(updated_node.test, cst.BooleanOperation)
        new = FALLBACK.fill(
            count="self.eagle_draft_num_layers", spec="self.spec_algorithm", draft_worker="self.is_draft_worker",
            draft_path=updated_node.test.right, model_config="self.model_config",
        )
        return cst.FlattenSentinel([updated_node, *new])

    # 0.5.16+: in resolve_spec_aux_hidden_state_config(), after its call of the EAGLE resolver.
    @m.visit(m.Module())
    def read_draft_path(self, node: cst.Module) -> None:
        """How this release reads the draft path (server_args.… or get_spec().…), from its own
        EAGLE resolver (which may come after the function the fallback goes into)."""
        if self.path != SPEC_AUX:
            return
        eagle = _top_functions(node, EAGLE_RESOLVER)
        paths = m.findall(eagle[0], _DRAFT_PATH) if len(eagle) == 1 else []
        if not paths:
            raise AnchorError(f"anchor not found: {EAGLE_RESOLVER}(): ….speculative_draft_model_path")
        assert isinstance(paths[0], cst.BaseExpression)
        self.draft_path = paths[0]

    @m.visit(m.FunctionDef(name=m.Name(RESOLVER)))
    def check_resolver_params(self, node: cst.FunctionDef) -> None:
        params = {param.name.value for param in m.findall(node.params, m.Param()) if isinstance(param, cst.Param)}
        missing = {"model_config", "spec_algorithm", "is_draft_worker"} - params
        if self.path == SPEC_AUX and missing:
            raise AnchorError(f"anchor not found: {RESOLVER}() parameter(s) {', '.join(sorted(missing))}")

    @m.call_if_inside(m.FunctionDef(name=m.Name(RESOLVER)))
    @edit(_CALLS_EAGLE_RESOLVER, f"{RESOLVER}(): {EAGLE_RESOLVER}(...)", files=(SPEC_AUX,))
    def add_resolver_fallback(
        self, original_node: cst.SimpleStatementLine, updated_node: cst.SimpleStatementLine
    ) -> cst.FlattenSentinel[cst.BaseStatement]:
        new = FALLBACK.fill(
            count="config.eagle_draft_num_layers", spec="spec_algorithm", draft_worker="is_draft_worker",
            draft_path=self.draft_path, model_config="model_config",
        )
        return cst.FlattenSentinel([updated_node, *new])
