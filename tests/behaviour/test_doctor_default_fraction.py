"""The default --mem-fraction-static's attention-DP and DeepEP terms (issue 46, the default fraction's remaining
terms), held to the release's own `_handle_gpu_memory_settings` / `handle_gpu_memory_settings`, called on the CPU with
the GPU memory figure it takes as its argument (0.5.10-0.5.19; tests/behaviour/probe_default_fraction.py). 0.5.20 on
read the card themselves: tests/doctor/test_budget.py checks 0.5.23 against its code's arithmetic."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from patchkit.doctor import model as model_mod
from patchkit.doctor import release_code
from patchkit.doctor.budget import default_mem_fraction
from patchkit.doctor.launch import parse
from patchkit.store.target import find_in
from testing.behaviour import run_probe
from testing.doctor import QWEN38, model_folder
from testing.releases import pristine

pytestmark = pytest.mark.behaviour

PROBE = Path(__file__).parent / "probe_default_fraction.py"
# Prefill graphs off on both sides: their term (`len(prefill bs) x 8` where the release's resolution leaves them on)
# is not modelled yet.
CASES = {
    "plain": (24, {}, []),
    "dp": (24, {"enable_dp_attention": True, "dp_size": 2, "tp_size": 2},
           ["--enable-dp-attention", "--dp-size", "2", "--tp", "2"]),
    # An 80 GB card at TP 4 takes a decode max bs of 512: above 300, the `* 1.5` more.
    "dp above 300": (80, {"enable_dp_attention": True, "dp_size": 4, "tp_size": 4},
                     ["--enable-dp-attention", "--dp-size", "4", "--tp", "4"]),
    "deepep": (24, {"moe_a2a_backend": "deepep", "ep_size": 2, "tp_size": 2},
               ["--moe-a2a-backend", "deepep", "--ep-size", "2", "--tp", "2"]),
}


@pytest.mark.parametrize("version", ["0.5.15", "0.5.19"])  # the settings in server_args.py; in memory_hook.py
def test_the_default_fraction_is_the_releases_own(version, tmp_path):
    """Before, doctor left attention DP's `max_bs x dp_size x 3` (and `x 1.5` more above a max bs of 300) and
    DeepEP's 2 GiB (0.5.15 on) out of the default: 0.847 where the release gives 0.836 (DP 2) and 0.758 (DeepEP) on a
    24 GB card."""
    config = json.loads(QWEN38.read_text())
    config.pop("vision_config", None)  # the probe's model config is not multimodal
    model = str(model_folder(tmp_path / "m", config=config))
    off = "--disable-piecewise-cuda-graph"
    cases = {name: {"gpu_mib": gib * 1024, "fields": {**fields, "prefill_graphs_off": True}}
             for name, (gib, fields, _argv) in CASES.items()}
    released = run_probe(pristine(version), PROBE, json.dumps(cases))
    # doctor's estimate of the default (what `patchkit doctor` shows as "mem-fraction-static (estimate)"), from the
    # release's code and the launch as parsed by the release's own flags.
    code, facts = release_code(find_in(pristine(version))), model_mod.load(model)
    doctor = {}
    for name, (gib, _fields, argv) in CASES.items():
        launch = parse(["--model-path", model, off, *argv], code.flags)
        doctor[name] = default_mem_fraction(code, launch, facts, float(gib), launch.int_value("tp_size") or 1, 1)
    assert doctor == released
    # 24 GB, TP 1: 512 + 2048 x 1.5 + 24 x 2 + 128 MiB reserved; DP 2 (TP 2): + 128 + 24 x 2 x 3; DeepEP: + 128 + 2048.
    assert released["plain"] == round((24576 - 3760) / 24576, 3) == 0.847
    assert (released["dp"], released["deepep"]) == (round((24576 - 4032) / 24576, 3), round((24576 - 5936) / 24576, 3))
