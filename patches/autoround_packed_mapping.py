"""autoround-packed-mapping: keep the packed_modules_mapping the weight loader passes to
AutoRoundConfig.from_config(), so fused modules see that their parts stay at 16 bits.

The mapping is merged into the one the base QuantizationConfig creates, right after the
constructor call; a model that sets its own mapping later (`update_packed_modules_mapping`
or assignment, as qwen3_5_text / qwen3_next do) still has the last word. Only the return
statement of from_config changes, so both constructor shapes (before and after 0.5.18's
GPTQ-style keys) are handled alike.
"""

from __future__ import annotations

import libcst as cst
import libcst.matchers as m

from patchkit.matchers import classes, exactly_one, find_class, find_method, methods, parse_statements, replace_member, replace_statement, statements, string
from patchkit.patch import Patch, SkipPatch

AUTO_ROUND = "sglang/srt/layers/quantization/auto_round.py"
CLASS = "AutoRoundConfig"

_RETURNS_CLS = m.SimpleStatementLine(body=[m.Return(value=m.Call(func=m.Name("cls")))])
_KEEP_SOURCE = """\
quant_config.packed_modules_mapping.update(config.get("packed_modules_mapping") or {})  # patchkit autoround-packed-mapping
return quant_config
"""
_KEEPS = m.SimpleStatementLine(body=[m.Expr(value=m.Call(
    func=m.Attribute(value=m.Attribute(attr=m.Name("packed_modules_mapping")), attr=m.Name("update")),
    args=[m.Arg(m.BooleanOperation(left=m.Call(args=[m.Arg(string("packed_modules_mapping"))])))],
))])
_READS_MAPPING = m.Call(args=[m.Arg(string("packed_modules_mapping")), m.ZeroOrMore()])


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
    TARGETS = (AUTO_ROUND,)
    ANCHOR_SYMBOLS = (CLASS,)
    WATCH = (f"{CLASS}.from_config", f"{CLASS}.get_layer_config")

    def _from_config(self, tree: cst.Module) -> list[cst.FunctionDef]:
        return [fn for cls in classes(tree, CLASS) for fn in methods(cls, "from_config")]

    def is_applied(self, path: str, tree: cst.Module) -> bool:
        return any(statements(fn, _KEEPS) for fn in self._from_config(tree))

    def is_fixed_upstream(self, path: str, tree: cst.Module) -> bool:
        return any(m.findall(fn, _READS_MAPPING) and not statements(fn, _KEEPS) for fn in self._from_config(tree))

    def transform(self, path: str, tree: cst.Module) -> cst.Module:
        if not classes(tree, CLASS):
            raise SkipPatch(f"{path} has no {CLASS}")
        if self.is_applied(path, tree):
            return tree
        cls = find_class(tree, CLASS, path)
        from_config = find_method(cls, "from_config", path)
        returned = exactly_one(statements(from_config, _RETURNS_CLS), f"{CLASS}.from_config(): return cls(...)", path)
        construct = cst.SimpleStatementLine(
            body=[cst.Assign(targets=[cst.AssignTarget(cst.Name("quant_config"))], value=returned.body[0].value)],  # type: ignore[attr-defined]
            leading_lines=returned.leading_lines,
        )
        new_fn = replace_statement(from_config, returned, [construct, *parse_statements(_KEEP_SOURCE)])
        return replace_member(tree, cls, replace_member(cls, from_config, new_fn))
