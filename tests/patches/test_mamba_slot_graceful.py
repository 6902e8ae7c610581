from __future__ import annotations

import pytest

from patchkit.base.errors import AnchorError
from patchkit.authoring.patch import SkipPatch
from patchkit.patches.mamba_slot_graceful import COMPONENT_PATHS, LEGACY, SKIP_METHOD, MambaSlotGraceful
from testing.patch_test import PatchTest

SWITCH = '"mamba-slot-graceful" not in map(str.strip, __import__("os").environ.get("SGLANG_PATCHKIT_DISABLE", "").split(","))'

# The unified component as 0.5.22+ has it (trimmed): donations with and without int8 checkpoints,
# a finished branch that has its own `return 0`, the linker's load, and the copy-on-write left alone.
COMPONENT_BEFORE = '''
class MambaComponent(TreeComponent):
    def finalize_match_result_in_cache(self, params, result):
        dst_index = self.cache.req_to_token_pool.mamba_allocator.alloc(1)
        assert dst_index is not None, "Can not alloc mamba cache"

    def _alloc_mamba_slot(self, req: Optional[Req] = None) -> torch.Tensor:
        """Allocate one mamba pool slot, evicting if necessary."""
        slot = self.cache.req_to_token_pool.mamba_allocator.alloc(1)
        if slot is None:
            self.cache.evict_for_alloc(EvictParams(num_tokens=0, mamba_num=1))
            slot = self.cache.req_to_token_pool.mamba_allocator.alloc(1)
            assert slot is not None, "Can not alloc mamba cache"
        return slot

    def _alloc_int8_ckpt_slot(self) -> torch.Tensor:
        slot = self.int8_ckpt_pool.alloc(1)
        if slot is None:
            self.cache.evict(EvictParams(num_tokens=0, mamba_num=1))
            slot = self.int8_ckpt_pool.alloc(1)
            assert slot is not None, "Can not alloc int8 mamba checkpoint slot"
        return slot

    def _commit_int8_checkpoint(self, active_slots: torch.Tensor) -> torch.Tensor:
        ckpt_slot = self._alloc_int8_ckpt_slot()
        self.int8_ckpt_pool.store_from_active(self.cache.req_to_token_pool.mamba_pool, active_slots, ckpt_slot)
        return ckpt_slot

    def prepare_for_caching_req(self, req, insert_params, token_ids_len, is_finished):
        if is_finished:
            checkpoint = self._select_finished_checkpoint(req, token_ids_len)
            if checkpoint is None:
                return 0
            if self.int8_ckpt_pool is not None:
                insert_params.mamba_value = self._commit_int8_checkpoint(active_value)
            else:
                insert_params.mamba_value = active_value
            return cache_len
        if self.int8_ckpt_pool is not None:
            if self.cache.enable_mamba_extra_buffer:
                new_slot = self._alloc_mamba_slot(req)
                src_active = donate(req, new_slot)
                mamba_value_donated = self._commit_int8_checkpoint(src_active)
                self.cache.req_to_token_pool.mamba_allocator.free(src_active)
            else:
                mamba_value_donated = self._commit_int8_checkpoint(req.kv.mamba_pool_idx.view(-1))
        elif self.cache.enable_mamba_extra_buffer:
            new_slot = self._alloc_mamba_slot(req)
            mamba_value_donated = donate(req, new_slot)
        else:
            mamba_value_donated = self._alloc_mamba_slot(req)
        insert_params.mamba_value = mamba_value_donated
        return token_ids_len

    def build_external_linker_transfer(self, phase, node, keys):
        transfer = PoolTransfer(keys=[keys[-1]])
        if phase == LinkerTransferPhase.LOAD:
            transfer.device_indices = self._alloc_mamba_slot()
        return transfer
'''

