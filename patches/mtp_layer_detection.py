"""mtp-layer-detection: read Qwen3.5/3.8's MTP depth from `mtp_num_hidden_layers`."""

from __future__ import annotations

import libcst as cst
import libcst.matchers as m

from patchkit.matchers import (
    classes,
    exactly_one,
    find_class,
    insert_after,
    functions,
    parse_statements,
    replace_method,
    self_attr,
    statements,
    string,
)
from patchkit.patch import Patch, SkipPatch

MODEL_CONFIG = "sglang/srt/configs/model_config.py"

# `self.num_nextn_predict_layers = getattr(self.hf_text_config, "num_nextn_predict_layers", None)`
_READS_NEXTN = m.SimpleStatementLine(
    body=[
        m.Assign(
            targets=[m.AssignTarget(target=self_attr("num_nextn_predict_layers"))],
            value=m.Call(
                func=m.Name("getattr"),
                args=[m.Arg(self_attr("hf_text_config")), m.Arg(string("num_nextn_predict_layers")), m.DoNotCare()],
            ),
        )
    ]
)

# The fallback this patch inserts (the draft-only guard keeps target models unchanged: a
# target with MTP layers and pipeline parallelism would otherwise trip SGLang's PP/MTP assert).
_FALLBACK_SOURCE = """\
if self.num_nextn_predict_layers is None and self.is_draft_model:
    self.num_nextn_predict_layers = getattr(
        self.hf_text_config, "mtp_num_hidden_layers", None
    )
"""

_FALLBACK = m.If(
    test=m.BooleanOperation(
        left=m.Comparison(
            left=self_attr("num_nextn_predict_layers"),
            comparisons=[m.ComparisonTarget(operator=m.Is(), comparator=m.Name("None"))],
        ),
        operator=m.And(),
        right=self_attr("is_draft_model"),
    ),
    body=m.IndentedBlock(
        body=[
            m.SimpleStatementLine(
                body=[
                    m.Assign(
                        targets=[m.AssignTarget(target=self_attr("num_nextn_predict_layers"))],
                        value=m.Call(
                            func=m.Name("getattr"),
                            args=[m.Arg(self_attr("hf_text_config")), m.Arg(string("mtp_num_hidden_layers")), m.DoNotCare()],
                        ),
                    )
                ]
            )
        ]
    ),
)

_QWEN3_5_ARCH = string("Qwen3_5ForConditionalGeneration")
_MENTIONS_QWEN3_5 = m.If(test=m.MatchIfTrue(lambda test: bool(m.findall(test, _QWEN3_5_ARCH))))
# Upstream's fix (0.5.18, the draft rewrite): the Qwen3.5 draft branch also sets the text config.
_SETS_TEXT_NEXTN = m.Assign(targets=[m.AssignTarget(target=self_attr("hf_text_config", "num_nextn_predict_layers"))])
_GETATTR_MTP = m.Call(func=m.Name("getattr"), args=[m.DoNotCare(), m.Arg(string("mtp_num_hidden_layers")), m.ZeroOrMore()])


def _lines_reading_mtp(fn: cst.FunctionDef) -> list[cst.CSTNode]:
    """Statement lines of `fn` that read mtp_num_hidden_layers, except inside our fallback."""
    ours = {id(line) for fallback in statements(fn, _FALLBACK) for line in statements(fallback, m.SimpleStatementLine())}
    return [
        line for line in statements(fn, m.SimpleStatementLine())
        if id(line) not in ours and m.findall(line, _GETATTR_MTP)
    ]


class MtpLayerDetection(Patch):
    ID = "mtp-layer-detection"
    TITLE = "Read the MTP draft depth from text_config.mtp_num_hidden_layers"
    RATIONALE = (
        "Qwen3.5/3.8 checkpoints declare their MTP depth as text_config.mtp_num_hidden_layers. "
        "ModelConfig reads only num_nextn_predict_layers from hf_text_config, which the draft "
        "rewrite sets on the outer hf_config only, so it reads None; the EAGLE draft-layer count "
        "falls back to all 64 layers and the KV cell is scaled by 1 + 64/16 = 5x (KV pool 1/5)."
    )
    UPSTREAM = ("sglang 0.5.18: Qwen3.5 draft rewrite sets hf_text_config.num_nextn_predict_layers = 1",)
    DROP_WHEN = "drop for releases >= 0.5.18 (the draft rewrite sets hf_text_config.num_nextn_predict_layers)"
    APPLIES_TO = ">=0.5.14"
    TARGETS = (MODEL_CONFIG,)
    ANCHOR_SYMBOLS = ("ModelConfig",)
    WATCH = ("ModelConfig._derive_model_shapes", "ModelConfig._config_draft_model")

    def _model_config(self, path: str, tree: cst.Module) -> cst.ClassDef:
        if not classes(tree, "ModelConfig"):
            raise SkipPatch(f"{path} has no ModelConfig class")
        return find_class(tree, "ModelConfig", path)

    def is_applied(self, path: str, tree: cst.Module) -> bool:
        return any(statements(cls, _FALLBACK) for cls in classes(tree, "ModelConfig"))

    def is_fixed_upstream(self, path: str, tree: cst.Module) -> bool:
        for cls in classes(tree, "ModelConfig"):
            # A Qwen3.5 draft branch that also sets hf_text_config.num_nextn_predict_layers.
            for branch in statements(cls, _MENTIONS_QWEN3_5):
                if statements(branch, m.SimpleStatementLine(body=[_SETS_TEXT_NEXTN])):
                    return True
            # Or an upstream fallback of its own to mtp_num_hidden_layers, beside the read.
            for fn in functions(cls):
                if statements(fn, _READS_NEXTN) and _lines_reading_mtp(fn):
                    return True
        return False

    def transform(self, path: str, tree: cst.Module) -> cst.Module:
        cls = self._model_config(path, tree)
        if self.is_applied(path, tree):
            return tree
        hits = [(fn, stmt) for fn in functions(cls) for stmt in statements(fn, _READS_NEXTN)]
        fn, anchor = exactly_one(
            hits, 'ModelConfig: self.num_nextn_predict_layers = getattr(self.hf_text_config, "num_nextn_predict_layers", None)', path
        )
        new_fn = insert_after(fn, anchor, parse_statements(_FALLBACK_SOURCE))
        return replace_method(tree, cls, fn, new_fn)

