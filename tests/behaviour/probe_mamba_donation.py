"""Drive SGLang's real mamba cache code at every site mamba-slot-graceful changes, with the pool it
allocates from exhausted, in one process per release.

- `no_buffer` / `extra_buffer`: the unified MambaComponent's prefix donation (`prepare_for_caching_req`
  of an unfinished request, two chunks) with no mamba slot left;
- `int8_no_buffer` / `int8_extra_buffer` (where the component has int8 checkpoints): the same donation
  with a mamba slot free but no int8 checkpoint slot;
- `int8_finished`: a finished request's int8 checkpoint with no int8 slot left;
- `linker_load` (where the component builds external-cache transfers): the linker's load with no
  mamba slot left;
- `legacy` / `legacy_int8` (where the release has the legacy MambaRadixCache): its
  `cache_unfinished_req` with no mamba slot, and with a mamba slot but no int8 slot;
- `slot_free`: a donation with a free slot, done as before.

The cache classes and their methods are SGLang's own (patched or not); only the pools and the
request around them are stand-ins that count what they hand out and get back. Run in the behaviour
venv with PYTHONPATH at an SGLang tree; prints one JSON object.
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


def load(names):
    for name in names:
        try:
            return importlib.import_module(name)
        except ModuleNotFoundError as exc:
            if not name.startswith(exc.name or "\0"):
                raise
    return None


class Allocator:
    """A slot allocator with `free_slots` left; counts slots out and back."""

    def __init__(self, free_slots):
        self.free_list = list(range(100, 100 + free_slots))
        self.handed_out = 0
        self.given_back = 0
        self.stored = 0

    def alloc(self, n):
        if len(self.free_list) < n:
            return None
        taken, self.free_list = self.free_list[:n], self.free_list[n:]
        self.handed_out += n
        return torch.tensor(taken, dtype=torch.int64)

    def free(self, slots):
        self.given_back += int(torch.as_tensor(slots).numel())

    def store_from_active(self, mamba_pool, active, slot):  # the int8 checkpoint pool
        self.stored += 1


class Pool:
    def __init__(self, allocator, int8=None):
        self.mamba_allocator = allocator
        self.mamba_pool = SimpleNamespace(copy_from=lambda src, dst: None, replayssm_write_pos=None)
        self.freed_requests = 0
        if int8 is not None:
            self.mamba_ckpt_pool = int8

    def translate_mamba_indices(self, indices):
        return indices

    def donate_mamba_ping_pong_slot(self, req, new_slot):
        return torch.tensor([1])  # the slot that held the tracked state, swapped out for new_slot

    def get_mamba_ping_pong_keep_idx(self, req):
        return 0

    def free_mamba_cache(self, req, mamba_ping_pong_track_buffer_to_keep=None):
        self.freed_requests += 1


class Cache:
    def __init__(self, allocator, extra_buffer, int8=None):
        self.req_to_token_pool = Pool(allocator, int8)
        self.enable_mamba_extra_buffer = extra_buffer
        self.evictions = 0

    def evict(self, params):  # <= 0.5.18, and the int8 pool's eviction
        self.evictions += 1

    evict_for_alloc = evict  # >= 0.5.19


def make_req(rid):
    kv = SimpleNamespace(mamba_pool_idx=torch.tensor(7), mamba_last_track_seqlen=64, mamba_prev_track_seqlen=None,
                         mamba_ping_pong_track_buffer=torch.tensor([1, 2]))
    # Both spellings: `req.*` up to 0.5.18, `req.kv.*` from 0.5.19.
    return SimpleNamespace(rid=rid, kv=kv, lock=None, **vars(kv))


class Warnings(logging.Handler):
    def __init__(self, *modules):
        super().__init__()
        self.records = []
        for module in modules:
            logging.getLogger(module.__name__).addHandler(self)

    def emit(self, record):
        self.records.append(record)

    def take(self):
        found = sum("mamba" in r.getMessage() for r in self.records if r.levelno >= logging.WARNING)
        self.records.clear()
        return found


def component(module, allocator, extra_buffer, int8=None):
    made = object.__new__(module.MambaComponent)
    made.cache = Cache(allocator, extra_buffer, int8)
    made.enable_mamba_extra_buffer = extra_buffer  # <= 0.5.16 keeps the flag here
    return made


def donate(module, warnings, allocator, extra_buffer, int8=None, chunks=2):
    """An unfinished request's prefix donated `chunks` times (chunked prefill)."""
    made = component(module, allocator, extra_buffer, int8)
    req = make_req(f"req-{extra_buffer}")
    outcome = {}
    for _ in range(chunks):
        insert_params = SimpleNamespace(mamba_value=None)
        try:
            cache_len = made.prepare_for_caching_req(req=req, insert_params=insert_params, token_ids_len=64, is_finished=False)
        except AssertionError as exc:
            outcome = {"error": f"AssertionError: {exc}"}
            break
        made.cleanup_after_caching_req(req, is_finished=False, insert_params=insert_params)
        outcome = {"cache_len": cache_len, "mamba_value": None if insert_params.mamba_value is None else insert_params.mamba_value.tolist()}
    outcome.update(handed_out=allocator.handed_out, given_back=allocator.given_back, evictions=made.cache.evictions,
                   warnings=warnings.take())
    if int8 is not None:
        outcome.update(int8_handed_out=int8.handed_out, int8_stored=int8.stored)
    return outcome


