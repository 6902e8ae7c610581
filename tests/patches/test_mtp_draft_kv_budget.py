from __future__ import annotations

import pytest

from patchkit.base.errors import AnchorError
from patchkit.authoring.patch import SkipPatch
from patchkit.patches.mtp_draft_kv_budget import MODEL_RUNNER, SPEC_AUX, MtpDraftKvBudget
from testing.patch_test import PatchTest

# 0.5.20+ shape of spec_aux_hidden_state.py (the path read through get_spec()).
SPEC_AUX_BEFORE = '''
def resolve_spec_aux_hidden_state_config(
    *,
    server_args,
    model_config,
    spec_algorithm,
    is_draft_worker,
):
    config = SpecAuxHiddenStateConfig()
    _resolve_eagle_aux_hidden_state(
        config=config,
        spec_algorithm=spec_algorithm,
        is_draft_worker=is_draft_worker,
    )
    _resolve_dflash_aux_hidden_state(config=config)
    return config


def _resolve_eagle_aux_hidden_state(*, config, spec_algorithm, is_draft_worker):
    if not ((spec_algorithm.is_eagle() or spec_algorithm.is_standalone()) and not is_draft_worker):
        return
    draft_model_config = model_config
    if get_spec().speculative_draft_model_path:
        draft_model_config = load(get_spec().speculative_draft_model_path)
    num_nextn_predict_layers = draft_model_config.num_nextn_predict_layers
    if num_nextn_predict_layers is not None:
        config.eagle_draft_num_layers = int(num_nextn_predict_layers)
    else:
        return
'''

SPEC_AUX_AFTER = SPEC_AUX_BEFORE.replace('''        is_draft_worker=is_draft_worker,
    )
    _resolve_dflash''', '''        is_draft_worker=is_draft_worker,
    )
    if (
        config.eagle_draft_num_layers is None
        and (spec_algorithm.is_eagle() or spec_algorithm.is_standalone())
        and not is_draft_worker
        and not get_spec().speculative_draft_model_path
        and (getattr(model_config.hf_text_config, "mtp_num_hidden_layers", 0) or 0) > 0
        and "mtp-draft-kv-budget" not in map(str.strip, __import__("os").environ.get("SGLANG_PATCHKIT_DISABLE", "").split(","))
    ):
        # patchkit mtp-draft-kv-budget: built-in MTP (no draft path) still has draft KV layers
        config.eagle_draft_num_layers = int(model_config.hf_text_config.mtp_num_hidden_layers)
    _resolve_dflash''')

# 0.5.14-0.5.15: resolved inline in ModelRunner.__init__, only with a draft path.
RUNNER_BEFORE = '''
class ModelRunner:
    def __init__(self, model_config, server_args, is_draft_worker):
        self.model_config = model_config
        self.eagle_draft_num_layers = None
        if (
            (self.spec_algorithm.is_eagle() or self.spec_algorithm.is_standalone())
            and not self.is_draft_worker
            and server_args.speculative_draft_model_path
        ):
            draft_model_config = self._build_model_config(server_args)
            self.eagle_draft_num_layers = int(draft_model_config.num_nextn_predict_layers)

        if self.spec_algorithm.is_dflash():
            pass
'''

RUNNER_AFTER = RUNNER_BEFORE.replace('''            self.eagle_draft_num_layers = int(draft_model_config.num_nextn_predict_layers)
''', '''            self.eagle_draft_num_layers = int(draft_model_config.num_nextn_predict_layers)
        if (
            self.eagle_draft_num_layers is None
            and (self.spec_algorithm.is_eagle() or self.spec_algorithm.is_standalone())
            and not self.is_draft_worker
            and not server_args.speculative_draft_model_path
            and (getattr(self.model_config.hf_text_config, "mtp_num_hidden_layers", 0) or 0) > 0
            and "mtp-draft-kv-budget" not in map(str.strip, __import__("os").environ.get("SGLANG_PATCHKIT_DISABLE", "").split(","))
        ):
            # patchkit mtp-draft-kv-budget: built-in MTP (no draft path) still has draft KV layers
            self.eagle_draft_num_layers = int(self.model_config.hf_text_config.mtp_num_hidden_layers)
''')


class TestSpecAuxResolver(PatchTest):
    PATCH = MtpDraftKvBudget
    PATH = SPEC_AUX

    def test_fallback_after_the_eagle_resolution(self):
        self.assert_transform(SPEC_AUX_BEFORE, SPEC_AUX_AFTER)

    def test_release_reading_the_path_from_server_args(self):
        before = SPEC_AUX_BEFORE.replace("get_spec().speculative", "server_args.speculative")
        self.assert_transform(before, SPEC_AUX_AFTER.replace("get_spec().speculative", "server_args.speculative"))

    def test_upstream_reading_mtp_layers_recognised(self):
        fixed = SPEC_AUX_BEFORE.replace("    else:\n        return\n", '''    elif getattr(model_config.hf_text_config, "mtp_num_hidden_layers", 0):
        config.eagle_draft_num_layers = model_config.hf_text_config.mtp_num_hidden_layers
    else:
        return
''')
        assert MtpDraftKvBudget().is_fixed_upstream(self.PATH, self.parse(fixed))

    def test_resolver_without_model_config_is_an_error(self):
        with pytest.raises(AnchorError, match="model_config"):
            MtpDraftKvBudget().transform(self.PATH, self.parse(SPEC_AUX_BEFORE.replace("    model_config,\n", "")))

    def test_file_without_resolver_is_skipped(self):
        with pytest.raises(SkipPatch):
            MtpDraftKvBudget().transform(self.PATH, self.parse("x = 1\n"))


class TestModelRunnerResolver(PatchTest):
    PATCH = MtpDraftKvBudget
    PATH = MODEL_RUNNER

    def test_fallback_after_the_draft_path_branch(self):
        self.assert_transform(RUNNER_BEFORE, RUNNER_AFTER)

    def test_runner_that_does_not_resolve_the_count_is_skipped(self):
        # 0.5.10-0.5.13 (no EAGLE draft KV budget at all) and 0.5.16+ (resolved in spec_aux).
        with pytest.raises(SkipPatch):
            MtpDraftKvBudget().transform(self.PATH, self.parse("class ModelRunner:\n    def __init__(self):\n        self.x = 1\n"))

    def test_upstream_reading_mtp_layers_recognised(self):
        fixed = RUNNER_BEFORE.replace("            draft_model_config = self._build_model_config(server_args)\n",
                              "            draft_model_config = self._build_model_config(server_args)\n"
                              "            n = getattr(self.model_config.hf_text_config, 'mtp_num_hidden_layers', None)\n")
        assert MtpDraftKvBudget().is_fixed_upstream(self.PATH, self.parse(fixed))
