"""mtp-layer-detection: read Qwen3.5/3.8's MTP depth from `mtp_num_hidden_layers`.

Runtime switch: `SGLANG_PATCHKIT_DISABLE=mtp-layer-detection` skips the fallback, read when
`ModelConfig` derives its shapes (once per config built, at start-up), so the draft counts its
layers as the release does.
"""

from __future__ import annotations

import libcst as cst
import libcst.matchers as m

from patchkit.anchor import Anchor
from patchkit.edits import edit
from patchkit.launch_trigger import Trigger
from patchkit.matchers import self_attr, string
from patchkit.patch import Patch
from patchkit.runtime_switch import declared, on
from patchkit.template import Snippet, walk_statements

ID = "mtp-layer-detection"
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
FALLBACK = Snippet("""
    if (
        self.num_nextn_predict_layers is None
        and self.is_draft_model
        and {on}
    ):
        self.num_nextn_predict_layers = getattr(
            self.hf_text_config, "mtp_num_hidden_layers", None
        )
""", on=on(ID))

# Every matcher of the patch needs `num_nextn_predict_layers`: only the members that mention it are parsed.
MODEL_CONFIG_CLASS = Anchor("ModelConfig", parts=(":num_nextn_predict_layers",), marks=(FALLBACK,),
                            watch=("_derive_model_shapes", "_config_draft_model"))

_QWEN3_5_ARCH = string("Qwen3_5ForConditionalGeneration")
_MENTIONS_QWEN3_5 = m.If(test=m.MatchIfTrue(lambda test: bool(m.findall(test, _QWEN3_5_ARCH))))
# Upstream's fix (0.5.18, the draft rewrite): the Qwen3.5 draft branch also sets the text config.
_SETS_TEXT_NEXTN = m.Assign(targets=[m.AssignTarget(target=self_attr("hf_text_config", "num_nextn_predict_layers"))])
_SETS_TEXT_NEXTN_TO_A_NUMBER = m.Assign(targets=[m.AssignTarget(target=self_attr("hf_text_config", "num_nextn_predict_layers"))],
                                        value=m.Integer())
_GETATTR_MTP = m.Call(func=m.Name("getattr"), args=[m.DoNotCare(), m.Arg(string("mtp_num_hidden_layers")), m.ZeroOrMore()])


def _lines_reading_mtp(fn: cst.FunctionDef) -> list[cst.CSTNode]:
    """Statement lines of `fn` that read mtp_num_hidden_layers, except inside our fallback."""
    ours = {id(line) for fallback in FALLBACK.find(fn) for line in walk_statements(fallback)}
    return [
        line for line in walk_statements(fn)
        if isinstance(line, cst.SimpleStatementLine) and id(line) not in ours and m.findall(line, _GETATTR_MTP)
    ]


def _qwen3_5_draft_branches(tree: cst.Module) -> list[cst.CSTNode]:
    """The `if`s of ModelConfig that name the Qwen3.5 architecture (its draft rewrite among them)."""
    return [branch for cls in MODEL_CONFIG_CLASS.find(tree) for branch in walk_statements(cls) if m.matches(branch, _MENTIONS_QWEN3_5)]


class MtpLayerDetection(Patch):
    ID = ID
    TITLE = "Read the MTP draft depth from text_config.mtp_num_hidden_layers"
    RATIONALE = (
        "Qwen3.5/3.8 checkpoints declare their MTP depth as text_config.mtp_num_hidden_layers. "
        "ModelConfig reads only num_nextn_predict_layers from hf_text_config, which the draft "
        "rewrite sets on the outer hf_config only, so it reads None; the EAGLE draft-layer count "
        "falls back to all 64 layers and the KV cell is scaled by 1 + 64/16 = 5x (KV pool 1/5)."
    )
    UPSTREAM = ("sglang 0.5.18: Qwen3.5 draft rewrite sets hf_text_config.num_nextn_predict_layers = 1",)
    DROP_WHEN = "drop for releases >= 0.5.18 (the draft rewrite sets hf_text_config.num_nextn_predict_layers)"
    UPSTREAM_NARROWER = ("the Qwen3.5 draft rewrite sets the MTP depth to 1 instead of reading "
                         "text_config.mtp_num_hidden_layers: the same for one-layer MTP heads, one layer for a "
                         "checkpoint with more")
    APPLIES_TO = ">=0.5.10,<0.5.18"  # 0.5.18 fixed it upstream (the manifests: upstream-fixed from there)
    LAUNCH = Trigger(
        level="warning", speculative=("EAGLE", "EAGLE3", "NEXTN", "STANDALONE"), model=("mtp-draft", "mtp-depth-unread"),
        flags=("speculative_draft_model_path",),
        why="the MTP draft is counted as {draft_layers} layers, the KV cell is scaled by 1 + "
            "{draft_layers}/{full_attention_layers} = {kv_scale}x")
    TARGETS = (MODEL_CONFIG,)
    ANCHORS = {MODEL_CONFIG: (MODEL_CONFIG_CLASS,)}
    RUNTIME_SWITCH = declared(ID)

    def is_upstream_narrower(self, path: str, tree: cst.Module) -> bool:
        # 0.5.18's shape: the Qwen3.5 draft branch sets the depth to a number, not to the
        # checkpoint's mtp_num_hidden_layers.
        return any(m.matches(line, m.SimpleStatementLine(body=[_SETS_TEXT_NEXTN_TO_A_NUMBER]))
                   for branch in _qwen3_5_draft_branches(tree) for line in walk_statements(branch))

    def is_fixed_upstream(self, path: str, tree: cst.Module) -> bool:
        for cls in MODEL_CONFIG_CLASS.find(tree):
            # Upstream's fix (0.5.18): a Qwen3.5 draft branch that also sets
            # hf_text_config.num_nextn_predict_layers.
            for branch in walk_statements(cls):
                if m.matches(branch, _MENTIONS_QWEN3_5) and any(
                    m.matches(line, m.SimpleStatementLine(body=[_SETS_TEXT_NEXTN])) for line in walk_statements(branch)
                ):
                    return True
            # Or an upstream fallback of its own to mtp_num_hidden_layers, beside the read.
            for fn in cls.body.body:
                if isinstance(fn, cst.FunctionDef) and any(m.matches(s, _READS_NEXTN) for s in walk_statements(fn)) and _lines_reading_mtp(fn):
                    return True
        return False

    @m.call_if_inside(MODEL_CONFIG_CLASS.matcher)
    @edit(_READS_NEXTN, 'ModelConfig: self.num_nextn_predict_layers = getattr(self.hf_text_config, "num_nextn_predict_layers", None)')
    def add_fallback(
        self, original_node: cst.SimpleStatementLine, updated_node: cst.SimpleStatementLine
    ) -> cst.FlattenSentinel[cst.BaseStatement]:
        return cst.FlattenSentinel([updated_node, *FALLBACK.fill()])
