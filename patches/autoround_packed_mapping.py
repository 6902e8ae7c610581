"""autoround-packed-mapping: keep the packed_modules_mapping the weight loader passes to
AutoRoundConfig.from_config(), so fused modules see that their parts stay at 16 bits.

The mapping is merged into the one the base QuantizationConfig creates, right after the
constructor call; a model that sets its own mapping later (`update_packed_modules_mapping`
or assignment, as qwen3_5_text / qwen3_next do) still has the last word. Only the return
statement of from_config changes, so both constructor shapes (before and after 0.5.18's
GPTQ-style keys) are handled alike.

Runtime switch: `SGLANG_PATCHKIT_DISABLE=autoround-packed-mapping` returns the config without
the mapping, as the release does, read in from_config (once per model load).
"""

from __future__ import annotations

import libcst as cst
import libcst.matchers as m

from patchkit.anchor import Anchor
from patchkit.edits import edit
from patchkit.launch_trigger import Trigger
from patchkit.matchers import string
from patchkit.patch import Patch
from patchkit.runtime_switch import declared, on
from patchkit.template import Snippet

AUTO_ROUND = "sglang/srt/layers/quantization/auto_round.py"

_RETURNS_CLS = m.SimpleStatementLine(body=[m.Return(value=m.Call(func=m.Name("cls")))])
# The constructor's result is kept in a name; the snippet's first line (the update) marks the patch.
CONSTRUCT = Snippet("quant_config = {construct}\n")
KEEP_MAPPING = Snippet("""
    if {on}:  # patchkit autoround-packed-mapping
        quant_config.packed_modules_mapping.update(config.get("packed_modules_mapping") or {{}})
    return quant_config
""", on=on("autoround-packed-mapping"))
CONFIG_CLASS = Anchor("AutoRoundConfig", parts=("from_config",), marks=(KEEP_MAPPING,),
                      watch=("from_config", "get_layer_config"))
_READS_MAPPING = m.Call(args=[m.Arg(string("packed_modules_mapping")), m.ZeroOrMore()])
_FROM_CONFIG = m.FunctionDef(name=m.Name("from_config"))


class AutoroundPackedMapping(Patch):
    ID = "autoround-packed-mapping"
    TITLE = "AutoRoundConfig.from_config keeps the packed_modules_mapping it is given"
    RATIONALE = (
        "AutoRoundConfig.from_config() ignores the packed_modules_mapping the weight loader puts into its "
        "config, so get_layer_config() cannot see that the parts of a fused module (linear_attn.in_proj_qkvz, "
        "in_proj_ba) are kept at 16 bits in extra_config and returns 4 bits: BF16 parts go through "
        "GPTQ-Marlin (alignment crashes or garbage on AutoRound INT4 Qwen3.5/3.8)."
    )
    UPSTREAM = ("no upstream fix up to 0.5.23",)
    DROP_WHEN = "drop when AutoRoundConfig.from_config reads packed_modules_mapping"
    APPLIES_TO = ">=0.5.10"
    LAUNCH = Trigger(level="error", model=("auto-round",),
                     why="AutoRound's fused modules lose their packed mapping and load the wrong bits")
    TARGETS = (AUTO_ROUND,)
    ANCHORS = {AUTO_ROUND: (CONFIG_CLASS,)}
    RUNTIME_SWITCH = declared(ID)

    def is_fixed_upstream(self, path: str, tree: cst.Module) -> bool:
        # Upstream's fix: from_config itself reads config["packed_modules_mapping"] (passes it
        # to the constructor or sets it), without this patch's line.
        return any(
            m.findall(fn, _READS_MAPPING) and not KEEP_MAPPING.present_in(fn)
            for cls in CONFIG_CLASS.find(tree) for fn in cls.body.body if m.matches(fn, _FROM_CONFIG)
        )

    @m.call_if_inside(CONFIG_CLASS.matcher)
    @m.call_if_inside(_FROM_CONFIG)
    @edit(_RETURNS_CLS, f"{CONFIG_CLASS.name}.from_config(): return cls(...)")
    def keep_mapping(
        self, original_node: cst.SimpleStatementLine, updated_node: cst.SimpleStatementLine
    ) -> cst.FlattenSentinel[cst.BaseStatement]:
        returned = updated_node.body[0]
        assert isinstance(returned, cst.Return) and returned.value is not None
        (construct,) = CONSTRUCT.fill(construct=returned.value)
        return cst.FlattenSentinel([construct.with_changes(leading_lines=updated_node.leading_lines), *KEEP_MAPPING.fill()])