def finish(module, warnings):
    """A finished request's state checkpointed into an exhausted int8 pool (no_buffer)."""
    int8 = Allocator(free_slots=0)
    made = component(module, Allocator(free_slots=0), False, int8)
    req = make_req("finished")
    insert_params = SimpleNamespace(mamba_value=None, mamba_keep_idx=None)
    try:
        cache_len = made.prepare_for_caching_req(req=req, insert_params=insert_params, token_ids_len=64, is_finished=True)
    except AssertionError as exc:
        return {"error": f"AssertionError: {exc}", "warnings": warnings.take()}
    made.cleanup_after_caching_req(req, is_finished=True, insert_result=None, insert_params=insert_params)
    return {"cache_len": cache_len, "mamba_value": insert_params.mamba_value, "int8_stored": int8.stored,
            "request_freed": made.cache.req_to_token_pool.freed_requests, "warnings": warnings.take()}


def linker_load(module, warnings):
    made = component(module, Allocator(free_slots=0), False)
    try:
        transfer = made.build_external_linker_transfer(module.LinkerTransferPhase.LOAD, None, ["page-0", "page-1"])
    except AssertionError as exc:
        return {"error": f"AssertionError: {exc}", "warnings": warnings.take()}
    return {"transfer": None if transfer is None else "built", "warnings": warnings.take()}


def unified(module, warnings):
    results = {}
    for extra_buffer in (False, True):
        results["extra_buffer" if extra_buffer else "no_buffer"] = donate(module, warnings, Allocator(free_slots=0), extra_buffer)
    if hasattr(module.MambaComponent, "_alloc_int8_ckpt_slot"):
        for extra_buffer in (False, True):
            key = "int8_extra_buffer" if extra_buffer else "int8_no_buffer"
            results[key] = donate(module, warnings, Allocator(free_slots=1), extra_buffer, int8=Allocator(free_slots=0))
        results["int8_finished"] = finish(module, warnings)
    if hasattr(module, "LinkerTransferPhase") and hasattr(module.MambaComponent, "build_external_linker_transfer"):
        results["linker_load"] = linker_load(module, warnings)
    # With a free slot the donation still happens as before.
    allocator = Allocator(free_slots=1)
    made = component(module, allocator, False)
    insert_params = SimpleNamespace(mamba_value=None)
    cache_len = made.prepare_for_caching_req(req=make_req("ok"), insert_params=insert_params, token_ids_len=64, is_finished=False)
    results["slot_free"] = {"cache_len": cache_len, "donated": insert_params.mamba_value.tolist()}
    return results


