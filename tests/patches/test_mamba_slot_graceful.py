from __future__ import annotations

import pytest

from patchkit.base.errors import AnchorError
from patchkit.authoring.patch import SkipPatch
from patchkit.patches.mamba_slot_graceful import COMPONENT_PATHS, LEGACY, SKIP_METHOD, MambaSlotGraceful
from testing.patch_test import PatchTest

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

    def prepare_for_caching_req(self, req, insert_params, token_ids_len, is_finished):
        if is_finished:
            return 0
        if self.cache.enable_mamba_extra_buffer:
            new_slot = self._alloc_mamba_slot(req)
            mamba_value_donated = donate(req, new_slot)
        else:
            mamba_value_donated = self._alloc_mamba_slot(req)
        insert_params.mamba_value = mamba_value_donated
        return token_ids_len

    def build_external_linker_transfer(self, transfer):
        transfer.device_indices = self._alloc_mamba_slot()
'''

COMPONENT_AFTER = '''
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
            assert slot is not None or "mamba-slot-graceful" not in map(str.strip, __import__("os").environ.get("SGLANG_PATCHKIT_DISABLE", "").split(",")), "Can not alloc mamba cache"
        return slot
''' + SKIP_METHOD.code(indent=4) + '''
    def prepare_for_caching_req(self, req, insert_params, token_ids_len, is_finished):
        if is_finished:
            return 0
        if self.cache.enable_mamba_extra_buffer:
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

    def build_external_linker_transfer(self, transfer):
        transfer.device_indices = self._alloc_mamba_slot()
'''

LEGACY_BEFORE = '''
class MambaRadixCache(BasePrefixCache):
    def cache_unfinished_req(self, req, chunked=False):
        def _skip_cache_unfinished_req(req):
            return

        mamba_value_donated = self._alloc_mamba_slot()
        self.insert(mamba_value_donated)

    def _alloc_mamba_slot(self) -> torch.Tensor:
        slot = self.req_to_token_pool.mamba_allocator.alloc(1)
        if slot is None:
            self.evict(EvictParams(num_tokens=0, mamba_num=1))
            slot = self.req_to_token_pool.mamba_allocator.alloc(1)
            assert slot is not None, "Can not alloc mamba cache"
        return slot
'''


class TestUnifiedComponent(PatchTest):
    PATCH = MambaSlotGraceful
    PATH = COMPONENT_PATHS[-1]

    def test_donations_skip_and_other_callers_keep_the_assert(self):
        self.assert_transform(COMPONENT_BEFORE, COMPONENT_AFTER)

    def test_upstream_graceful_allocation_recognised(self):
        # Upstream's fix has two parts: the allocation no longer asserts, and the donation
        # handles a failed allocation itself.
        fixed = COMPONENT_BEFORE.replace('            assert slot is not None, "Can not alloc mamba cache"\n', "").replace(
            "            mamba_value_donated = self._alloc_mamba_slot(req)\n",
            "            mamba_value_donated = self._alloc_mamba_slot(req)\n            if mamba_value_donated is None:\n                return 0\n",
        )
        assert MambaSlotGraceful().is_fixed_upstream(self.PATH, self.parse(fixed))

    def test_assert_gone_without_handling_is_not_taken_for_a_fix(self):
        # Only the absence of the bug's shape (a refactor moved the assert): the patch is still
        # needed, and says so by failing on its missing anchor instead of a silent upstream-fixed.
        moved = COMPONENT_BEFORE.replace('            assert slot is not None, "Can not alloc mamba cache"\n', "")
        assert not MambaSlotGraceful().is_fixed_upstream(self.PATH, self.parse(moved))
        with pytest.raises(AnchorError, match="Can not alloc mamba cache"):
            MambaSlotGraceful().transform(self.PATH, self.parse(moved))

    def test_call_in_another_shape_is_ambiguous(self):
        odd = COMPONENT_BEFORE.replace("        insert_params.mamba_value = mamba_value_donated\n",
                                       "        insert_params.mamba_value = f(self._alloc_mamba_slot())\n")
        with pytest.raises(AnchorError, match="ambiguous"):
            MambaSlotGraceful().transform(self.PATH, self.parse(odd))

    def test_file_without_a_mamba_cache_class_is_skipped(self):
        with pytest.raises(SkipPatch):
            MambaSlotGraceful().transform(self.PATH, self.parse("class Other:\n    pass\n"))


class TestLegacyMambaRadixCache(PatchTest):
    PATCH = MambaSlotGraceful
    PATH = LEGACY

    def test_legacy_donation_takes_its_skip_exit(self):
        patched = MambaSlotGraceful().transform(self.PATH, self.parse(LEGACY_BEFORE)).code
        assert (
            "        mamba_value_donated = self._patchkit_try_alloc_mamba_slot()\n"
            "        if mamba_value_donated is None:\n"
            "            self._patchkit_skip_mamba_donation(req)\n"
            "            return _skip_cache_unfinished_req(req)\n"
        ) in patched
        assert MambaSlotGraceful().is_applied(self.PATH, self.parse(patched))
