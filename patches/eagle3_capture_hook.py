"""eagle3-capture-hook: make EAGLE-3 aux hidden-state capture work for Qwen3.5/3.8 targets.

Matches 0.5.22's own implementation, so nothing changes for a user who upgrades past the patch:
- decoder `Qwen3_5ForCausalLM.set_eagle3_layers_to_capture(layers)`: flags layers exactly as
  `set_dflash_layers_to_capture` does (0.5.22's method is the same body);
- `Qwen3_5ForConditionalGeneration` / `Qwen3_5MoeForConditionalGeneration`: an override of the
  inherited Qwen3-VL method that turns on `capture_aux_hidden_states`, converts the drafter's
  "after layer k" ids to SGLang's "before layer k+1" (`[2, n // 2, n - 3]` when none are given)
  and routes to the decoder, as 0.5.22's VL base does;
- the text-only `qwen3_5_text.Qwen3_5ForCausalLM` (0.5.17-0.5.21) gets 0.5.22's text method.
"""

from __future__ import annotations

import libcst as cst
import libcst.matchers as m

from patchkit.anchor import Anchor
from patchkit.edits import append_to_block, edit
from patchkit.launch_trigger import Trigger
from patchkit.matchers import functions
from patchkit.errors import AnchorError
from patchkit.patch import Patch, SkipPatch
from patchkit.template import Snippet

QWEN3_5 = "sglang/srt/models/qwen3_5.py"
QWEN3_5_TEXT = "sglang/srt/models/qwen3_5_text.py"
DECODER = "Qwen3_5ForCausalLM"
WRAPPERS = ("Qwen3_5ForConditionalGeneration", "Qwen3_5MoeForConditionalGeneration")
METHOD = "set_eagle3_layers_to_capture"
DFLASH = "set_dflash_layers_to_capture"

WRAPPER_METHOD = Snippet("""
    def {method}(self, layer_ids=None):
        # patchkit eagle3-capture-hook: route to the Qwen3.5 decoder, which captures the layers
        # flagged with _is_layer_to_capture (the inherited Qwen3-VL method only set a list it ignores).
        pp_group = getattr(self, "pp_group", None)
        if pp_group is not None and not pp_group.is_last_rank:
            return
        self.capture_aux_hidden_states = True
        self.model.capture_aux_hidden_states = True
        if layer_ids is None:
            num_layers = self.config.num_hidden_layers
            layers_to_capture = [2, num_layers // 2, num_layers - 3]
        else:
            layers_to_capture = [val + 1 for val in layer_ids]
        self.model.{method}(layers_to_capture)
""", blank_lines_before=1, method=METHOD)

TEXT_METHOD = Snippet("""
    def {method}(self, layer_ids=None):
        # patchkit eagle3-capture-hook: as 0.5.22's text-only class does.
        if not self.pp_group.is_last_rank:
            return
        self.capture_aux_hidden_states = True
        if layer_ids is None:
            num_layers = len(self.model.layers)
            layers_to_capture = [2, num_layers // 2, num_layers - 3]
        else:
            layers_to_capture = [val + 1 for val in layer_ids]
        self.model.{method}(layers_to_capture)
""", blank_lines_before=1, method=METHOD)

_DEFINES_METHOD = m.FunctionDef(name=m.Name(METHOD))
_DEFINES_DFLASH = m.FunctionDef(name=m.Name(DFLASH))
# The decoder, in both files (its DFlash method is what 0.5.22's is copied from); the VL wrappers.
DECODER_CLASS = Anchor(DECODER, parts=(DFLASH, METHOD), watch=(DFLASH, METHOD))
TEXT_DECODER_CLASS = Anchor(DECODER, parts=(METHOD,), marks=(TEXT_METHOD,))
WRAPPER_CLASSES = (Anchor(WRAPPERS[0], parts=(METHOD,), marks=(WRAPPER_METHOD,), watch=(METHOD,)),
                   *(Anchor(name, parts=(METHOD,), marks=(WRAPPER_METHOD,)) for name in WRAPPERS[1:]))
_WRAPPER = m.ClassDef(name=m.OneOf(*(m.Name(name) for name in WRAPPERS)))


def _defines(cls: cst.ClassDef, matcher: m.FunctionDef) -> list[cst.FunctionDef]:
    return [fn for fn in functions(cls) if m.matches(fn, matcher)]


