from __future__ import annotations

import pytest

from patchkit.errors import AnchorError
from patchkit.patch import SkipPatch
from patchkit.patches.spec_mamba_lazy_buffer import OVERRIDES, TO_LAZY, SpecMambaLazyBuffer
from testing.patch_test import PatchTest

MAMBA_HOOK = "sglang/srt/arg_groups/mamba_hook.py"
SERVER_ARGS = "sglang/srt/server_args.py"

BEFORE = '''
@register_post_process
def _mamba_radix_cache_resolution(view: Any) -> dict:
    """Resolve hybrid-Mamba cache settings using the current page size and overlap policy."""
    if view.disable_radix_cache:
        return {}

    declared: Dict[str, Any] = {"uses_mamba_radix_cache": True}
    if view.mamba_radix_cache_strategy == "auto":
        wants_overlap = not view.disable_overlap_schedule
        wants_paging = view.page_size is not None and view.page_size > 1
        if (wants_overlap or wants_paging) and supports_mamba_cache_extra_buffer(view, hf_config):
            declared["mamba_radix_cache_strategy"] = "extra_buffer"
        else:
            declared["mamba_radix_cache_strategy"] = "no_buffer"
            declared["disable_overlap_schedule"] = True
    return declared


@register_post_process
def _dsa_kv_cache_dtype_default(view: Any) -> dict:
    return {}
'''

AFTER = BEFORE.replace(
    '            declared["mamba_radix_cache_strategy"] = "extra_buffer"\n',
    '            declared["mamba_radix_cache_strategy"] = "extra_buffer"\n' + TO_LAZY.code(indent=12, view="view", declared="declared"),
)

# 0.5.19+: the validator in arg_groups/mamba_hook.py refuses lazy only under PD disaggregation.
ALLOWS = '''
def validate_mamba_extra_buffer(view, hf_config: Any, *, mamba_cache_chunk_size_of):
    assert supports_mamba_cache_extra_buffer(view, hf_config)
    if view.mamba_radix_cache_strategy == "extra_buffer_lazy":
        assert view.disaggregation_mode == "null", (
            "extra_buffer_lazy unsupported under PD disaggregation; use --mamba-radix-cache-strategy extra_buffer."
        )
    if view.speculative_num_draft_tokens is not None:
        assert view.mamba_track_interval >= view.speculative_num_draft_tokens
'''

# How 0.5.14 - 0.5.17 refuse it (in ServerArgs, server_args.py).
REFUSALS = {
    "0.5.14": '''
    def _validate_mamba_extra_buffer(self, model_arch: str):
        if self.speculative_num_draft_tokens is not None:
            assert (
                not self.enable_mamba_extra_buffer_lazy()
            ), "extra_buffer_lazy unsupported with spec."
            assert self.mamba_track_interval >= self.speculative_num_draft_tokens
''',
    "0.5.15": '''
    def _validate_mamba_extra_buffer(self, view, model_arch: str):
        if view.speculative_num_draft_tokens is not None:
            assert (
                view.mamba_radix_cache_strategy != "extra_buffer_lazy"
            ), "extra_buffer_lazy unsupported with spec."
''',
    "0.5.17": '''
    def _validate_mamba_extra_buffer(self, view, model_arch: str):
        if view.mamba_radix_cache_strategy == "extra_buffer_lazy":
            assert view.disaggregation_mode == "null"
            algo = (view.speculative_algorithm or "").upper()
            assert algo != "DFLASH", "extra_buffer_lazy unsupported with DFLASH"
''',
}


def server_args(method: str) -> str:
    return "class ServerArgs:\n    model_path: str = None\n" + method


class TestSpecMambaLazyBuffer(PatchTest):
    PATCH = SpecMambaLazyBuffer
    PATH = OVERRIDES
    CONSULTED = {MAMBA_HOOK: ALLOWS}

    def test_auto_resolves_to_lazy_under_speculative_decoding(self):
        self.assert_transform(BEFORE, AFTER)

    def test_the_same_rule_read_from_server_args(self):
        # 0.5.18: the validator is still a ServerArgs method, and it allows lazy with a draft.
        self.CONSULTED = {SERVER_ARGS: server_args(as_server_args_method(ALLOWS))}
        self.assert_transform(BEFORE, AFTER)

    @pytest.mark.parametrize("release", sorted(REFUSALS))
    def test_not_applicable_where_the_release_refuses_lazy_with_a_draft(self, release):
        self.CONSULTED = {SERVER_ARGS: server_args(REFUSALS[release])}
        verdict, _ = self.engine_run(BEFORE)
        assert verdict == "not-applicable"

    def test_pd_refusal_alone_does_not_stop_it(self):
        assert self.engine_run(BEFORE)[0] == "pending"

    def test_no_validator_is_a_missing_anchor(self):
        self.CONSULTED = {SERVER_ARGS: "class ServerArgs:\n    pass\n"}
        verdict, detail = self.engine_run(BEFORE)
        assert verdict == "failed", detail
        with pytest.raises(AnchorError, match="extra_buffer validator"):
            SpecMambaLazyBuffer().precondition(lambda rel: self.CONSULTED.get(rel, "").encode() or None)

    def test_upstream_choosing_lazy_itself_is_recognised(self):
        fixed = BEFORE.replace('            declared["mamba_radix_cache_strategy"] = "extra_buffer"\n',
                               '            declared["mamba_radix_cache_strategy"] = (\n'
                               '                "extra_buffer_lazy" if view.speculative_algorithm else "extra_buffer"\n'
                               '            )\n')
        assert SpecMambaLazyBuffer().is_fixed_upstream(self.PATH, self.parse(fixed))

    def test_auto_branch_without_extra_buffer_is_a_missing_anchor(self):
        # 0.5.10-0.5.13's shape: auto always becomes no_buffer.
        odd = BEFORE.replace('            declared["mamba_radix_cache_strategy"] = "extra_buffer"\n',
                             '            declared["mamba_radix_cache_strategy"] = "no_buffer"\n')
        with pytest.raises(AnchorError, match="extra_buffer"):
            SpecMambaLazyBuffer().transform(self.PATH, self.parse(odd))

    def test_file_without_the_resolution_is_skipped(self):
        with pytest.raises(SkipPatch):
            SpecMambaLazyBuffer().transform(self.PATH, self.parse("def other(view):\n    return {}\n"))


def as_server_args_method(source: str) -> str:
    """mamba_hook's validator as the ServerArgs method 0.5.18 has."""
    return "".join(f"    {line}" if line.strip() else line for line in source.splitlines(keepends=True)).replace(
        "def validate_mamba_extra_buffer(view,", "def _validate_mamba_extra_buffer(self, view,")
