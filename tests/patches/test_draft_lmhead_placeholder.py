from __future__ import annotations

import pytest

from patchkit.base.errors import AnchorError
from patchkit.authoring.patch import SkipPatch
from patchkit.patches.draft_lmhead_placeholder import QWEN3_5_MTP, QWEN3_NEXT_MTP, DraftLmheadPlaceholder
from testing.patch_test import PatchTest

BEFORE = '''
class Qwen3_5ForCausalLMMTP(nn.Module):
    def __init__(self, config, quant_config=None, prefix=""):
        self.model = Qwen3_5ForCausalLM(config)

        if get_parallel().pp_group.is_last_rank:
            if config.tie_word_embeddings:
                self.lm_head = self.model.embed_tokens
            else:
                self.lm_head = ParallelLMHead(config.vocab_size, config.hidden_size)

        self.logits_processor = LogitsProcessor(config)

    def load_weights(self, weights):
        for name, loaded_weight in weights:
            if name in (
                "model.embed_tokens.weight",
                "model.language_model.embed_tokens.weight",
            ):
                param_name = "model.embed_tokens.weight"
                continue
'''

AFTER = '''
class Qwen3_5ForCausalLMMTP(nn.Module):
    def __init__(self, config, quant_config=None, prefix=""):
        self.model = Qwen3_5ForCausalLM(config)

        if get_parallel().pp_group.is_last_rank:
            if config.tie_word_embeddings:
                self.lm_head = self.model.embed_tokens
            else:
                self.lm_head = ParallelLMHead(config.vocab_size, config.hidden_size)

        if get_parallel().pp_group.world_size == 1 and "draft-lmhead-placeholder" not in map(str.strip, __import__("os").environ.get("SGLANG_PATCHKIT_DISABLE", "").split(",")):
            # patchkit draft-lmhead-placeholder: the target's embed/lm_head replace these in
            # set_embed_and_head(); dropping them now keeps ~2 x vocab x hidden out of the KV budget.
            self.model.embed_tokens.weight = torch.nn.Parameter(
                self.model.embed_tokens.weight.new_empty(0), requires_grad=False
            )
            if not config.tie_word_embeddings:
                self.lm_head.weight = torch.nn.Parameter(
                    self.lm_head.weight.new_empty(0), requires_grad=False
                )

        self.logits_processor = LogitsProcessor(config)

    def load_weights(self, weights):
        for name, loaded_weight in weights:
            if name in (
                "model.embed_tokens.weight",
                "model.language_model.embed_tokens.weight",
            ):
                if self.model.embed_tokens.weight.numel() == 0:
                    continue  # patchkit draft-lmhead-placeholder: the target's embedding replaces it
                param_name = "model.embed_tokens.weight"
                continue
'''

SHARES = '''
    def set_embed_and_head(self, embed, head):
        self.model.embed_tokens.weight = embed
        self.lm_head.weight = head
'''


class TestDraftLmheadPlaceholder(PatchTest):
    PATCH = DraftLmheadPlaceholder
    PATH = QWEN3_5_MTP

    def test_placeholders_and_load_guard(self):
        self.assert_transform(BEFORE, AFTER)

    def test_older_release_without_embedding_load(self):
        before = BEFORE[: BEFORE.index("    def load_weights")].rstrip() + "\n"
        after = AFTER[: AFTER.index("    def load_weights")].rstrip() + "\n"
        self.assert_transform(before.replace("get_parallel().pp_group", "get_pp_group()"),
                              after.replace("get_parallel().pp_group", "get_pp_group()"))

    def test_upstream_fix_without_draft_head_recognised(self):
        # #38147's shape: no head allocated anywhere in the draft class, the target's shared in.
        fixed = BEFORE.replace("ParallelLMHead(config.vocab_size, config.hidden_size)", "None") + SHARES
        assert DraftLmheadPlaceholder().is_fixed_upstream(self.PATH, self.parse(fixed))

    def test_head_moved_into_a_helper_is_not_a_fix(self):
        # A refactor that allocates the head in another method still needs the patch: not
        # upstream-fixed, and the transform fails on its missing anchor (never a silent skip).
        moved = BEFORE.replace("ParallelLMHead(config.vocab_size, config.hidden_size)", "self._build_head(config)") + SHARES + (
            "\n    def _build_head(self, config):\n        return ParallelLMHead(config.vocab_size, config.hidden_size)\n"
        )
        assert not DraftLmheadPlaceholder().is_fixed_upstream(self.PATH, self.parse(moved))
        without_sharing = BEFORE.replace("ParallelLMHead(config.vocab_size, config.hidden_size)", "None")
        assert not DraftLmheadPlaceholder().is_fixed_upstream(self.PATH, self.parse(without_sharing))

    def test_every_embedding_load_branch_is_guarded(self):
        # Two branches in one load_weights: the old identity splicing guarded only the first.
        second = BEFORE + (
            '            if name in ("model.embed_tokens.weight",):\n'
            "                continue\n"
        )
        patched = DraftLmheadPlaceholder().transform(self.PATH, self.parse(second)).code
        assert patched.count("if self.model.embed_tokens.weight.numel() == 0:") == 2

    def test_missing_head_branch_is_an_error(self):
        broken = BEFORE.replace("get_parallel().pp_group.is_last_rank", "True")
        with pytest.raises(AnchorError, match="anchor not found"):
            DraftLmheadPlaceholder().transform(self.PATH, self.parse(broken))

    def test_file_without_the_class_is_skipped(self):
        with pytest.raises(SkipPatch):
            DraftLmheadPlaceholder().transform(self.PATH, self.parse("x = 1\n"))


