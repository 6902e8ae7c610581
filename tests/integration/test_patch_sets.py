"""Every patch on real releases: expected states, apply, re-apply (no change), revert (byte-identical)."""

from __future__ import annotations

import hashlib

import pytest

from patchkit.releases import manifest
from patchkit.engine import registry
from testing.cli import run, states
from testing.releases import pristine

pytestmark = pytest.mark.integration

A, U, N = "applied", "upstream-fixed", "not-applicable"
_STATE = {"applies": A, "upstream-fixed": U, "not-applicable": N}
# What each release needs, by its code (the manifests record the same). Written out for the
# first six patches; patches added later are expected in the state their manifest records.
EXPECTED = {
    "0.5.10": {"autoround-packed-mapping": A, "draft-lmhead-placeholder": A, "eagle3-capture-hook": N,
               "mamba-slot-graceful": N, "mtp-layer-detection": A, "symm-mem-kill-switch": N,
               "cpu-offload-tied-params": A, "fp8-kv-triton-sm89": A, "gdn-cutedsl-decode-sm90": A, "mtp-draft-kv-budget": N},
    "0.5.14": {"autoround-packed-mapping": A, "draft-lmhead-placeholder": A, "eagle3-capture-hook": A,
               "mamba-slot-graceful": A, "mtp-layer-detection": A, "symm-mem-kill-switch": N,
               "cpu-offload-tied-params": A, "fp8-kv-triton-sm89": A, "gdn-cutedsl-decode-sm90": A, "mtp-draft-kv-budget": A},
    "0.5.17": {"autoround-packed-mapping": A, "draft-lmhead-placeholder": A, "eagle3-capture-hook": A,
               "mamba-slot-graceful": A, "mtp-layer-detection": A, "symm-mem-kill-switch": A,
               "cpu-offload-tied-params": A, "fp8-kv-triton-sm89": A, "gdn-cutedsl-decode-sm90": A, "mtp-draft-kv-budget": A},
    "0.5.19": {"autoround-packed-mapping": A, "draft-lmhead-placeholder": A, "eagle3-capture-hook": A,
               "mamba-slot-graceful": A, "mtp-layer-detection": U, "symm-mem-kill-switch": A,
               "cpu-offload-tied-params": A, "fp8-kv-triton-sm89": A, "gdn-cutedsl-decode-sm90": A, "mtp-draft-kv-budget": A},
    "0.5.21": {"autoround-packed-mapping": A, "draft-lmhead-placeholder": A, "eagle3-capture-hook": A,
               "mamba-slot-graceful": A, "mtp-layer-detection": U, "symm-mem-kill-switch": A,
               "cpu-offload-tied-params": U, "fp8-kv-triton-sm89": A, "gdn-cutedsl-decode-sm90": A, "mtp-draft-kv-budget": A},
    "0.5.22": {"autoround-packed-mapping": A, "draft-lmhead-placeholder": A, "eagle3-capture-hook": U,
               "mamba-slot-graceful": A, "mtp-layer-detection": U, "symm-mem-kill-switch": A,
               "cpu-offload-tied-params": U, "fp8-kv-triton-sm89": A, "gdn-cutedsl-decode-sm90": A, "mtp-draft-kv-budget": A},
    "0.5.23": {"autoround-packed-mapping": A, "draft-lmhead-placeholder": A, "eagle3-capture-hook": U,
               "mamba-slot-graceful": A, "mtp-layer-detection": U, "symm-mem-kill-switch": A,
               "cpu-offload-tied-params": U, "fp8-kv-triton-sm89": A, "gdn-cutedsl-decode-sm90": A, "mtp-draft-kv-budget": A},
}
MAMBA_FILES = {
    "0.5.10": ["sglang/srt/mem_cache/mamba_radix_cache.py"],  # present, without the code the patch needs
    "0.5.21": ["sglang/srt/mem_cache/unified_cache/components/mamba.py"],
    "0.5.22": ["sglang/srt/mem_cache/unified_cache/components/mamba.py"],
    "0.5.14": ["sglang/srt/mem_cache/unified_cache_components/mamba_component.py", "sglang/srt/mem_cache/mamba_radix_cache.py"],
    "0.5.17": ["sglang/srt/mem_cache/unified_cache/components/mamba_component.py", "sglang/srt/mem_cache/mamba_radix_cache.py"],
    "0.5.19": ["sglang/srt/mem_cache/unified_cache/components/mamba_component.py", "sglang/srt/mem_cache/mamba_radix_cache.py"],
    "0.5.23": ["sglang/srt/mem_cache/unified_cache/components/mamba.py"],
}

