"""Drive SGLang's real legacy MambaRadixCache.cache_unfinished_req (the default cache for hybrid
models before 0.5.16) with an exhausted mamba allocator. The cache object and its methods are
SGLang's; the pools and the request around it are stand-ins. Prints one JSON object."""

import json
import logging
from types import SimpleNamespace

import torch

from sglang.srt.mem_cache import mamba_radix_cache as legacy


class Allocator:
    def __init__(self):
        self.handed_out = 0
        self.given_back = 0

    def alloc(self, n):
        return None  # exhausted

    def free(self, slots):
        self.given_back += int(torch.as_tensor(slots).numel())


def main():
    allocator = Allocator()
    pool = SimpleNamespace(
        req_to_token=torch.arange(4 * 128, dtype=torch.int32).reshape(4, 128),
        mamba_allocator=allocator,
        mamba_pool=SimpleNamespace(copy_from=lambda src, dst: None),
        translate_mamba_indices=lambda indices: indices,
        donate_mamba_ping_pong_slot=lambda req, slot: slot,
    )
    cache = legacy.MambaRadixCache.__new__(legacy.MambaRadixCache)
    evictions = []
    inserted = []
    for name, value in {
        "req_to_token_pool": pool, "disable": False, "page_size": 1, "enable_mamba_extra_buffer": False,
        "mamba_cache_chunk_size": 64, "evict": lambda params: evictions.append(params),
        "insert": lambda params: inserted.append(params),
    }.items():
        object.__setattr__(cache, name, value)

    records = []
    handler = logging.Handler()
    handler.emit = records.append
    logging.getLogger(legacy.__name__).addHandler(handler)

    req = SimpleNamespace(rid="r1", req_pool_idx=1, fill_len=64, extend_range=SimpleNamespace(end=64),
                          mamba_pool_idx=torch.tensor(7),
                          mamba_last_track_seqlen=None, extra_key=None, cache_protected_len=0,
                          prefix_indices=None, get_fill_ids=lambda: list(range(64)))
    req.kv = req  # >= 0.5.19 spells the request's cache fields req.kv.*
    outcome = {}
    for chunk in range(2):
        try:
            cache.cache_unfinished_req(req, chunked=True)
        except AssertionError as exc:
            outcome = {"error": f"AssertionError: {exc}"}
            break
        outcome = {"prefix_indices": None if req.prefix_indices is None else len(req.prefix_indices)}
    outcome.update(inserted=len(inserted), evictions=len(evictions), given_back=allocator.given_back,
                   warnings=sum(r.levelno >= logging.WARNING and "mamba" in r.getMessage() for r in records))
    print(json.dumps(outcome))


main()