COMPONENT_AFTER = ('''
class MambaComponent(TreeComponent):
    def finalize_match_result_in_cache(self, params, result):
        dst_index = self.cache.req_to_token_pool.mamba_allocator.alloc(1)
        assert dst_index is not None, "Can not alloc mamba cache"

    def _alloc_mamba_slot(self, req: Optional[Req] = None) -> torch.Tensor:
        """Allocate one mamba pool slot, evicting if necessary."""
        slot = self.cache.req_to_token_pool.mamba_allocator.alloc(1)
        if slot is None:
            self.cache.evict_for_alloc(EvictParams(num_tokens=0, mamba_num=1))
            slot = self.cache.req_to_token_pool.mamba_allocator.alloc(1)
            assert slot is not None, "Can not alloc mamba cache"
        return slot

    def _patchkit_try_alloc_mamba_slot(self, req: Optional[Req] = None):
        """patchkit mamba-slot-graceful: like _alloc_mamba_slot, but None when no slot can be had (it asserts as _alloc_mamba_slot does when SGLANG_PATCHKIT_DISABLE lists mamba-slot-graceful)."""
        slot = self.cache.req_to_token_pool.mamba_allocator.alloc(1)
        if slot is None:
            self.cache.evict_for_alloc(EvictParams(num_tokens=0, mamba_num=1))
            slot = self.cache.req_to_token_pool.mamba_allocator.alloc(1)
            assert slot is not None or SWITCH, "Can not alloc mamba cache"
        return slot
''' + SKIP_METHOD.code(indent=4) + '''
    def _alloc_int8_ckpt_slot(self) -> torch.Tensor:
        slot = self.int8_ckpt_pool.alloc(1)
        if slot is None:
            self.cache.evict(EvictParams(num_tokens=0, mamba_num=1))
            slot = self.int8_ckpt_pool.alloc(1)
            assert slot is not None, "Can not alloc int8 mamba checkpoint slot"
        return slot

    def _patchkit_try_alloc_int8_ckpt_slot(self):
        slot = self.int8_ckpt_pool.alloc(1)
        if slot is None:
            self.cache.evict(EvictParams(num_tokens=0, mamba_num=1))
            slot = self.int8_ckpt_pool.alloc(1)
            assert slot is not None or SWITCH, "Can not alloc int8 mamba checkpoint slot"
        return slot

    def _commit_int8_checkpoint(self, active_slots: torch.Tensor) -> torch.Tensor:
        ckpt_slot = self._alloc_int8_ckpt_slot()
        self.int8_ckpt_pool.store_from_active(self.cache.req_to_token_pool.mamba_pool, active_slots, ckpt_slot)
        return ckpt_slot

    def _patchkit_try_commit_int8_checkpoint(self, active_slots: torch.Tensor):
        ckpt_slot = self._patchkit_try_alloc_int8_ckpt_slot()
        if ckpt_slot is None:
            return None
        self.int8_ckpt_pool.store_from_active(self.cache.req_to_token_pool.mamba_pool, active_slots, ckpt_slot)
        return ckpt_slot

    def prepare_for_caching_req(self, req, insert_params, token_ids_len, is_finished):
        if is_finished:
            checkpoint = self._select_finished_checkpoint(req, token_ids_len)
            if checkpoint is None:
                return 0
            if self.int8_ckpt_pool is not None:
                insert_params.mamba_value = self._patchkit_try_commit_int8_checkpoint(active_value)
                if insert_params.mamba_value is None:
                    self._patchkit_skip_mamba_donation(req)
                    return 0
            else:
                insert_params.mamba_value = active_value
            return cache_len
        if self.int8_ckpt_pool is not None:
            if self.cache.enable_mamba_extra_buffer:
                new_slot = self._patchkit_try_alloc_mamba_slot(req)
                if new_slot is None:
                    self._patchkit_skip_mamba_donation(req)
                    return 0
                src_active = donate(req, new_slot)
                mamba_value_donated = self._patchkit_try_commit_int8_checkpoint(src_active)
                self.cache.req_to_token_pool.mamba_allocator.free(src_active)
                if mamba_value_donated is None:
                    self._patchkit_skip_mamba_donation(req)
                    return 0
            else:
                mamba_value_donated = self._patchkit_try_commit_int8_checkpoint(req.kv.mamba_pool_idx.view(-1))
                if mamba_value_donated is None:
                    self._patchkit_skip_mamba_donation(req)
                    return 0
        elif self.cache.enable_mamba_extra_buffer:
            new_slot = self._patchkit_try_alloc_mamba_slot(req)
            if new_slot is None:
                self._patchkit_skip_mamba_donation(req)
                return 0
            mamba_value_donated = donate(req, new_slot)
        else:
            mamba_value_donated = self._patchkit_try_alloc_mamba_slot(req)
            if mamba_value_donated is None:
                self._patchkit_skip_mamba_donation(req)
                return 0
        insert_params.mamba_value = mamba_value_donated
        return token_ids_len

    def build_external_linker_transfer(self, phase, node, keys):
        transfer = PoolTransfer(keys=[keys[-1]])
        if phase == LinkerTransferPhase.LOAD:
            transfer.device_indices = self._patchkit_try_alloc_mamba_slot()
            if transfer.device_indices is None:
                import logging

                logging.getLogger(__name__).warning(
                    "No free mamba cache slot to load an external prefix; recomputing it (patchkit mamba-slot-graceful)."
                )
                return None
        return transfer
''').replace("SWITCH", SWITCH)

