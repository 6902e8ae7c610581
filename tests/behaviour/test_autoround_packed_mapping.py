"""AutoRoundConfig on the real engine: a fused in_proj_qkvz whose parts are kept at 16 bits
gets 16 bits once the mapping the loader passes is kept (4 before the patch)."""

from __future__ import annotations

from pathlib import Path

import pytest

from testing.behaviour import run_probe
from testing.cli import run

pytestmark = pytest.mark.behaviour

PROBE = Path(__file__).parent / "probe_autoround.py"


@pytest.mark.parametrize("version", ["0.5.14", "0.5.17", "0.5.23"])  # both constructor shapes (0.5.18 grew it)
def test_fused_module_keeps_16_bits(release, version):
    site = release(version, whole=True)
    before = run_probe(site, PROBE)
    assert (before["bits"], before["group_size"]) == (4, 128)
    assert run("apply", "--site-packages", site, "--only", "autoround-packed-mapping").exit_code == 0
    after = run_probe(site, PROBE)
    assert (after["bits"], after["group_size"]) == (16, -1)
    assert after["mapping_kept"]  # a mapping a model sets later still wins
