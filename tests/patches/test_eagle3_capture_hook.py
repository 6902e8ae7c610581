from __future__ import annotations

import pytest

from patchkit.authoring.patch import SkipPatch
from patchkit.patches.eagle3_capture_hook import QWEN3_5, QWEN3_5_TEXT, WRAPPER_METHOD, Eagle3CaptureHook
from testing.patch_test import PatchTest

BEFORE = '''
class Qwen3_5ForCausalLM(nn.Module):
    def set_dflash_layers_to_capture(self, layers_to_capture: list[int]):
        self.layers_to_capture = layers_to_capture
        for layer_id in self.layers_to_capture:
            setattr(self.layers[layer_id], "_is_layer_to_capture", True)


class Qwen3_5ForConditionalGeneration(Qwen3VLForConditionalGeneration):
    def load_weights(self, weights):
        return set()
'''

AFTER = '''
class Qwen3_5ForCausalLM(nn.Module):
    def set_dflash_layers_to_capture(self, layers_to_capture: list[int]):
        self.layers_to_capture = layers_to_capture
        for layer_id in self.layers_to_capture:
            setattr(self.layers[layer_id], "_is_layer_to_capture", True)

    def set_eagle3_layers_to_capture(self, layers_to_capture: list[int]):
        self.layers_to_capture = layers_to_capture
        for layer_id in self.layers_to_capture:
            setattr(self.layers[layer_id], "_is_layer_to_capture", True)


class Qwen3_5ForConditionalGeneration(Qwen3VLForConditionalGeneration):
    def load_weights(self, weights):
        return set()
''' + WRAPPER_METHOD.code(indent=4)

# 0.5.22: the decoder has the method, the VL base delegates; no override on the wrapper.
UPSTREAM = BEFORE.replace(
    "\n\nclass Qwen3_5ForConditionalGeneration",
    "\n    def set_eagle3_layers_to_capture(self, layers_to_capture):\n        self.layers_to_capture = layers_to_capture\n"
    "\n\nclass Qwen3_5ForConditionalGeneration",
)


class TestDecoderAndWrapper(PatchTest):
    PATCH = Eagle3CaptureHook
    PATH = QWEN3_5

    def test_adds_decoder_method_and_wrapper_override(self):
        self.assert_transform(BEFORE, AFTER)

    def test_0_5_22_is_upstream_fixed(self):
        assert Eagle3CaptureHook().is_fixed_upstream(self.PATH, self.parse(UPSTREAM))

    def test_before_capture_machinery_is_skipped(self):
        without = BEFORE.replace("set_dflash_layers_to_capture", "something_else")
        with pytest.raises(SkipPatch, match="no layer-capture machinery"):
            Eagle3CaptureHook().transform(self.PATH, self.parse(without))


    def test_the_moe_wrapper_gets_the_override_too(self):
        """Every VL wrapper in the file gets the override (PARTS parse each one's method)."""
        moe = "\n\nclass Qwen3_5MoeForConditionalGeneration(Qwen3_5ForConditionalGeneration):\n    def forward(self):\n        pass\n"
        patched = Eagle3CaptureHook().transform(self.PATH, self.parse(BEFORE + moe)).code
        assert patched.count("    def set_eagle3_layers_to_capture(") == 3  # the decoder and both wrappers
        assert Eagle3CaptureHook().is_applied(self.PATH, self.parse(patched))


class TestTextOnlyClass(PatchTest):
    PATCH = Eagle3CaptureHook
    PATH = QWEN3_5_TEXT

    def test_text_class_gets_the_0_5_22_method(self):
        before = "class Qwen3_5ForCausalLM(nn.Module):\n    def forward(self):\n        pass\n"
        patched = Eagle3CaptureHook().transform(self.PATH, self.parse(before)).code
        assert "        num_layers = len(self.model.layers)\n" in patched
        assert Eagle3CaptureHook().is_applied(self.PATH, self.parse(patched))
