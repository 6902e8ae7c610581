"""Drive SGLang's real MambaComponent donation path with an exhausted mamba allocator.

Run in the behaviour venv with PYTHONPATH at an SGLang tree. The component and its methods are
SGLang's own (patched or not); only the pool around it is a stand-in: an allocator whose free
list is empty and that counts what it hands out and gets back. Prints one JSON object.
"""

import importlib
import json
import logging
from types import SimpleNamespace

import torch

CANDIDATES = (
    "sglang.srt.mem_cache.unified_cache.components.mamba",
    "sglang.srt.mem_cache.unified_cache.components.mamba_component",
    "sglang.srt.mem_cache.unified_cache_components.mamba_component",
)


def load_component_module():
    for name in CANDIDATES:
        try:
            return importlib.import_module(name)
        except ModuleNotFoundError as exc:
            if not name.startswith(exc.name or "\0"):
                raise
    raise SystemExit("no MambaComponent module in this SGLang")


class Allocator:
    """A mamba slot allocator with `free_slots` left; counts slots out and back."""

    def __init__(self, free_slots):
        self.free_list = list(range(100, 100 + free_slots))
        self.handed_out = 0
        self.given_back = 0

    def alloc(self, n):
        if len(self.free_list) < n:
            return None
        taken, self.free_list = self.free_list[:n], self.free_list[n:]
        self.handed_out += n
        return torch.tensor(taken, dtype=torch.int64)

    def free(self, slots):
        self.given_back += int(torch.as_tensor(slots).numel())


class Pool:
    def __init__(self, allocator):
        self.mamba_allocator = allocator
        self.mamba_pool = SimpleNamespace(copy_from=lambda src, dst: None, replayssm_write_pos=None)

    def translate_mamba_indices(self, indices):
        return indices

    def donate_mamba_ping_pong_slot(self, req, new_slot):
        return new_slot


class Cache:
    def __init__(self, allocator, extra_buffer):
        self.req_to_token_pool = Pool(allocator)
        self.enable_mamba_extra_buffer = extra_buffer
        self.evictions = 0

    def evict(self, params):  # <= 0.5.18
        self.evictions += 1

    evict_for_alloc = evict  # >= 0.5.19


def make_req(rid):
    kv = SimpleNamespace(mamba_pool_idx=torch.tensor(7), mamba_last_track_seqlen=64,
                         mamba_ping_pong_track_buffer=torch.tensor([1, 2]))
    # Both spellings: `req.*` up to 0.5.18, `req.kv.*` from 0.5.19.
    return SimpleNamespace(rid=rid, kv=kv, lock=None, **vars(kv))


def main():
    module = load_component_module()
    if hasattr(module, "get_exec"):  # 0.5.23 reads a runtime flag when a slot is short
        module.get_exec = lambda: SimpleNamespace(mamba=SimpleNamespace(enable_mamba_extra_buffer_lazy=False))
    records = []
    handler = logging.Handler()
    handler.emit = records.append
    logging.getLogger(module.__name__).addHandler(handler)

    results = {}
    for extra_buffer in (False, True):
        allocator = Allocator(free_slots=0)
        component = object.__new__(module.MambaComponent)
        component.cache = Cache(allocator, extra_buffer)
        component.enable_mamba_extra_buffer = extra_buffer  # <= 0.5.16 keeps the flag here
        req = make_req(f"req-{extra_buffer}")
        outcome = {}
        for chunk in range(2):  # two chunks of one request: logged once
            insert_params = SimpleNamespace(mamba_value=None)
            try:
                cache_len = component.prepare_for_caching_req(
                    req=req, insert_params=insert_params, token_ids_len=64, is_finished=False
                )
            except AssertionError as exc:
                outcome = {"error": f"AssertionError: {exc}"}
                break
            component.cleanup_after_caching_req(req, is_finished=False, insert_params=insert_params)
            outcome = {"cache_len": cache_len, "mamba_value": insert_params.mamba_value}
        outcome.update(
            handed_out=allocator.handed_out,
            given_back=allocator.given_back,
            evictions=component.cache.evictions,
            warnings=sum("mamba" in r.getMessage() for r in records if r.levelno >= logging.WARNING),
        )
        records.clear()
        results["extra_buffer" if extra_buffer else "no_buffer"] = outcome

    # With a free slot the donation still happens as before.
    allocator = Allocator(free_slots=1)
    component = object.__new__(module.MambaComponent)
    component.cache = Cache(allocator, False)
    component.enable_mamba_extra_buffer = False
    insert_params = SimpleNamespace(mamba_value=None)
    cache_len = component.prepare_for_caching_req(req=make_req("ok"), insert_params=insert_params, token_ids_len=64, is_finished=False)
    results["slot_free"] = {"cache_len": cache_len, "donated": insert_params.mamba_value.tolist()}
    results["module"] = module.__file__
    print(json.dumps(results))


main()
