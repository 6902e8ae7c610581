"""SGLang's real Qwen3_5ForCausalLMMTP methods (collaborators stood in, see the probe):
after the patch the draft's own vocab tensors are zero-size after __init__ and the target's
tensors take their place in set_embed_and_head()."""

from __future__ import annotations

from pathlib import Path

import pytest

from testing.behaviour import run_probe
from testing.cli import run

pytestmark = pytest.mark.behaviour

PROBE = Path(__file__).parent / "probe_draft_lmhead.py"
FULL = [[512, 64], [512, 64]]
EMPTY = [[0], [0]]


@pytest.mark.parametrize("version", ["0.5.14", "0.5.19", "0.5.20", "0.5.23"])
def test_placeholders_until_the_target_tensors_arrive(release, version):
    site = release(version, whole=True)
    before = run_probe(site, PROBE)
    assert before["file"].startswith(str(site)) and before["file"].endswith("qwen3_5_mtp.py")
    assert all(before[case]["after_init"] == FULL for case in ("pp1_untied", "pp1_tied", "pp2_untied", "pp2_tied"))

    assert run("apply", "--site-packages", site, "--only", "draft-lmhead-placeholder").exit_code == 0
    after = run_probe(site, PROBE)
    for case in ("pp1_untied", "pp1_tied"):
        assert after[case]["after_init"] == EMPTY, case  # ~2 x vocab x hidden freed before KV sizing
        assert after[case]["load_checkpoint_embedding"] == "ok"  # 0.5.20+: load skips the placeholder
        assert after[case]["after_load"] == EMPTY
        assert after[case]["after_swap"] == FULL and after[case]["uses_target_tensors"]
    assert after["pp1_tied"]["lm_head_is_embedding"]  # tie_word_embeddings respected
    for case in ("pp2_untied", "pp2_tied"):  # with PP the draft keeps its own tensors
        assert after[case]["after_init"] == FULL, case
        assert after[case]["after_swap"] == FULL and after[case]["uses_target_tensors"]


@pytest.mark.parametrize("version", ["0.5.14", "0.5.23"])
def test_qwen3_next_draft_placeholders(release, version):
    """Qwen3NextForCausalLMMTP.__init__ (real) and its inherited set_embed_and_head (real)."""
    site = release(version, whole=True)
    before = run_probe(site, PROBE, "qwen3_next")
    assert before["file"].startswith(str(site)) and before["file"].endswith("qwen3_next_mtp.py")
    assert before["pp1_untied"]["after_init"] == FULL and before["pp2_untied"]["after_init"] == FULL

    assert run("apply", "--site-packages", site, "--only", "draft-lmhead-placeholder").exit_code == 0
    after = run_probe(site, PROBE, "qwen3_next")
    assert after["pp1_untied"]["after_init"] == EMPTY  # ~2 x vocab x hidden freed before KV sizing
    assert after["pp1_untied"]["after_swap"] == FULL and after["pp1_untied"]["uses_target_tensors"]
    assert after["pp2_untied"]["after_init"] == FULL  # with PP the draft keeps its own tensors
    assert after["pp2_untied"]["after_swap"] == FULL and after["pp2_untied"]["uses_target_tensors"]
