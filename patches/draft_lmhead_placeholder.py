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
- Qwen3-Next (`Qwen3NextForCausalLMMTP`, every release from 0.5.10): the draft builds its
  `lm_head` unconditionally (no last-rank branch) after `self.pp_group = ...`, so the same
  placeholder goes right after that `self.lm_head = ParallelLMHead(...)`, guarded by
  `self.pp_group.world_size == 1`. Its `set_embed_and_head()` (inherited from
  `Qwen3NextForCausalLM`) always swaps in both target tensors, and its MTP `load_weights()`
  reads only `mtp.*` checkpoint names (the checkpoint has no MTP embedding or head), so nothing
  loads into the placeholders.

Runtime switch: `SGLANG_PATCHKIT_DISABLE=draft-lmhead-placeholder` keeps the draft's own
tensors, read in the draft's `__init__` (once, at start-up); load_weights' skip follows the
placeholder (`numel() == 0`), so it loads the embedding as the release does.
"""

from __future__ import annotations

import libcst as cst
import libcst.matchers as m

from patchkit.anchor import Anchor
from patchkit.edits import edit, prepend_to_block
from patchkit.launch_trigger import Trigger
from patchkit.matchers import functions, self_attr, string
from patchkit.patch import Patch
from patchkit.runtime_switch import declared, on
from patchkit.template import Snippet, walk_statements
from patchkit.errors import AnchorError

QWEN3_5_MTP = "sglang/srt/models/qwen3_5_mtp.py"
QWEN3_NEXT_MTP = "sglang/srt/models/qwen3_next_mtp.py"

# `if <pp_group>.is_last_rank:` whose body assigns self.lm_head (the head is built there).
_ASSIGNS_HEAD = m.SimpleStatementLine(body=[m.Assign(targets=[m.AssignTarget(self_attr("lm_head"))])])
_BUILDS_HEAD = m.If(
    test=m.Attribute(value=m.SaveMatchedNode(m.DoNotCare(), "pp_group"), attr=m.Name("is_last_rank")),
    body=m.MatchIfTrue(lambda body: any(m.matches(s, _ASSIGNS_HEAD) for s in walk_statements(body))),
)

# Qwen3-Next: `self.lm_head = ParallelLMHead(...)` directly in __init__, after
# `self.pp_group = <the pp group>`.
_ALLOCATES_HEAD_LINE = m.SimpleStatementLine(body=[m.Assign(
    targets=[m.AssignTarget(self_attr("lm_head"))], value=m.Call(func=m.Name("ParallelLMHead")),
)])
_SETS_PP_GROUP = m.SimpleStatementLine(body=[m.Assign(targets=[m.AssignTarget(self_attr("pp_group"))])])

PLACEHOLDER = Snippet("""
    if {pp_group}.world_size == 1 and {on}:
        # patchkit draft-lmhead-placeholder: the target's embed/lm_head replace these in
        # set_embed_and_head(); dropping them now keeps ~2 x vocab x hidden out of the KV budget.
        self.model.embed_tokens.weight = torch.nn.Parameter(
            self.model.embed_tokens.weight.new_empty(0), requires_grad=False
        )
        if not config.tie_word_embeddings:
            self.lm_head.weight = torch.nn.Parameter(
                self.lm_head.weight.new_empty(0), requires_grad=False
            )
""", blank_lines_before=1, on=on("draft-lmhead-placeholder"))

# The MTP draft classes this patch covers, by file (one per model family); the upstream probe
# looks for a ParallelLMHead anywhere in the class.
_DRAFT_PARTS = ("__init__", "load_weights", "set_embed_and_head", ":ParallelLMHead")
DRAFT_CLASS = Anchor("Qwen3_5ForCausalLMMTP", parts=_DRAFT_PARTS, marks=(PLACEHOLDER,),
                     watch=("__init__", "set_embed_and_head", "load_weights"))
NEXT_DRAFT_CLASS = Anchor("Qwen3NextForCausalLMMTP", parts=_DRAFT_PARTS, marks=(PLACEHOLDER,), watch=("__init__",))
DRAFT_CLASSES = {QWEN3_5_MTP: DRAFT_CLASS, QWEN3_NEXT_MTP: NEXT_DRAFT_CLASS}

# load_weights (0.5.20+): `if name in ("model.embed_tokens.weight", ...):` loads the checkpoint
# embedding; every such branch is guarded.
_LOADS_EMBED = m.If(
    test=m.Comparison(
        left=m.Name("name"),
        comparisons=[m.ComparisonTarget(operator=m.In(), comparator=m.Tuple(elements=[m.ZeroOrMore(), m.Element(string("model.embed_tokens.weight")), m.ZeroOrMore()]))],
    )
)
SKIP_LOAD = Snippet("""
    if self.model.embed_tokens.weight.numel() == 0:
        continue  # patchkit draft-lmhead-placeholder: the target's embedding replaces it
