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

from patchkit.matchers import classes, exactly_one, find_class, methods, parse_statements, replace_member
from patchkit.patch import Patch, SkipPatch

QWEN3_5 = "sglang/srt/models/qwen3_5.py"
QWEN3_5_TEXT = "sglang/srt/models/qwen3_5_text.py"
DECODER = "Qwen3_5ForCausalLM"
WRAPPERS = ("Qwen3_5ForConditionalGeneration", "Qwen3_5MoeForConditionalGeneration")
METHOD = "set_eagle3_layers_to_capture"
DFLASH = "set_dflash_layers_to_capture"

_WRAPPER_SOURCE = f'''\
def {METHOD}(self, layer_ids=None):
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
    self.model.{METHOD}(layers_to_capture)
'''

_TEXT_SOURCE = f'''\
def {METHOD}(self, layer_ids=None):
    # patchkit eagle3-capture-hook: as 0.5.22's text-only class does.
    if not self.pp_group.is_last_rank:
        return
    self.capture_aux_hidden_states = True
    if layer_ids is None:
        num_layers = len(self.model.layers)
        layers_to_capture = [2, num_layers // 2, num_layers - 3]
    else:
        layers_to_capture = [val + 1 for val in layer_ids]
    self.model.{METHOD}(layers_to_capture)
'''


def _append_method(cls: cst.ClassDef, source: str) -> cst.ClassDef:
    new = parse_statements(source, blank_lines_before=1)
    return cls.with_changes(body=cls.body.with_changes(body=[*cls.body.body, *new]))


class Eagle3CaptureHook(Patch):
    ID = "eagle3-capture-hook"
    TITLE = "EAGLE-3 aux hidden-state capture for Qwen3.5/3.8 targets"
    RATIONALE = (
        "Qwen3_5ForConditionalGeneration inherits set_eagle3_layers_to_capture() from Qwen3-VL, which only "
        "assigns self.model.layers_to_capture; the Qwen3.5 decoder captures the layers flagged with "
        "_is_layer_to_capture instead, so capture silently does nothing and the speculative path fails "
        "when it unpacks (hidden_states, aux). The patch adds 0.5.22's decoder-level method and routes to it."
    )
    UPSTREAM = ("sglang 0.5.22: decoder-level set_eagle3_layers_to_capture, VL wrapper delegates",)
    DROP_WHEN = "drop for releases >= 0.5.22 (decoder-level set_eagle3_layers_to_capture upstream)"
    APPLIES_TO = ">=0.5.11,<0.5.22"
    TARGETS = (QWEN3_5, QWEN3_5_TEXT)
    REQUIRES = (QWEN3_5,)
    ANCHOR_SYMBOLS = WRAPPERS[:1]
    WATCH = (f"{DECODER}.{DFLASH}", f"{DECODER}.{METHOD}", f"{WRAPPERS[0]}.{METHOD}")

    def is_applied(self, path: str, tree: cst.Module) -> bool:
        if path == QWEN3_5_TEXT:
            return any(methods(cls, METHOD) for cls in classes(tree, DECODER))
        return any(methods(cls, METHOD) for cls in classes(tree, WRAPPERS[0]))

    def is_fixed_upstream(self, path: str, tree: cst.Module) -> bool:
        if path == QWEN3_5_TEXT:
            return False
        # Upstream's decoder method, with no override of ours on the wrapper.
        decoder_has = any(methods(cls, METHOD) for cls in classes(tree, DECODER))
        return decoder_has and not self.is_applied(path, tree)

    def transform(self, path: str, tree: cst.Module) -> cst.Module:
        if self.is_applied(path, tree):
            return tree
        if path == QWEN3_5_TEXT:
            if not classes(tree, DECODER):
                raise SkipPatch(f"{path} has no text-only {DECODER}")
            cls = find_class(tree, DECODER, path)
            return replace_member(tree, cls, _append_method(cls, _TEXT_SOURCE))
        if not classes(tree, DECODER) or not any(methods(c, DFLASH) for c in classes(tree, DECODER)):
            raise SkipPatch(f"{path}: no layer-capture machinery ({DECODER}.{DFLASH}) in this release")
        decoder = find_class(tree, DECODER, path)
        dflash = exactly_one(methods(decoder, DFLASH), f"{DECODER}.{DFLASH}()", path)
        # 0.5.22's decoder method is the DFlash one under another name.
        eagle3 = dflash.with_changes(name=cst.Name(METHOD), leading_lines=[cst.EmptyLine(indent=False)])
        body = list(decoder.body.body)
        body.insert(body.index(dflash) + 1, eagle3)
        tree = replace_member(tree, decoder, decoder.with_changes(body=decoder.body.with_changes(body=body)))
        for name in WRAPPERS:
            for wrapper in classes(tree, name):
                tree = replace_member(tree, wrapper, _append_method(wrapper, _WRAPPER_SOURCE))
        return tree
