from __future__ import annotations

import pytest

from patchkit.authoring.patch import SkipPatch
from patchkit.base.errors import AnchorError
from patchkit.patches.moe_w2_presharded import COPY_WHOLE, MOE_LAYER, MoeW2Presharded
from testing.patch_test import PatchTest

# 0.5.23's FusedMoE, cut to the two methods the patch reads: the loader's scale branch (the group
# load, and the model-weight load after it that is left alone) and _load_w2's narrow sized from
# the checkpoint.
BEFORE = '''
class FusedMoE(torch.nn.Module):
    def _load_w2(self, expert_data, shard_dim, shard_id, loaded_weight, is_bias=False):
        shard_size = expert_data.shape[shard_dim]
        if self.use_padded_loading:
            expert_data, loaded_weight = narrow_padded_param_and_loaded_weight(expert_data, loaded_weight)
        else:
            if not is_bias and not self.use_presharded_weights:
                loaded_shard_size = loaded_weight.shape[shard_dim] // self.moe_tp_size
                loaded_weight = loaded_weight.narrow(
                    shard_dim, loaded_shard_size * self.moe_tp_rank, loaded_shard_size
                )
        expert_data.copy_(loaded_weight)

    def _weight_loader_impl(self, param, loaded_weight, weight_name, shard_id, expert_id):
        expert_data = param.data[expert_id]
        if "scale" in weight_name or "zero" in weight_name:
            quant_method = getattr(param, "quant_method", None)
            if quant_method == FusedMoeWeightScaleSupported.CHANNEL.value:
                self._load_per_channel_weight_scale(shard_id=shard_id, expert_data=expert_data)
            elif quant_method in [
                FusedMoeWeightScaleSupported.GROUP.value,
                FusedMoeWeightScaleSupported.BLOCK.value,
            ]:
                self._load_model_weight_or_group_weight_scale(
                    shard_id=shard_id,
                    shard_dim=shard_dim,
                    loaded_weight=loaded_weight,
                    expert_data=expert_data,
                )
            return
        if "weight" in weight_name:
            self._load_model_weight_or_group_weight_scale(
                shard_id=shard_id,
                shard_dim=shard_dim,
                loaded_weight=loaded_weight,
                expert_data=expert_data,
            )
'''

AFTER = BEFORE.replace('''                FusedMoeWeightScaleSupported.BLOCK.value,
            ]:
''', '''                FusedMoeWeightScaleSupported.BLOCK.value,
            ]:
''' + COPY_WHOLE.code(indent=16))

# To 0.5.16: _load_w2 narrows by the buffer's size (a full-size scale fails loudly there).
BEFORE_OLD = BEFORE.replace('''                loaded_shard_size = loaded_weight.shape[shard_dim] // self.moe_tp_size
                loaded_weight = loaded_weight.narrow(
                    shard_dim, loaded_shard_size * self.moe_tp_rank, loaded_shard_size
                )
''', '''                loaded_weight = loaded_weight.narrow(
                    shard_dim, shard_size * tp_rank, shard_size
                )
''')


class TestMoeW2Presharded(PatchTest):
    PATCH = MoeW2Presharded
    PATH = MOE_LAYER

    def test_group_scale_load_copies_full_scales_whole(self):
        assert AFTER != BEFORE
        self.assert_transform(BEFORE, AFTER)

    def test_the_copy_is_switchable_and_acts_only_on_marked_full_size_w2_scales(self):
        code = COPY_WHOLE.code()
        assert 'shard_id == "w2"' in code and 'getattr(param, "load_full_w2", False)' in code
        assert "loaded_weight.shape == expert_data.shape" in code
        assert '"moe-w2-presharded" not in map(str.strip, __import__("os").environ.get("SGLANG_PATCHKIT_DISABLE"' in code

    def test_not_applicable_where_load_w2_narrows_by_the_buffer_size(self):
        assert self.engine_run(BEFORE_OLD)[0] == "not-applicable"
        with pytest.raises(SkipPatch, match="fails loudly"):
            MoeW2Presharded().transform(self.PATH, self.parse(BEFORE_OLD))

    @pytest.mark.parametrize("reads", [
        'getattr(param, "load_full_w2", False)',
        "getattr(param, 'load_full_w2')",
        "param.load_full_w2",
    ])
    def test_upstream_reading_load_full_w2_recognised(self, reads):
        fixed = BEFORE.replace('''        expert_data = param.data[expert_id]
''', f'''        expert_data = param.data[expert_id]
        load_full = {reads}
''')
        assert MoeW2Presharded().is_fixed_upstream(self.PATH, self.parse(fixed))
        assert self.engine_run(fixed)[0] == "upstream-fixed"

    def test_another_attribute_is_not_upstream_s_fix(self):
        other = BEFORE.replace('''        expert_data = param.data[expert_id]
''', '''        expert_data = param.data[expert_id]
        is_transposed = getattr(param, "is_transposed", False)
''')
        assert not MoeW2Presharded().is_fixed_upstream(self.PATH, self.parse(other))

    def test_no_group_scale_load_is_a_missing_anchor(self):
        source = BEFORE.replace('''                self._load_model_weight_or_group_weight_scale(
                    shard_id=shard_id,
                    shard_dim=shard_dim,
                    loaded_weight=loaded_weight,
                    expert_data=expert_data,
                )
            return''', '''                self._load_group_scale(param, loaded_weight)
            return''')
        with pytest.raises(AnchorError, match="anchor not found"):
            MoeW2Presharded().transform(self.PATH, self.parse(source))

    def test_file_without_the_layer_is_skipped(self):
        with pytest.raises(SkipPatch):
            MoeW2Presharded().transform(self.PATH, self.parse("class FusedMoeWeightScaleSupported:\n    pass\n"))


def test_the_rationale_says_only_what_was_seen():
    # Issue 42.2: the behaviour test saw rank 1 of TP 2 load half of its act-order scales, silently; what the
    # kernel computes from them was not checked on a GPU, so the rationale claims no answer of the server.
    text = " ".join(MoeW2Presharded.RATIONALE.split())
    assert "rank 1 loads half of its act-order scales" in text and "silently" in text
    assert "garbage" not in text and "not checked on a GPU" in text
