from __future__ import annotations

import pytest

from patchkit.base.errors import AnchorError
from patchkit.authoring.patch import SkipPatch
from patchkit.patches.autoround_packed_mapping import AUTO_ROUND, AutoroundPackedMapping
from testing.patch_test import PatchTest

BEFORE = '''
class AutoRoundConfig(QuantizationConfig):
    @classmethod
    def from_config(cls, config):
        return cls(
            weight_bits=cls.get_from_keys(config, ["bits"]),
            group_size=cls.get_from_keys(config, ["group_size"]),
        )
'''

AFTER = '''
class AutoRoundConfig(QuantizationConfig):
    @classmethod
    def from_config(cls, config):
        quant_config = cls(
            weight_bits=cls.get_from_keys(config, ["bits"]),
            group_size=cls.get_from_keys(config, ["group_size"]),
        )
        if "autoround-packed-mapping" not in map(str.strip, __import__("os").environ.get("SGLANG_PATCHKIT_DISABLE", "").split(",")):  # patchkit autoround-packed-mapping
            quant_config.packed_modules_mapping.update(config.get("packed_modules_mapping") or {})
        return quant_config
'''


class TestAutoroundPackedMapping(PatchTest):
    PATCH = AutoroundPackedMapping
    PATH = AUTO_ROUND

    def test_keeps_the_mapping(self):
        self.assert_transform(BEFORE, AFTER)

    def test_larger_from_config_of_0_5_18(self):
        before = BEFORE.replace("        return cls(", "        def has_any_key(keys):\n            return any(k in config for k in keys)\n\n        return cls(")
        after = AFTER.replace("        quant_config = cls(", "        def has_any_key(keys):\n            return any(k in config for k in keys)\n\n        quant_config = cls(")
        self.assert_transform(before, after)

    def test_upstream_reading_the_mapping_recognised(self):
        fixed = BEFORE.replace("        )\n", '        )\n        x.packed_modules_mapping = config.get("packed_modules_mapping", {})\n', 1)
        assert AutoroundPackedMapping().is_fixed_upstream(self.PATH, self.parse(fixed))

    def test_missing_return_cls_is_an_error(self):
        with pytest.raises(AnchorError, match="return cls"):
            AutoroundPackedMapping().transform(self.PATH, self.parse(BEFORE.replace("return cls(", "return make(")))

    def test_file_without_the_class_is_skipped(self):
        with pytest.raises(SkipPatch):
            AutoroundPackedMapping().transform(self.PATH, self.parse("x = 1\n"))
