"""SGLang's real MambaComponent.prepare_for_caching_req with an exhausted mamba allocator:
unpatched it asserts (and would kill the scheduler); patched it skips the donation."""

from __future__ import annotations

from pathlib import Path

import pytest

from testing.behaviour import run_probe
from testing.cli import run

pytestmark = pytest.mark.behaviour

PROBE = Path(__file__).parent / "probe_mamba_donation.py"


@pytest.mark.parametrize("version", ["0.5.14", "0.5.17", "0.5.19", "0.5.23"])
def test_exhausted_allocator(release, version):
    site = release(version, whole=True)
    before = run_probe(site, PROBE)
    assert before["module"].startswith(str(site))
    for mode in ("no_buffer", "extra_buffer"):
        assert before[mode]["error"] == "AssertionError: Can not alloc mamba cache"

    assert run("apply", "--site-packages", site, "--only", "mamba-slot-graceful").exit_code == 0
    after = run_probe(site, PROBE)
    for mode in ("no_buffer", "extra_buffer"):
        outcome = after[mode]
        assert "error" not in outcome, outcome
        assert outcome["cache_len"] == 0  # callers read <= 0 as "skip insert"
        assert outcome["mamba_value"] is None
        assert outcome["handed_out"] == outcome["given_back"]  # nothing leaks
        assert outcome["evictions"] >= 1  # it still tried to make room first
        assert outcome["warnings"] == 1  # once per request, not per chunk
    # A free slot is still donated as before.
    assert after["slot_free"] == before["slot_free"] == {"cache_len": 64, "donated": [100]}


LEGACY_PROBE = Path(__file__).parent / "probe_legacy_mamba_donation.py"


@pytest.mark.parametrize("version", ["0.5.14", "0.5.19"])  # the legacy cache, default for hybrid models < 0.5.16
def test_legacy_mamba_radix_cache(release, version):
    site = release(version, whole=True)
    before = run_probe(site, LEGACY_PROBE)
    assert before["error"] == "AssertionError: Can not alloc mamba cache"
    assert run("apply", "--site-packages", site, "--only", "mamba-slot-graceful").exit_code == 0
    after = run_probe(site, LEGACY_PROBE)
    assert "error" not in after, after
    assert after["prefix_indices"] == 64  # the request goes on with its own KV indices
    assert after["inserted"] == 0  # that prefix is not cached
    assert after["given_back"] == 0 and after["evictions"] >= 1
    assert after["warnings"] == 1  # once for two chunks