# mtp-draft-kv-budget edits where the release resolves the draft's KV layer count.
SPEC_AUX = "sglang/srt/model_executor/model_runner_components/spec_aux_hidden_state.py"
BUDGET_FILES = {
    "0.5.10": ["sglang/srt/model_executor/model_runner.py"],  # present, but it sizes no EAGLE draft KV
    "0.5.14": ["sglang/srt/model_executor/model_runner.py"],
    **{version: [SPEC_AUX] for version in ("0.5.17", "0.5.19", "0.5.21", "0.5.22", "0.5.23")},
}


def expected(version: str) -> dict[str, str]:
    recorded = {pid: _STATE[entry.verdict] for pid, entry in manifest.load(version).patches.items()}
    return {pid: EXPECTED[version].get(pid, recorded.get(pid, "missing from the manifest")) for pid in registry.patch_ids()}


def tree_hashes(site) -> dict[str, str]:
    return {
        path.relative_to(site).as_posix(): hashlib.sha256(path.read_bytes()).hexdigest()
        for path in sorted(site.rglob("*")) if path.is_file()
    }


@pytest.mark.parametrize("version", sorted(EXPECTED))
def test_apply_reapply_revert(release, version):
    site = release(version)
    original = tree_hashes(site)
    result = run("apply", "--target", version, "--site-packages", site, "--json")
    assert result.exit_code == 0, result.stderr
    assert states(site) == expected(version)
    mamba = next(p for p in run("status", "--site-packages", site, "--json").json()["patches"] if p["id"] == "mamba-slot-graceful")
    assert sorted(mamba["files"]) == sorted(MAMBA_FILES[version])
    budget = next(p for p in run("status", "--site-packages", site, "--json").json()["patches"] if p["id"] == "mtp-draft-kv-budget")
    assert budget["files"] == BUDGET_FILES[version]

    patched = tree_hashes(site)
    again = run("apply", "--target", version, "--site-packages", site, "--json")
    assert again.exit_code == 0 and again.json()["changed"] is False
    assert tree_hashes(site) == patched

    assert run("revert", "--site-packages", site).exit_code == 0
    assert tree_hashes(site) == original  # byte-identical, nothing left behind


@pytest.mark.parametrize("version", sorted(EXPECTED))
@pytest.mark.parametrize("patch_id", [pid for pid in registry.patch_ids() if pid != "mtp-layer-detection"])
def test_each_patch_alone(release, version, patch_id):
    site = release(version)
    original = tree_hashes(site)
    assert run("apply", "--site-packages", site, "--only", patch_id).exit_code == 0
    assert states(site)[patch_id] == expected(version)[patch_id]
    assert run("revert", "--site-packages", site, "--only", patch_id).exit_code == 0
    assert tree_hashes(site) == original


def test_manifests_cover_every_release_from_0_5_10_to_0_5_23():
    assert manifest.available() == [f"0.5.{minor}" for minor in range(10, 24)]


def test_manifest_check_passes_on_committed_manifests(monkeypatch):
    from testing.releases import HOME

    for minor in range(10, 24):
        pristine(f"0.5.{minor}")
    monkeypatch.setenv("PATCHKIT_HOME", str(HOME))
    result = run("manifest", "check")
    assert result.exit_code == 0, result.stdout + result.stderr
    assert result.stdout.count("ok ") == 14


def test_manifest_check_fails_on_an_altered_hash(monkeypatch):
    from testing.releases import HOME

    pristine("0.5.17")
    monkeypatch.setenv("PATCHKIT_HOME", str(HOME))
    real = manifest.load("0.5.17")
    rel = next(iter(real.files))
    altered = manifest.Manifest(real.version, real.patches, {**real.files, rel: "0" * 64})
    monkeypatch.setattr(manifest, "load", lambda version: altered)
    result = run("manifest", "check", "0.5.17")
    assert result.exit_code == 1
    assert "MISMATCH  manifests/0.5.17.json" in result.stdout
