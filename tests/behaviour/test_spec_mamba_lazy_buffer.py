"""SGLang's real `_mamba_radix_cache_resolution` and extra_buffer validator, on every release that
resolves `auto` in arg_groups/overrides.py (0.5.15+), for a Qwen3.5 hybrid model: unpatched, a
speculative launch gets extra_buffer (sglang#36537); patched, extra_buffer_lazy, which the release's
own validator accepts, and nothing changes for a launch without a draft, under PD disaggregation,
without the overlap scheduler, with pipeline stages or with an explicit strategy. Where the release's
validator refuses the lazy buffer with a draft (0.5.15-0.5.17) the patch is not applicable."""

from __future__ import annotations

from pathlib import Path

import pytest

from testing.behaviour import run_probe
from testing.cli import run, states
from testing.releases import pristine

pytestmark = pytest.mark.behaviour

PROBE = Path(__file__).parent / "probe_mamba_strategy.py"
ID = "spec-mamba-lazy-buffer"
SPECULATIVE = ("nextn", "eagle3")
UNCHANGED = ("no_draft", "pd_prefill", "no_overlap_paged", "pipeline_stages", "explicit_extra_buffer")


@pytest.mark.parametrize("version", [f"0.5.{minor}" for minor in range(15, 24)])
def test_auto_under_speculative_decoding(release, version, monkeypatch):
    untouched = pristine(version)  # read only: a copy is made where the patch is applied
    before = run_probe(untouched, PROBE)
    assert before["module"].startswith(str(untouched))
    for case in SPECULATIVE:
        assert before[case] == {"strategy": "extra_buffer", "validator": "accepted"}  # the defect's setting
    refused = [draft for draft in ("nextn", "dflash") if before[f"lazy_with_{draft}"] != "accepted"]
    if refused:  # the release cannot run the lazy buffer with some draft: nothing to do here
        assert states(untouched)[ID] == "not-applicable"
        return

    site = release(version, whole=True)
    assert run("apply", "--site-packages", site, "--only", ID).exit_code == 0
    after = run_probe(site, PROBE)
    for case in SPECULATIVE:
        assert after[case] == {"strategy": "extra_buffer_lazy", "validator": "accepted"}
    for case in UNCHANGED:
        assert after[case] == before[case], case

    if version == "0.5.23":  # the runtime switch, on the newest release
        monkeypatch.setenv("SGLANG_PATCHKIT_DISABLE", ID)
        switched_off = run_probe(site, PROBE)
        assert {case: switched_off[case] for case in _cases(before)} == {case: before[case] for case in _cases(before)}


def _cases(said: dict) -> list[str]:
    return [case for case in said if case != "module"]
