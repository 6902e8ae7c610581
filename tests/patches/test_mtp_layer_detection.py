from __future__ import annotations

import pytest

from patchkit.base.errors import AnchorError
from patchkit.authoring.patch import SkipPatch
from patchkit.patch import upstream_narrower_note
from patchkit.patches.mtp_layer_detection import MtpLayerDetection
from testing.patch_test import PatchTest

BEFORE = '''
class ModelConfig:
    def __init__(self, is_draft_model=False):
        self.is_draft_model = is_draft_model

    def _derive_model_shapes(self):
        self.num_nextn_predict_layers = getattr(
            self.hf_text_config, "num_nextn_predict_layers", None
        )
        self.vocab_size = self.hf_text_config.vocab_size
'''

AFTER = '''
class ModelConfig:
    def __init__(self, is_draft_model=False):
        self.is_draft_model = is_draft_model

    def _derive_model_shapes(self):
        self.num_nextn_predict_layers = getattr(
            self.hf_text_config, "num_nextn_predict_layers", None
        )
        if (
            self.num_nextn_predict_layers is None
            and self.is_draft_model
            and "mtp-layer-detection" not in map(str.strip, __import__("os").environ.get("SGLANG_PATCHKIT_DISABLE", "").split(","))
        ):
            self.num_nextn_predict_layers = getattr(
                self.hf_text_config, "mtp_num_hidden_layers", None
            )
        self.vocab_size = self.hf_text_config.vocab_size
'''

# 0.5.18's shape: the Qwen3.5 draft branch sets the text config too.
UPSTREAM_FIXED = '''
class ModelConfig:
    def _config_draft_model(self):
        if is_draft_model and self.hf_config.architectures[0] in [
            "Qwen3_5ForConditionalGeneration",
            "Qwen3_5ForCausalLM",
        ]:
            self.hf_config.architectures[0] = "Qwen3_5ForCausalLMMTP"
            self.hf_config.num_nextn_predict_layers = 1
            self.hf_text_config.num_nextn_predict_layers = 1

    def _derive_model_shapes(self):
        self.num_nextn_predict_layers = getattr(
            self.hf_text_config, "num_nextn_predict_layers", None
        )
'''


class TestMtpLayerDetection(PatchTest):
    PATCH = MtpLayerDetection
    PATH = "sglang/srt/configs/model_config.py"

    def test_inserts_fallback_after_the_read(self):
        self.assert_transform(BEFORE, AFTER)

    def test_single_quoted_anchor_matches_too(self):
        self.assert_transform(
            BEFORE.replace('"num_nextn_predict_layers"', "'num_nextn_predict_layers'"),
            AFTER.replace('"num_nextn_predict_layers"', "'num_nextn_predict_layers'"),
        )

    def test_upstream_fix_recognised(self):
        assert MtpLayerDetection().is_fixed_upstream(self.PATH, self.parse(UPSTREAM_FIXED))

    def test_upstream_fix_that_sets_the_depth_to_1_is_narrower_and_says_so(self):
        # status/matrix: the verdict stays upstream-fixed, its detail names what upstream leaves out.
        patch = MtpLayerDetection()
        assert patch.is_upstream_narrower(self.PATH, self.parse(UPSTREAM_FIXED))
        assert patch.notes(self.PATH, self.parse(UPSTREAM_FIXED)) == [upstream_narrower_note(patch.UPSTREAM_NARROWER)]
        verdict, _ = self.engine_run(UPSTREAM_FIXED)
        assert verdict == "upstream-fixed"
        # Upstream reading the checkpoint's depth instead: a fix as wide as the patch, nothing said.
        reads = UPSTREAM_FIXED.replace("            self.hf_text_config.num_nextn_predict_layers = 1\n",
                                       '            self.hf_text_config.num_nextn_predict_layers = getattr(\n'
                                       '                self.hf_text_config, "mtp_num_hidden_layers", 1)\n')
        assert patch.is_fixed_upstream(self.PATH, self.parse(reads))
        assert not patch.is_upstream_narrower(self.PATH, self.parse(reads)) and patch.notes(self.PATH, self.parse(reads)) == []

    def test_upstream_fallback_of_its_own_recognised(self):
        tree = self.parse(BEFORE.replace(
            "        self.vocab_size",
            '        self.num_nextn_predict_layers = self.num_nextn_predict_layers or getattr(\n'
            '            self.hf_text_config, "mtp_num_hidden_layers", None)\n        self.vocab_size',
        ))
        assert MtpLayerDetection().is_fixed_upstream(self.PATH, tree)

    def test_other_model_draft_branch_is_not_an_upstream_fix(self):
        tree = self.parse(UPSTREAM_FIXED.replace("Qwen3_5ForConditionalGeneration", "Glm5Next").replace(
            '"Qwen3_5ForCausalLM",', ""))
        assert not MtpLayerDetection().is_fixed_upstream(self.PATH, tree)

    def test_missing_anchor_is_an_error(self):
        with pytest.raises(AnchorError, match="anchor not found"):
            MtpLayerDetection().transform(self.PATH, self.parse("class ModelConfig:\n    def f(self):\n        pass\n"))

    def test_ambiguous_anchor_is_an_error(self):
        doubled = BEFORE + '''
    def _again(self):
        self.num_nextn_predict_layers = getattr(
            self.hf_text_config, "num_nextn_predict_layers", None
        )
'''
        with pytest.raises(AnchorError, match="ambiguous"):
            MtpLayerDetection().transform(self.PATH, self.parse(doubled))

    def test_anchor_outside_model_config_is_ignored(self):
        with pytest.raises(AnchorError, match="anchor not found"):
            MtpLayerDetection().transform(self.PATH, self.parse(BEFORE.replace("class ModelConfig", "class Other") + "class ModelConfig:\n    pass\n"))

    def test_file_without_model_config_is_skipped(self):
        with pytest.raises(SkipPatch):
            MtpLayerDetection().transform(self.PATH, self.parse("x = 1\n"))
