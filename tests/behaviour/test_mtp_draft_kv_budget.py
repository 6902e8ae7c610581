"""SGLang's real resolve_spec_aux_hidden_state_config() for the Qwen3.8-27B target with built-in
MTP (EAGLE, no draft path): before the patch the draft adds no KV layers to the budget, after it
the target's text_config.mtp_num_hidden_layers (1) is counted.

Not run here: 0.5.14-0.5.15 resolve the count inline in ModelRunner.__init__ (a whole model
runner cannot be built on the CPU), and 0.5.22-0.5.23 build the draft-mode ModelConfig from the
full server arguments even without a draft path."""

from __future__ import annotations

from pathlib import Path

import pytest

from testing.behaviour import run_probe
from testing.cli import run

pytestmark = pytest.mark.behaviour

HERE = Path(__file__).parent
CONFIG_DIR = HERE.parent / "fixtures" / "qwen3.8-27b"


@pytest.mark.parametrize("version", ["0.5.17", "0.5.21"])  # the path read from server_args / get_spec()
def test_path_less_mtp_draft_layers_counted(release, version):
    site = release(version, whole=True)
    before = run_probe(site, HERE / "probe_mtp_budget.py", str(CONFIG_DIR))
    assert before["sglang_file"].startswith(str(site))
    assert before["architecture"] == "Qwen3_5ForConditionalGeneration"
    assert before["target_num_nextn_predict_layers"] is None
    assert before["eagle_target"] is None  # the draft's KV is left out of the pool budget

    assert run("apply", "--site-packages", site, "--only", "mtp-draft-kv-budget").exit_code == 0
    after = run_probe(site, HERE / "probe_mtp_budget.py", str(CONFIG_DIR))
    assert after["eagle_target"] == 1  # text_config.mtp_num_hidden_layers
    assert after["eagle_draft_worker"] is None and after["no_speculation"] is None  # only the target, only with MTP