# 0.5.16-0.5.21: the finished branch has no exit of its own, so its int8 checkpoint keeps the assert.
NO_FINISHED_EXIT = ("            checkpoint = self._select_finished_checkpoint(req, token_ids_len)\n"
                    "            if checkpoint is None:\n"
                    "                return 0\n")

LEGACY_BEFORE = '''
class MambaRadixCache(BasePrefixCache):
    def cache_unfinished_req(self, req, chunked=False):
        def _skip_cache_unfinished_req(req):
            return

        if self.int8_ckpt_pool is not None:
            new_slot = self._alloc_mamba_slot()
            src_active = donate(req, new_slot)
            mamba_value_donated = self._commit_int8_checkpoint(src_active)
            self.req_to_token_pool.mamba_allocator.free(src_active)
        else:
            mamba_value_donated = self._alloc_mamba_slot()
        self.insert(mamba_value_donated)
        req.kv.mamba_last_track_seqlen = None

    def _alloc_mamba_slot(self) -> torch.Tensor:
        slot = self.req_to_token_pool.mamba_allocator.alloc(1)
        if slot is None:
            self.evict(EvictParams(num_tokens=0, mamba_num=1))
            slot = self.req_to_token_pool.mamba_allocator.alloc(1)
            assert slot is not None, "Can not alloc mamba cache"
        return slot

    def _alloc_int8_ckpt_slot(self) -> torch.Tensor:
        """Allocate one int8 checkpoint slot, evicting cached states if the pool is full."""
        slot = self.int8_ckpt_pool.alloc(1)
        if slot is None:
            self.evict(EvictParams(num_tokens=0, mamba_num=1))
            slot = self.int8_ckpt_pool.alloc(1)
            assert slot is not None, "Can not alloc int8 mamba checkpoint slot"
        return slot

    def _commit_int8_checkpoint(self, active_slots: torch.Tensor) -> torch.Tensor:
        """Quantize the active-pool state into a fresh int8 checkpoint slot."""
        ckpt_slot = self._alloc_int8_ckpt_slot()
        self.int8_ckpt_pool.store_from_active(self.req_to_token_pool.mamba_pool, active_slots, ckpt_slot)
        return ckpt_slot
'''