def legacy_cache(legacy, allocator, extra_buffer, int8=None):
    pool = SimpleNamespace(
        req_to_token=torch.arange(4 * 128, dtype=torch.int32).reshape(4, 128),
        mamba_allocator=allocator,
        mamba_pool=SimpleNamespace(copy_from=lambda src, dst: None),
        translate_mamba_indices=lambda indices: indices,
        donate_mamba_ping_pong_slot=lambda req, slot: torch.tensor([1]),
    )
    if int8 is not None:
        pool.mamba_ckpt_pool = int8
    cache = legacy.MambaRadixCache.__new__(legacy.MambaRadixCache)
    counts = {"evictions": 0, "inserted": 0}

    def count(key):
        def record(params):
            counts[key] += 1
        return record

    for name, value in {
        "req_to_token_pool": pool, "disable": False, "page_size": 1, "enable_mamba_extra_buffer": extra_buffer,
        "mamba_cache_chunk_size": 64, "evict": count("evictions"), "insert": count("inserted"),
    }.items():
        object.__setattr__(cache, name, value)
    return cache, counts


def legacy_donate(legacy, warnings, allocator, extra_buffer, int8=None):
    """The legacy cache_unfinished_req, two chunks of one request."""
    cache, counts = legacy_cache(legacy, allocator, extra_buffer, int8)
    req = SimpleNamespace(rid="r1", req_pool_idx=1, fill_len=64, extend_range=SimpleNamespace(end=64),
                          mamba_pool_idx=torch.tensor(7), mamba_last_track_seqlen=64 if extra_buffer else None,
                          extra_key=None, cache_salt=None, cache_protected_len=0, prefix_indices=None,
                          get_fill_ids=lambda: list(range(64)))
    req.kv = req  # >= 0.5.19 spells the request's cache fields req.kv.*
    outcome = {}
    for _ in range(2):
        try:
            cache.cache_unfinished_req(req, chunked=True)
        except AssertionError as exc:
            outcome = {"error": f"AssertionError: {exc}"}
            break
        outcome = {"prefix_indices": None if req.prefix_indices is None else len(req.prefix_indices),
                   "last_track_seqlen": req.mamba_last_track_seqlen}
    outcome.update(counts, handed_out=allocator.handed_out, given_back=allocator.given_back, warnings=warnings.take())
    return outcome


def legacy_checks(legacy, warnings):
    results = {"legacy": legacy_donate(legacy, warnings, Allocator(free_slots=0), False)}
    if hasattr(legacy.MambaRadixCache, "_alloc_int8_ckpt_slot"):
        results["legacy_int8"] = legacy_donate(legacy, warnings, Allocator(free_slots=1), True, int8=Allocator(free_slots=0))
    return results


def main():
    module = load(CANDIDATES)
    legacy = load(("sglang.srt.mem_cache.mamba_radix_cache",))
    if legacy is not None and not hasattr(getattr(legacy, "MambaRadixCache", None), "_alloc_mamba_slot"):
        legacy = None  # <= 0.5.12: the legacy cache allocates elsewhere
    if module is None:
        raise SystemExit("no MambaComponent module in this SGLang")
    if hasattr(module, "get_exec"):  # 0.5.23 reads a runtime flag when a slot is short
        module.get_exec = lambda: SimpleNamespace(mamba=SimpleNamespace(enable_mamba_extra_buffer_lazy=False))
    warnings = Warnings(*(found for found in (module, legacy) if found is not None))
    results = unified(module, warnings)
    if legacy is not None:
        results.update(legacy_checks(legacy, warnings))
    results["module"] = module.__file__
    print(json.dumps(results))


main()
