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
    self_attr,
    statements,
    string,
)
from patchkit.patch import Patch, SkipPatch

MODEL_RUNNER = "sglang/srt/model_executor/model_runner.py"
SPEC_AUX = "sglang/srt/model_executor/model_runner_components/spec_aux_hidden_state.py"
RESOLVER = "resolve_spec_aux_hidden_state_config"
EAGLE_RESOLVER = "_resolve_eagle_aux_hidden_state"
MARK = "# patchkit mtp-draft-kv-budget: built-in MTP (no draft path) still has draft KV layers"

_DRAFT_PATH = m.Attribute(attr=m.Name("speculative_draft_model_path"))
_READS_MTP = m.Call(func=m.Name("getattr"), args=[m.DoNotCare(), m.Arg(string("mtp_num_hidden_layers")), m.ZeroOrMore()]) | m.Attribute(
    attr=m.Name("mtp_num_hidden_layers")
)

# 0.5.14-0.5.15, ModelRunner.__init__: `if (...) and not self.is_draft_worker and
# server_args.speculative_draft_model_path:` whose body sets self.eagle_draft_num_layers.
_SETS_SELF_COUNT = m.SimpleStatementLine(body=[m.Assign(targets=[m.AssignTarget(self_attr("eagle_draft_num_layers"))])])
_RESOLVES_WITH_PATH = m.If(
    test=m.BooleanOperation(right=_DRAFT_PATH),
    body=m.MatchIfTrue(lambda body: bool(statements(body, _SETS_SELF_COUNT))),
)
# 0.5.16+, resolve_spec_aux_hidden_state_config(): the call of _resolve_eagle_aux_hidden_state(...).
_CALLS_EAGLE_RESOLVER = m.SimpleStatementLine(body=[m.Expr(value=m.Call(func=m.Name(EAGLE_RESOLVER)))])

_FALLBACK_SOURCE = """\
if (
    {owner}eagle_draft_num_layers is None
    and ({spec}.is_eagle() or {spec}.is_standalone())
    and not {draft_worker}
    and not {draft_path}
    and (getattr({model_config}.hf_text_config, "mtp_num_hidden_layers", 0) or 0) > 0
):
    {mark}
    {owner}eagle_draft_num_layers = int({model_config}.hf_text_config.mtp_num_hidden_layers)
"""


def _fallback(owner: str, spec: str, draft_worker: str, draft_path: cst.BaseExpression, model_config: str) -> list[cst.BaseStatement]:
    source = _FALLBACK_SOURCE.format(
        owner=owner, spec=spec, draft_worker=draft_worker, model_config=model_config, mark=MARK,
        draft_path=cst.Module(body=[]).code_for_node(draft_path),
    )
    return parse_statements(source)


_OURS = m.If(
    test=m.BooleanOperation(left=m.BooleanOperation(left=m.BooleanOperation(left=m.BooleanOperation(
        left=m.Comparison(left=m.Attribute(attr=m.Name("eagle_draft_num_layers")))
    )))),
    body=m.IndentedBlock(body=[m.SimpleStatementLine(body=[m.Assign(targets=[m.AssignTarget(m.Attribute(attr=m.Name("eagle_draft_num_layers")))])])]),
)