# Qwen3-Next (every release): the head is built unconditionally, after `self.pp_group = ...`.
NEXT_BEFORE = '''
class Qwen3NextForCausalLMMTP(Qwen3NextForCausalLM):
    def __init__(self, config, quant_config=None, prefix=""):
        nn.Module.__init__(self)
        self.config = config
        self.pp_group = get_pp_group()
        self.fc = nn.Linear(2 * config.hidden_size, config.hidden_size, bias=False)
        self.model = Qwen3NextModel(config, quant_config, prefix=add_prefix("model", prefix), is_nextn=True)
        self.lm_head = ParallelLMHead(
            config.vocab_size,
            config.hidden_size,
            quant_config=quant_config,
            prefix=add_prefix("model.shared_head.head", prefix),
        )
        self.logits_processor = LogitsProcessor(config)

    def load_weights(self, weights, is_mtp=False):
        super().load_weights(weights, is_mtp=True)
'''

NEXT_AFTER = NEXT_BEFORE.replace('''        )
        self.logits_processor''', '''        )

        if self.pp_group.world_size == 1 and "draft-lmhead-placeholder" not in map(str.strip, __import__("os").environ.get("SGLANG_PATCHKIT_DISABLE", "").split(",")):
            # patchkit draft-lmhead-placeholder: the target's embed/lm_head replace these in
            # set_embed_and_head(); dropping them now keeps ~2 x vocab x hidden out of the KV budget.
            self.model.embed_tokens.weight = torch.nn.Parameter(
                self.model.embed_tokens.weight.new_empty(0), requires_grad=False
            )
            if not config.tie_word_embeddings:
                self.lm_head.weight = torch.nn.Parameter(
                    self.lm_head.weight.new_empty(0), requires_grad=False
                )
        self.logits_processor''')


class TestQwen3NextDraft(PatchTest):
    PATCH = DraftLmheadPlaceholder
    PATH = QWEN3_NEXT_MTP

    def test_placeholders_after_the_unconditional_head(self):
        assert NEXT_AFTER != NEXT_BEFORE
        self.assert_transform(NEXT_BEFORE, NEXT_AFTER)

    def test_release_reading_the_pp_group_from_get_parallel(self):
        self.assert_transform(NEXT_BEFORE.replace("get_pp_group()", "get_parallel().pp_group"),
                              NEXT_AFTER.replace("get_pp_group()", "get_parallel().pp_group"))

    def test_upstream_fix_without_draft_head_recognised(self):
        fixed = NEXT_BEFORE.replace("self.lm_head = ParallelLMHead(", "self.lm_head = SharedHead(")
        assert DraftLmheadPlaceholder().is_fixed_upstream(self.PATH, self.parse(fixed))

    def test_head_moved_into_a_helper_is_not_a_fix(self):
        """A head built in another method still needs the patch (PARTS' `:ParallelLMHead` parses it):
        not upstream-fixed, and the transform fails on its missing anchor."""
        moved = NEXT_BEFORE.replace("self.lm_head = ParallelLMHead(", "self.lm_head = self._build_head(") + (
            "\n    def _build_head(self, *args, **kwargs):\n        return ParallelLMHead(*args, **kwargs)\n")
        assert not DraftLmheadPlaceholder().is_fixed_upstream(self.PATH, self.parse(moved))
        with pytest.raises(AnchorError, match="anchor not found"):
            DraftLmheadPlaceholder().transform(self.PATH, self.parse(moved))

    def test_upstream_fix_with_its_own_set_embed_and_head_recognised(self):
        """A draft on nn.Module that shares the target's tensors through its own set_embed_and_head."""
        fixed = NEXT_BEFORE.replace("(Qwen3NextForCausalLM):", "(nn.Module):").replace(
            "self.lm_head = ParallelLMHead(", "self.lm_head = SharedHead(") + (
            "\n    def set_embed_and_head(self, embed, head):\n        self.model.embed_tokens.weight = embed\n")
        assert DraftLmheadPlaceholder().is_fixed_upstream(self.PATH, self.parse(fixed))

    def test_head_without_pp_group_is_an_error(self):
        with pytest.raises(AnchorError, match="pp_group"):
            DraftLmheadPlaceholder().transform(self.PATH, self.parse(NEXT_BEFORE.replace("        self.pp_group = get_pp_group()\n", "")))

    def test_qwen3_5_class_in_the_qwen3_next_file_is_skipped(self):
        with pytest.raises(SkipPatch):
            DraftLmheadPlaceholder().transform(self.PATH, self.parse("class Qwen3_5ForCausalLMMTP:\n    pass\n"))