class Eagle3CaptureHook(Patch):
    ID = "eagle3-capture-hook"
    TITLE = "EAGLE-3 aux hidden-state capture for Qwen3.5/3.8 targets"
    RATIONALE = (
        "Qwen3_5ForConditionalGeneration inherits set_eagle3_layers_to_capture() from Qwen3-VL, which only "
        "assigns self.model.layers_to_capture; the Qwen3.5 decoder captures the layers flagged with "
        "_is_layer_to_capture instead, so capture silently does nothing and the speculative path fails "
        "when it unpacks (hidden_states, aux). The patch adds 0.5.22's decoder-level method and routes to it."
    )
    UPSTREAM = ("sglang 0.5.22: Qwen3_5ForCausalLM.set_eagle3_layers_to_capture flags the layers and "
                "Qwen3VLForConditionalGeneration's method delegates to it: this patch's methods, no narrower",
                "sgl-project/sglang#38307 (open: the same fix, proposed against main)")
    DROP_WHEN = "drop for releases >= 0.5.22 (decoder-level set_eagle3_layers_to_capture upstream)"
    APPLIES_TO = ">=0.5.11,<0.5.22"
    LAUNCH = Trigger(level="error", speculative=("EAGLE3",), model=("qwen3.5",),
                     why="EAGLE-3 cannot capture the Qwen3.5/3.8 hidden states")
    TARGETS = (QWEN3_5, QWEN3_5_TEXT)
    REQUIRES = (QWEN3_5,)
    ANCHORS = {QWEN3_5: (DECODER_CLASS, *WRAPPER_CLASSES), QWEN3_5_TEXT: (TEXT_DECODER_CLASS,)}
    NO_RUNTIME_SWITCH = ("it adds methods the release lacks; the release's own path is a capture that "
                         "silently does nothing, and the text-only class has no method to fall back to")
    ANCHOR_SYMBOLS = WRAPPERS[:1]  # the VL wrapper: the decoder's name is in other models' files too

    def is_fixed_upstream(self, path: str, tree: cst.Module) -> bool:
        # Upstream's fix (0.5.22): the decoder defines set_eagle3_layers_to_capture itself (the
        # VL base delegates to it), and no wrapper carries this patch's override. The text-only
        # class: a method of its own that is not this patch's.
        decoders = DECODER_CLASS.find(tree)
        if path == QWEN3_5_TEXT:
            return any(fn for cls in decoders for fn in _defines(cls, _DEFINES_METHOD) if not TEXT_METHOD.matches(fn))
        ours = any(WRAPPER_METHOD.present_in(cls) for wrapper in WRAPPER_CLASSES for cls in wrapper.find(tree))
        return not ours and any(_defines(cls, _DEFINES_METHOD) for cls in decoders)

    def check(self, path: str, tree: cst.Module) -> None:
        super().check(path, tree)
        if path == QWEN3_5 and not any(_defines(cls, _DEFINES_DFLASH) for cls in DECODER_CLASS.find(tree)):
            raise SkipPatch(f"{path}: no layer-capture machinery ({DECODER}.{DFLASH}) in this release")

    @edit(DECODER_CLASS.matcher, f"class {DECODER}", files=(QWEN3_5_TEXT,))
    def add_text_method(self, original_node: cst.ClassDef, updated_node: cst.ClassDef) -> cst.ClassDef:
        return append_to_block(updated_node, TEXT_METHOD.fill())

    @edit(DECODER_CLASS.matcher, f"class {DECODER}", times="any", files=(QWEN3_5,))
    def add_decoder_method(self, original_node: cst.ClassDef, updated_node: cst.ClassDef) -> cst.ClassDef:
        # 0.5.22's decoder method is the DFlash one under another name.
        if _defines(updated_node, _DEFINES_METHOD):
            return updated_node
        dflash = _defines(updated_node, _DEFINES_DFLASH)
        if len(dflash) != 1:
            what = "anchor not found" if not dflash else f"anchor is ambiguous ({len(dflash)} matches)"
            raise AnchorError(f"{what}: {DECODER}.{DFLASH}()")
        copy = dflash[0].with_changes(name=cst.Name(METHOD), leading_lines=[cst.EmptyLine(indent=False)])
        assert isinstance(updated_node.body, cst.IndentedBlock)
        body = list(updated_node.body.body)
        body.insert(body.index(dflash[0]) + 1, copy)
        return updated_node.with_changes(body=updated_node.body.with_changes(body=body))

    @edit(_WRAPPER, " or ".join(f"class {name}" for name in WRAPPERS), times="any", files=(QWEN3_5,))
    def add_wrapper_method(self, original_node: cst.ClassDef, updated_node: cst.ClassDef) -> cst.ClassDef:
        own = _defines(updated_node, _DEFINES_METHOD)
        if any(WRAPPER_METHOD.matches(fn) for fn in own):
            return updated_node  # this wrapper carries the override already: never a second def
        if own:
            self.warn(f"{self.path}: {updated_node.name.value} defines its own {METHOD}; left as it is")
            return updated_node
        return append_to_block(updated_node, WRAPPER_METHOD.fill())