def _reads_mtp_outside_ours(scope: cst.CSTNode) -> bool:
    ours = {id(line) for fallback in statements(scope, _OURS) for line in statements(fallback, m.SimpleStatementLine())}
    ours |= {id(fallback) for fallback in statements(scope, _OURS)}
    for stmt in statements(scope, m.SimpleStatementLine() | m.If() | m.While()):
        if id(stmt) in ours:
            continue
        head = stmt if isinstance(stmt, cst.SimpleStatementLine) else stmt.test  # type: ignore[attr-defined]
        if m.findall(head, _READS_MTP):
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
    TARGETS = (MODEL_RUNNER, SPEC_AUX)
    ANCHOR_SYMBOLS = (RESOLVER, "ModelRunner")
    WATCH = (RESOLVER, EAGLE_RESOLVER, "ModelRunner.__init__")

    def _scopes(self, path: str, tree: cst.Module) -> list[cst.FunctionDef]:
        if path == MODEL_RUNNER:
            return [init for cls in classes(tree, "ModelRunner") for init in methods(cls, "__init__")]
        return [fn for fn in tree.body if m.matches(fn, m.FunctionDef(name=m.Name(RESOLVER)))]

    def is_applied(self, path: str, tree: cst.Module) -> bool:
        return any(statements(fn, _OURS) for fn in self._scopes(path, tree))

    def is_fixed_upstream(self, path: str, tree: cst.Module) -> bool:
        # Upstream's fix (still open) has to read mtp_num_hidden_layers where the count is resolved.
        if path == MODEL_RUNNER:
            return any(statements(init, _SETS_SELF_COUNT) and _reads_mtp_outside_ours(init) for init in self._scopes(path, tree))
        resolvers = [fn for fn in tree.body if m.matches(fn, m.FunctionDef(name=m.Name(m.MatchIfTrue(lambda n: n in (RESOLVER, EAGLE_RESOLVER)))))]
        return any(_reads_mtp_outside_ours(fn) for fn in resolvers)

    def transform(self, path: str, tree: cst.Module) -> cst.Module:
        if self.is_applied(path, tree):
            return tree
        if path == MODEL_RUNNER:
            return self._model_runner(path, tree)
        return self._spec_aux(path, tree)

    def _model_runner(self, path: str, tree: cst.Module) -> cst.Module:
        inits = self._scopes(path, tree)
        hits = [(init, branch) for init in inits for branch in statements(init, _RESOLVES_WITH_PATH)]
        if not hits:
            # 0.5.16+ resolve the count in spec_aux_hidden_state.py; before 0.5.14 no release sizes
            # the KV pool for an EAGLE draft at all.
            raise SkipPatch(f"{path}: ModelRunner.__init__ does not resolve eagle_draft_num_layers")
        cls = find_class(tree, "ModelRunner", path)
        init, anchor = exactly_one(hits, "ModelRunner.__init__: if ... and server_args.speculative_draft_model_path: self.eagle_draft_num_layers = ...", path)
        draft_path = anchor.test.right  # type: ignore[attr-defined]
        new = _fallback("self.", "self.spec_algorithm", "self.is_draft_worker", draft_path, "self.model_config")
        return replace_member(tree, cls, replace_member(cls, init, insert_after(init, anchor, new)))

    def _spec_aux(self, path: str, tree: cst.Module) -> cst.Module:
        resolvers = self._scopes(path, tree)
        if not resolvers:
            raise SkipPatch(f"{path} has no {RESOLVER}()")
        resolver = exactly_one(resolvers, f"{RESOLVER}()", path)
        params = {p.name.value for p in m.findall(resolver.params, m.Param())}  # type: ignore[union-attr]
        missing = {"model_config", "spec_algorithm", "is_draft_worker"} - params
        if missing:
            raise AnchorError(f"{path}: anchor not found: {RESOLVER}() parameter(s) {', '.join(sorted(missing))}")
        anchor = exactly_one(statements(resolver, _CALLS_EAGLE_RESOLVER), f"{RESOLVER}(): {EAGLE_RESOLVER}(...)", path)
        eagle = exactly_one(
            [fn for fn in tree.body if m.matches(fn, m.FunctionDef(name=m.Name(EAGLE_RESOLVER)))], f"def {EAGLE_RESOLVER}()", path
        )
        # How this release reads the draft path (server_args.… or get_spec().…), from its own resolver.
        draft_path = exactly_one(m.findall(eagle, _DRAFT_PATH)[:1], f"{EAGLE_RESOLVER}(): ….speculative_draft_model_path", path)
        new = _fallback("config.", "spec_algorithm", "is_draft_worker", draft_path, "model_config")  # type: ignore[arg-type]
        return replace_member(tree, resolver, insert_after(resolver, anchor, new))