""")

_INIT = m.FunctionDef(name=m.Name("__init__"))

# The upstream fixes in review allocate no ParallelLMHead in the draft at all (sglang#38147).
_ALLOCATES_HEAD = m.Call(func=m.Name("ParallelLMHead"))


class DraftLmheadPlaceholder(Patch):
    ID = "draft-lmhead-placeholder"
    TITLE = "Free the Qwen3.5 / Qwen3-Next MTP draft's own embed_tokens/lm_head before the KV pool is sized"
    RATIONALE = (
        "Qwen3_5ForCausalLMMTP.__init__ builds its own embed_tokens and lm_head (248320 x 5120 bf16, "
        "~2.5 GB each); set_embed_and_head() swaps in the target's tensors only after the KV pool was "
        "sized, so the draft load counts 5.53 GB instead of 0.79 GB and the KV pool shrinks. The patch "
        "replaces both weights with zero-size Parameters at the end of __init__ (PP off only). "
        "Qwen3NextForCausalLMMTP does the same (~2 x 0.62 GB for Qwen3-Next-80B) and is covered alike."
    )
    UPSTREAM = (
        "sgl-project/sglang#38147 (share target embed/lm_head, no draft allocation)",
        "sgl-project/sglang#35996, #37155, #35567 (bind embed/lm_head before KV pool sizing)",
    )
    DROP_WHEN = "drop when #38147 (or one of #35996/#37155/#35567) ships"
    APPLIES_TO = ">=0.5.10"
    LAUNCH = Trigger(
        level="warning", speculative=("EAGLE", "EAGLE3", "NEXTN", "STANDALONE"), model=("mtp-draft",),
        why="the MTP draft allocates its own vocab-sized embedding and lm_head before the KV pool is sized")
    TARGETS = tuple(DRAFT_CLASSES)
    ANCHORS = {path: (cls,) for path, cls in DRAFT_CLASSES.items()}
    RUNTIME_SWITCH = declared(ID)
    WATCH = ("Qwen3NextForCausalLM.set_embed_and_head",)  # the class Qwen3-Next's draft inherits it from

    def is_fixed_upstream(self, path: str, tree: cst.Module) -> bool:
        # Upstream's fix (#38147), by its shape: the draft class shares the target's tensors
        # (it has set_embed_and_head, or inherits it from its model class as Qwen3-Next's draft
        # does) and allocates no ParallelLMHead in any of its methods. A head allocation moved
        # out of __init__ (into a helper method) is not a fix: the patch then fails on its
        # missing anchor instead of being skipped.
        return any(
            not m.findall(cls, _ALLOCATES_HEAD) and _shares_target_tensors(cls)
            for cls in self.scope_classes(path, tree)
        )

    # Qwen3.5: the placeholder after `if <pp_group>.is_last_rank: self.lm_head = ...` in __init__.
    @m.call_if_inside(DRAFT_CLASS.matcher)
    @m.call_if_inside(_INIT)
    @edit(_BUILDS_HEAD, f"{DRAFT_CLASS.name}.__init__: if <pp_group>.is_last_rank: self.lm_head = ...", files=(QWEN3_5_MTP,))
    def add_placeholder(self, original_node: cst.If, updated_node: cst.If) -> cst.FlattenSentinel[cst.BaseStatement]:
        captured = m.extract(original_node, _BUILDS_HEAD)
        assert captured is not None and isinstance(captured["pp_group"], cst.BaseExpression)
        return cst.FlattenSentinel([updated_node, *PLACEHOLDER.fill(pp_group=captured["pp_group"])])

    # From 0.5.20, load_weights loads the checkpoint embedding into the draft's own copy: every
    # such branch skips that load while the placeholder is in place.
    @m.call_if_inside(DRAFT_CLASS.matcher)
    @m.call_if_inside(m.FunctionDef(name=m.Name("load_weights")))
    @edit(_LOADS_EMBED, f'{DRAFT_CLASS.name}.load_weights: if name in ("model.embed_tokens.weight", ...)', times="any", files=(QWEN3_5_MTP,))
    def skip_load(self, original_node: cst.If, updated_node: cst.If) -> cst.If:
        assert isinstance(updated_node.body, cst.IndentedBlock)
        if any(SKIP_LOAD.matches(stmt) for stmt in updated_node.body.body):
            return updated_node  # guarded already (a second run over a partly patched file)
        return prepend_to_block(updated_node, SKIP_LOAD.fill())

    # Qwen3-Next: the placeholder right after the unconditional `self.lm_head = ...`, for the pp
    # group the draft keeps in `self.pp_group` (assigned before it).
    @m.call_if_inside(NEXT_DRAFT_CLASS.matcher)
    @edit(_INIT, f"{NEXT_DRAFT_CLASS.name}.__init__", files=(QWEN3_NEXT_MTP,))
    def add_placeholder_after_head(self, original_node: cst.FunctionDef, updated_node: cst.FunctionDef) -> cst.FunctionDef:
        assert isinstance(updated_node.body, cst.IndentedBlock)
        body = list(updated_node.body.body)
        heads = [i for i, stmt in enumerate(body) if m.matches(stmt, _ALLOCATES_HEAD_LINE)]
        if len(heads) != 1:
            what = "anchor not found" if not heads else f"anchor is ambiguous ({len(heads)} matches)"
            raise AnchorError(f"{what}: {NEXT_DRAFT_CLASS.name}.__init__: self.lm_head = ParallelLMHead(...)")
        if not any(m.matches(stmt, _SETS_PP_GROUP) for stmt in body[: heads[0]]):
            raise AnchorError(f"anchor not found: {NEXT_DRAFT_CLASS.name}.__init__: self.pp_group = ... before self.lm_head")
        body[heads[0] + 1:heads[0] + 1] = PLACEHOLDER.fill(pp_group=cst.parse_expression("self.pp_group"))
        return updated_node.with_changes(body=updated_node.body.with_changes(body=body))


_NN_MODULE = m.Arg(value=m.Attribute(value=m.Name("nn"), attr=m.Name("Module")) | m.Name("Module"))


def _shares_target_tensors(cls: cst.ClassDef) -> bool:
    """The class defines set_embed_and_head, or has a model base class it can inherit it from."""
    if any(fn.name.value == "set_embed_and_head" for fn in functions(cls)):
        return True
    return any(not m.matches(base, _NN_MODULE) for base in cls.bases)
