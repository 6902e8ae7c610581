"""SGLang's real mamba cache code at every site mamba-slot-graceful changes, with the pool it
allocates from exhausted, on every release that has it (one probe process per release and side):
unpatched each asserts (and would kill the scheduler); patched the donation, the int8 checkpoint and
the linker's load are skipped, and the request goes on."""

from __future__ import annotations

from pathlib import Path

import pytest

from testing.behaviour import run_probe
from testing.cli import run

pytestmark = pytest.mark.behaviour

PROBE = Path(__file__).parent / "probe_mamba_donation.py"
SLOT = "AssertionError: Can not alloc mamba cache"
INT8_SLOT = "AssertionError: Can not alloc int8 mamba checkpoint slot"
# The releases whose finished branch has an exit of its own (no checkpoint to donate), where the
# patch skips a finished request's int8 checkpoint too; elsewhere that site keeps its assert.
FINISHED_EXIT = ("0.5.22", "0.5.23")


def _skipped(outcome: dict) -> None:
    assert "error" not in outcome, outcome
    assert outcome["cache_len"] == 0  # callers read <= 0 as "skip insert"
    assert outcome["mamba_value"] is None
    assert outcome["handed_out"] == outcome["given_back"]  # nothing leaks
    assert outcome["evictions"] >= 1  # it still tried to make room first
    assert outcome["warnings"] == 1  # once per request, not per chunk


@pytest.mark.parametrize("version", [f"0.5.{minor}" for minor in range(13, 24)])
def test_exhausted_pools(release, version):
    site = release(version, whole=True)
    before = run_probe(site, PROBE)
    assert before["module"].startswith(str(site))
    assert run("apply", "--site-packages", site, "--only", "mamba-slot-graceful").exit_code == 0
    after = run_probe(site, PROBE)

    for mode in ("no_buffer", "extra_buffer"):
        assert before[mode]["error"] == SLOT
        _skipped(after[mode])
    # A free slot is still donated as before.
    assert after["slot_free"] == before["slot_free"] == {"cache_len": 64, "donated": [100]}

    if "int8_no_buffer" in before:  # --enable-int8-mamba-checkpoint: a mamba slot free, no int8 slot
        for mode in ("int8_no_buffer", "int8_extra_buffer"):
            assert before[mode]["error"] == INT8_SLOT
            _skipped(after[mode])
            assert after[mode]["int8_stored"] == 0
        assert before["int8_finished"]["error"] == INT8_SLOT
        if version in FINISHED_EXIT:
            assert after["int8_finished"] == {"cache_len": 0, "mamba_value": None, "int8_stored": 0, "request_freed": 1,
                                              "warnings": 1}
        else:
            assert after["int8_finished"] == before["int8_finished"]

    if "linker_load" in before:
        if before["linker_load"]["error"] == SLOT:  # 0.5.23: a component that loads from the linker
            assert after["linker_load"] == {"transfer": None, "warnings": 1}  # the linker aborts the load
        else:  # earlier: the release's stub refuses the linker outright
            assert after["linker_load"] == before["linker_load"]

    if "legacy" in before:  # the legacy MambaRadixCache, default for hybrid models < 0.5.16
        assert before["legacy"]["error"] == SLOT
        legacy = after["legacy"]
        assert "error" not in legacy, legacy
        assert legacy["prefix_indices"] == 64  # the request goes on with its own KV indices
        assert legacy["inserted"] == 0  # that prefix is not cached
        assert legacy["given_back"] == 0 and legacy["evictions"] >= 1
        assert legacy["warnings"] == 1  # once for two chunks
    if "legacy_int8" in before:
        assert before["legacy_int8"]["error"] == INT8_SLOT
        legacy = after["legacy_int8"]
        assert "error" not in legacy, legacy
        assert legacy["prefix_indices"] == 64 and legacy["inserted"] == 0
        assert legacy["handed_out"] == legacy["given_back"] == 1  # the swapped-out slot given back
        assert legacy["last_track_seqlen"] is None  # its state is gone: nothing may donate it later
        assert legacy["warnings"] == 1