class TestUnifiedComponent(PatchTest):
    PATCH = MambaSlotGraceful
    PATH = COMPONENT_PATHS[-1]

    def test_donations_int8_checkpoints_and_linker_load_skip_copy_on_write_keeps_the_assert(self):
        self.assert_transform(COMPONENT_BEFORE, COMPONENT_AFTER)

    def test_finished_checkpoint_keeps_the_assert_where_the_release_has_no_exit_there(self):
        before = COMPONENT_BEFORE.replace(NO_FINISHED_EXIT, "")
        after = COMPONENT_AFTER.replace(NO_FINISHED_EXIT, "").replace(
            "                insert_params.mamba_value = self._patchkit_try_commit_int8_checkpoint(active_value)\n"
            "                if insert_params.mamba_value is None:\n"
            "                    self._patchkit_skip_mamba_donation(req)\n"
            "                    return 0\n",
            "                insert_params.mamba_value = self._commit_int8_checkpoint(active_value)\n")
        self.assert_transform(before, after)

    def test_without_int8_checkpoints_only_the_slot_twin_is_added(self):
        before = self._without_int8(COMPONENT_BEFORE)
        patched = MambaSlotGraceful().transform(self.PATH, self.parse(before)).code
        assert "_patchkit_try_alloc_mamba_slot" in patched and "_patchkit_try_commit_int8_checkpoint" not in patched

    @pytest.mark.parametrize(("old", "new", "error"), [
        # A statement reading the checkpoint after the commit would read None.
        ("                self.cache.req_to_token_pool.mamba_allocator.free(src_active)\n",
         "                log(mamba_value_donated)\n", "read mamba_value_donated"),
        # The int8 allocator without its commit.
        ("    def _commit_int8_checkpoint(", "    def _store_int8_checkpoint(", "_commit_int8_checkpoint"),
        # A commit that does not take its slot from the int8 allocator.
        ("        ckpt_slot = self._alloc_int8_ckpt_slot()\n", "        ckpt_slot = self.int8_ckpt_pool.alloc(1)\n",
         "_alloc_int8_ckpt_slot"),
        # The donation's allocation in another shape would escape the guard.
        ("        insert_params.mamba_value = mamba_value_donated\n",
         "        insert_params.mamba_value = f(self._alloc_mamba_slot())\n", "ambiguous"),
        # The assert gone without the donation handling a failed allocation: only the absence of
        # the bug's shape (a refactor moved it), so the patch fails on its anchor, no silent
        # upstream-fixed.
        ('            assert slot is not None, "Can not alloc mamba cache"\n', "", "Can not alloc mamba cache"),
    ])
    def test_anchor_missing_or_ambiguous(self, old, new, error):
        odd = COMPONENT_BEFORE.replace(old, new)
        assert odd != COMPONENT_BEFORE
        assert not MambaSlotGraceful().is_fixed_upstream(self.PATH, self.parse(odd))
        with pytest.raises(AnchorError, match=error):
            MambaSlotGraceful().transform(self.PATH, self.parse(odd))

    def test_a_commit_the_class_does_not_define_is_an_error(self):
        odd = COMPONENT_BEFORE.replace("    def _commit_int8_checkpoint(", "    def _store_int8_checkpoint(").replace(
            "    def _alloc_int8_ckpt_slot(", "    def _alloc_int8_slot(")
        with pytest.raises(AnchorError, match="does not define"):
            MambaSlotGraceful().transform(self.PATH, self.parse(odd))

    def test_upstream_graceful_allocation_recognised_only_with_the_int8_assert_gone_too(self):
        # Upstream's fix has two parts: the allocations no longer assert, and the donation
        # handles a failed allocation itself.
        def fixed(source: str) -> str:
            return source.replace('            assert slot is not None, "Can not alloc mamba cache"\n', "").replace(
                "            mamba_value_donated = self._alloc_mamba_slot(req)\n",
                "            mamba_value_donated = self._alloc_mamba_slot(req)\n            if mamba_value_donated is None:\n"
                "                return 0\n")

        assert MambaSlotGraceful().is_fixed_upstream(self.PATH, self.parse(fixed(self._without_int8(COMPONENT_BEFORE))))
        assert not MambaSlotGraceful().is_fixed_upstream(self.PATH, self.parse(fixed(COMPONENT_BEFORE)))

    def test_file_without_a_mamba_cache_class_is_skipped(self):
        with pytest.raises(SkipPatch):
            MambaSlotGraceful().transform(self.PATH, self.parse("class Other:\n    pass\n"))

    @staticmethod
    def _without_int8(source: str) -> str:
        """The sample as 0.5.13-0.5.15 have it: no int8 checkpoints at all."""
        lines = source.splitlines(keepends=True)
        start = next(i for i, line in enumerate(lines) if "def _alloc_int8_ckpt_slot" in line)
        end = next(i for i, line in enumerate(lines) if "def prepare_for_caching_req" in line)
        source = "".join(lines[:start] + lines[end:])
        return source.replace(
            "            if self.int8_ckpt_pool is not None:\n"
            "                insert_params.mamba_value = self._commit_int8_checkpoint(active_value)\n"
            "            else:\n"
            "                insert_params.mamba_value = active_value\n",
            "            insert_params.mamba_value = active_value\n").replace(
            "        if self.int8_ckpt_pool is not None:\n"
            "            if self.cache.enable_mamba_extra_buffer:\n"
            "                new_slot = self._alloc_mamba_slot(req)\n"
            "                src_active = donate(req, new_slot)\n"
            "                mamba_value_donated = self._commit_int8_checkpoint(src_active)\n"
            "                self.cache.req_to_token_pool.mamba_allocator.free(src_active)\n"
            "            else:\n"
            "                mamba_value_donated = self._commit_int8_checkpoint(req.kv.mamba_pool_idx.view(-1))\n"
            "        elif", "        if")


class TestLegacyMambaRadixCache(PatchTest):
    PATCH = MambaSlotGraceful
    PATH = LEGACY

    def test_legacy_donation_and_its_int8_checkpoint_take_the_skip_exit(self):
        patched = MambaSlotGraceful().transform(self.PATH, self.parse(LEGACY_BEFORE)).code
        assert (
            "            mamba_value_donated = self._patchkit_try_alloc_mamba_slot()\n"
            "            if mamba_value_donated is None:\n"
            "                self._patchkit_skip_mamba_donation(req)\n"
            "                return _skip_cache_unfinished_req(req)\n"
        ) in patched
        # After a skipped int8 commit the ping-pong slot holding the tracked state was swapped out
        # and given back: the release's own last statement (which its skip exit does not run) first.
        assert (
            "            mamba_value_donated = self._patchkit_try_commit_int8_checkpoint(src_active)\n"
            "            self.req_to_token_pool.mamba_allocator.free(src_active)\n"
            "            if mamba_value_donated is None:\n"
            "                req.kv.mamba_last_track_seqlen = None\n"
            "                self._patchkit_skip_mamba_donation(req)\n"
            "                return _skip_cache_unfinished_req(req)\n"
        ) in patched
        assert '"""patchkit mamba-slot-graceful: like _alloc_int8_ckpt_slot, but None' in patched
        assert MambaSlotGraceful().is_applied(self.PATH, self.parse(patched))
