"""SGLANG_PATCHKIT_DISABLE on the real SGLang 0.5.17 modules, every patch applied: each switchable
patch's code takes the patched path with the switch unset (or listing other ids), and the
release's own path with its id listed, measured by calling the real patched function (each
patch's own probe): what the probe says switched off is what it says on the unpatched release."""

from __future__ import annotations

from pathlib import Path

import pytest

from patchkit.engine import registry
from testing.behaviour import run_probe
from testing.cli import run
from testing.releases import copy_release

pytestmark = pytest.mark.behaviour

HERE = Path(__file__).parent
FIXTURES = HERE.parent / "fixtures"
VERSION = "0.5.17"  # every switchable patch applies there
# patch id -> (its probe, the probe's arguments), the probes of the patch's own behaviour test.
PROBES = {
    "autoround-packed-mapping": ("probe_autoround.py", ()),
    "cpu-offload-tied-params": ("probe_offload_tied.py", ()),
    "draft-lmhead-placeholder": ("probe_draft_lmhead.py", ()),
    "fp4-kv-sm100": ("probe_fp4_kv.py", ("8.6", "10.0", "8.6:bf16")),
    "fp8-kv-triton-sm89": ("probe_triton_fp8.py", ("8.6:float8_e4m3fn", "9.0:float8_e4m3fn", "8.6:bfloat16")),
    "gdn-cutedsl-decode-sm90": ("probe_gdn_decode.py", ("8.6", "9.0")),
    "mamba-slot-graceful": ("probe_mamba_donation.py", ()),
    "moe-w2-presharded": ("probe_moe_w2_scales.py", ("act_order", "full_unmarked", "per_rank")),
    "mtp-draft-kv-budget": ("probe_mtp_budget.py", (str(FIXTURES / "qwen3.8-27b"),)),
    "mtp-layer-detection": ("probe_mtp_layers.py", (str(FIXTURES / "qwen3.8-27b"),)),
}


@pytest.fixture(scope="module")
def sites(tmp_path_factory):
    """(the pristine release, the same release with every patch applied)."""
    root = tmp_path_factory.mktemp("switches")
    pristine, patched = copy_release(VERSION, root / "pristine"), copy_release(VERSION, root / "patched")
    assert run("apply", "--site-packages", patched).exit_code == 0
    return pristine, patched


# Measured elsewhere: symm-mem-kill-switch's switch in tests/behaviour/test_verify.py (its hook);
# spec-mamba-lazy-buffer's (not applicable on 0.5.17) on 0.5.23 in test_spec_mamba_lazy_buffer.py;
# gdn-conv-state-dtype's (not applicable on 0.5.17) on 0.5.20-0.5.23 in test_gdn_conv_state_dtype.py.
ELSEWHERE = {"symm-mem-kill-switch", "spec-mamba-lazy-buffer", "gdn-conv-state-dtype"}


def test_every_switchable_patch_has_a_probe_here_or_elsewhere():
    switchable = {cls.ID for cls in registry.load_all() if cls.RUNTIME_SWITCH}
    assert switchable - ELSEWHERE == set(PROBES)


@pytest.mark.parametrize("patch_id", sorted(PROBES))
def test_listed_it_takes_the_releases_own_path(sites, patch_id, monkeypatch):
    pristine, patched = sites
    probe, args = PROBES[patch_id]
    monkeypatch.delenv("SGLANG_PATCHKIT_DISABLE", raising=False)
    release_says = run_probe(pristine, HERE / probe, *args)
    monkeypatch.setenv("SGLANG_PATCHKIT_DISABLE", "symm-mem-kill-switch")  # another id: still patched
    patched_says = run_probe(patched, HERE / probe, *args)
    monkeypatch.setenv("SGLANG_PATCHKIT_DISABLE", f"symm-mem-kill-switch,  {patch_id} ")
    switched_off_says = run_probe(patched, HERE / probe, *args)
    assert patched_says != release_says, patched_says  # the probe sees the patch...
    assert _same_tree(switched_off_says, pristine, patched) == release_says  # ...and, switched off, the release


def _same_tree(said: object, pristine: Path, patched: Path) -> object:
    """What the probe said with the patched tree's paths written as the pristine tree's."""
    if isinstance(said, dict):
        return {key: _same_tree(value, pristine, patched) for key, value in said.items()}
    if isinstance(said, list):
        return [_same_tree(value, pristine, patched) for value in said]
    if isinstance(said, str):
        return said.replace(str(patched), str(pristine))
    return said
