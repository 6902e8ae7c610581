"""draft-lmhead-placeholder: free the MTP draft's own vocab tensors before the KV pool is sized.

Decisions:
- Placeholders are zero-size `torch.nn.Parameter`s (a plain tensor cannot be assigned to a
  registered parameter), so `set_embed_and_head()`'s `del ...weight` still works.
- Only when pipeline parallelism is off (pp world size 1): with PP, from 0.5.19 on,
  `set_embed_and_head()` keeps the draft's own tensor where the target passes None, and a
  placeholder there would never be replaced.
- `tie_word_embeddings`: `lm_head` is `embed_tokens`, so only the embedding is replaced.
- From 0.5.20 `load_weights()` loads the checkpoint embedding into the draft's own
  `embed_tokens`; that load is skipped while the placeholder is in place (the target's
  tensor replaces it right after).
"""

from __future__ import annotations

import libcst as cst
import libcst.matchers as m

from patchkit.matchers import (
    classes,
    exactly_one,
    find_class,
    find_method,
    functions,
    insert_after,
    methods,
    parse_statements,
    replace_member,
    replace_statement,
    self_attr,
    statements,
    string,
)
from patchkit.patch import Patch, SkipPatch

QWEN3_5_MTP = "sglang/srt/models/qwen3_5_mtp.py"
CLASS = "Qwen3_5ForCausalLMMTP"

# `if <pp_group>.is_last_rank:` whose body assigns self.lm_head (the head is built there).
_BUILDS_HEAD = m.If(
    test=m.Attribute(value=m.SaveMatchedNode(m.DoNotCare(), "pp_group"), attr=m.Name("is_last_rank")),
    body=m.MatchIfTrue(lambda body: bool(statements(body, m.SimpleStatementLine(body=[m.Assign(targets=[m.AssignTarget(self_attr("lm_head"))])])))),
)

_PLACEHOLDER_SOURCE = """\
if {pp_group}.world_size == 1:
    # patchkit draft-lmhead-placeholder: the target's embed/lm_head replace these in
    # set_embed_and_head(); dropping them now keeps ~2 x vocab x hidden out of the KV budget.
    self.model.embed_tokens.weight = torch.nn.Parameter(
        self.model.embed_tokens.weight.new_empty(0), requires_grad=False
    )
    if not config.tie_word_embeddings:
        self.lm_head.weight = torch.nn.Parameter(
            self.lm_head.weight.new_empty(0), requires_grad=False
        )
"""

_PLACEHOLDER = m.If(
    test=m.Comparison(left=m.Attribute(attr=m.Name("world_size"))),
    body=m.MatchIfTrue(lambda body: bool(statements(body, m.SimpleStatementLine(body=[m.Assign(
        targets=[m.AssignTarget(self_attr("model", "embed_tokens", "weight"))],
        value=m.Call(func=m.Attribute(value=m.Attribute(value=m.Name("torch"), attr=m.Name("nn")), attr=m.Name("Parameter"))),
    )])))),
)

# load_weights (0.5.20+): `if name in ("model.embed_tokens.weight", ...):` loads the checkpoint embedding.
_LOADS_EMBED = m.If(
    test=m.Comparison(
        left=m.Name("name"),
        comparisons=[m.ComparisonTarget(operator=m.In(), comparator=m.Tuple(elements=[m.ZeroOrMore(), m.Element(string("model.embed_tokens.weight")), m.ZeroOrMore()]))],
    )
)
_SKIP_LOAD_SOURCE = """\
if self.model.embed_tokens.weight.numel() == 0:
    continue  # patchkit draft-lmhead-placeholder: the target's embedding replaces it
"""
_SKIP_LOAD = m.If(
    test=m.Comparison(left=m.Call(func=m.Attribute(value=self_attr("model", "embed_tokens", "weight"), attr=m.Name("numel")))),
    body=m.IndentedBlock(body=[m.SimpleStatementLine(body=[m.Continue()])]),
)

# The upstream fixes in review allocate no ParallelLMHead in the draft at all (sglang#38147).
_ALLOCATES_HEAD = m.Call(func=m.Name("ParallelLMHead"))


class DraftLmheadPlaceholder(Patch):
    ID = "draft-lmhead-placeholder"
    TITLE = "Free the Qwen3.5 MTP draft's own embed_tokens/lm_head before the KV pool is sized"
    RATIONALE = (
        "Qwen3_5ForCausalLMMTP.__init__ builds its own embed_tokens and lm_head (248320 x 5120 bf16, "
        "~2.5 GB each); set_embed_and_head() swaps in the target's tensors only after the KV pool was "
        "sized, so the draft load counts 5.53 GB instead of 0.79 GB and the KV pool shrinks. The patch "
        "replaces both weights with zero-size Parameters at the end of __init__ (PP off only)."
    )
    UPSTREAM = (
        "sgl-project/sglang#38147 (share target embed/lm_head, no draft allocation)",
        "sgl-project/sglang#35996, #37155, #35567 (bind embed/lm_head before KV pool sizing)",
    )
    DROP_WHEN = "drop when #38147 (or one of #35996/#37155/#35567) ships"
    APPLIES_TO = ">=0.5.14"
    TARGETS = (QWEN3_5_MTP,)
    ANCHOR_SYMBOLS = (CLASS,)
    WATCH = (f"{CLASS}.__init__", f"{CLASS}.set_embed_and_head", f"{CLASS}.load_weights")

    def _cls(self, path: str, tree: cst.Module) -> cst.ClassDef:
        if not classes(tree, CLASS):
            raise SkipPatch(f"{path} has no {CLASS}")
        return find_class(tree, CLASS, path)

    def is_applied(self, path: str, tree: cst.Module) -> bool:
        return any(statements(init, _PLACEHOLDER) for cls in classes(tree, CLASS) for init in methods(cls, "__init__"))

    def is_fixed_upstream(self, path: str, tree: cst.Module) -> bool:
        return any(
            not m.findall(init, _ALLOCATES_HEAD) for cls in classes(tree, CLASS) for init in methods(cls, "__init__")
        )

    def transform(self, path: str, tree: cst.Module) -> cst.Module:
        cls = self._cls(path, tree)
        if self.is_applied(path, tree):
            return tree
        init = find_method(cls, "__init__", path)
        anchor = exactly_one(statements(init, _BUILDS_HEAD), f"{CLASS}.__init__: if <pp_group>.is_last_rank: self.lm_head = ...", path)
        pp_group = cst.Module(body=[]).code_for_node(m.extract(anchor, _BUILDS_HEAD)["pp_group"])  # type: ignore[index]
        new_cls = replace_member(cls, init, insert_after(init, anchor, parse_statements(_PLACEHOLDER_SOURCE.format(pp_group=pp_group), blank_lines_before=1)))

        loaders = [fn for fn in functions(new_cls) if fn.name.value == "load_weights"]
        for loader in loaders:
            for branch in statements(loader, _LOADS_EMBED):
                guarded = branch.with_changes(body=branch.body.with_changes(body=[*parse_statements(_SKIP_LOAD_SOURCE), *branch.body.body]))  # type: ignore[attr-defined]
                new_cls = replace_member(new_cls, loader, replace_statement(loader, branch, [guarded]))
        return replace_member(tree, cls, new_cls)
