"""The rules' registry, without a release (every rule on a launch with its trap and without it, on
real releases: tests/doctor/test_rules.py)."""

from __future__ import annotations

from patchkit.doctor.rules import RULES


def test_every_issue_rule_id_is_registered():
    ids = set(RULES) | {"flag-removed"}
    assert {"spec-max-running-default", "mamba-slots-cap", "mamba-slots-zero", "mamba-ratio-ignored",
            "kv-below-context", "max-total-tokens-cap-only", "replayssm-spec", "draft-quantization-inherit",
            "flag-removed", "flag-unknown", "feature-missing", "no-buffer-overlap", "fp8-triton-sm89",
            "cutedsl-decode-sm90", "flashinfer-gdn-sm90", "fa3-sm90", "dtype-fp16-gdn", "reasoning-parser-forced",
            "tool-parser-name", "mtp-weights-missing", "pcie-custom-allreduce", "integrated-gpu-headroom",
            "patch-needed"} <= ids
