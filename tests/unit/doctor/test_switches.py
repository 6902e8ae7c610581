"""patchkit/doctor/switches.py: which applied patches the launch's SGLANG_PATCHKIT_DISABLE switches off, and the
shell command that switches them back on (the list as the patched snippet reads it: comma-separated, whitespace
around an id ignored)."""

from __future__ import annotations

from patchkit.doctor import switches

ENV = {"SGLANG_PATCHKIT_DISABLE": " draft-lmhead-placeholder ,fp8-kv-triton-sm89,,eagle3-capture-hook"}


def test_listed_reads_the_list_as_the_snippet_does():
    assert switches.listed(ENV) == ["draft-lmhead-placeholder", "fp8-kv-triton-sm89", "eagle3-capture-hook"]
    assert switches.listed({}) == [] and switches.listed({"SGLANG_PATCHKIT_DISABLE": " , "}) == []


def test_only_applied_switchable_patches_are_counted_off():
    states = {"draft-lmhead-placeholder": "applied", "fp8-kv-triton-sm89": "pending", "eagle3-capture-hook": "applied",
              "mamba-slot-graceful": "applied"}
    assert switches.with_switches(states, ENV) == {
        "draft-lmhead-placeholder": "disabled",  # applied and switchable: off where the launch runs
        "fp8-kv-triton-sm89": "pending",  # not applied: nothing to switch off
        "eagle3-capture-hook": "applied",  # declares no switch (RUNTIME_SWITCH empty): in force whatever is listed
        "mamba-slot-graceful": "applied"}  # not listed
    assert switches.with_switches(states, {}) is states


def test_switching_on_drops_only_those_ids():
    assert switches.switch_on(ENV, ("draft-lmhead-placeholder",)) == (
        "export", "SGLANG_PATCHKIT_DISABLE=fp8-kv-triton-sm89,eagle3-capture-hook")
    assert switches.switch_on(ENV, ("draft-lmhead-placeholder", "fp8-kv-triton-sm89", "eagle3-capture-hook")) == (
        "unset", "SGLANG_PATCHKIT_DISABLE")
    command = switches.switch_on(ENV, ("draft-lmhead-placeholder",))
    assert switches.switched_on_by(ENV, (*command, "&&", "patchkit", "apply")) == ["draft-lmhead-placeholder"]
    assert switches.switched_on_by(ENV, ("unset", "SGLANG_PATCHKIT_DISABLE")) == switches.listed(ENV)
    assert switches.switched_on_by(ENV, ("patchkit", "apply")) == []
