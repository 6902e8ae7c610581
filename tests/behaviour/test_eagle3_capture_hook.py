"""EAGLE-3 capture on SGLang's real Qwen3.5 classes: patched 0.5.21 flags exactly the layers that
0.5.22's own implementation flags for the same input; unpatched, nothing is flagged."""

from __future__ import annotations

from pathlib import Path

import pytest

from testing.behaviour import run_probe
from testing.cli import run

pytestmark = pytest.mark.behaviour

PROBE = Path(__file__).parent / "probe_eagle3_capture.py"
CASES = ("vl_explicit", "vl_default", "moe_vl_explicit", "moe_vl_default", "text_explicit", "text_default")


def test_patched_0_5_21_matches_0_5_22(release):
    upstream = run_probe(release("0.5.22", whole=True), PROBE)
    assert upstream["vl_explicit"]["flagged"] == [4, 11, 41]  # "after layer k" -> "before layer k+1"
    assert upstream["vl_default"]["flagged"] == [2, 32, 61]

    site = release("0.5.21", whole=True)
    before = run_probe(site, PROBE)
    assert before["vl_explicit"]["flagged"] == []  # capture silently does nothing
    assert "has no attribute 'set_eagle3_layers_to_capture'" in before["text_explicit"]["error"]

    assert run("apply", "--site-packages", site, "--only", "eagle3-capture-hook").exit_code == 0
    after = run_probe(site, PROBE)
    for case in CASES:
        assert after[case] == upstream[case], case
        assert after[case]["wrapper_capture"] is True


def test_0_5_14_without_text_class(release):
    site = release("0.5.14", whole=True)
    assert run("apply", "--site-packages", site, "--only", "eagle3-capture-hook").exit_code == 0
    after = run_probe(site, PROBE)
    assert after["vl_explicit"] == {"flagged": [4, 11, 41], "wrapper_capture": True, "decoder_capture": True}
    assert "text_explicit" not in after  # no qwen3_5_text.py before 0.5.17
