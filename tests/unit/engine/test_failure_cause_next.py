"""The `patchkit track --from A` a failed patch names: the newest earlier release whose committed
manifest says the patch applies."""

from __future__ import annotations

from patchkit.engine import failure_cause


def test_from_is_the_last_release_the_patch_applies_to():
    # cpu-offload-tied-params applies through 0.5.20; 0.5.21 fixed it upstream.
    assert failure_cause._last_release_it_applies_to("cpu-offload-tied-params", "0.5.23") == "0.5.20"
    assert failure_cause._last_release_it_applies_to("autoround-packed-mapping", "0.5.23") == "0.5.22"
    # eagle3-capture-hook is not applicable on 0.5.10, the oldest release: nothing earlier applies.
    assert failure_cause._last_release_it_applies_to("eagle3-capture-hook", "0.5.11") is None
    assert failure_cause._last_release_it_applies_to("no-such-patch", "0.5.23") is None


def test_a_failed_patch_in_a_release_s_manifest_names_the_next_step(scratch, tmp_path):
    """Issue 43.6: `patch X is failed on SGLang V: ...` (manifest update and check; an image of a
    release with no committed manifest) named no next step. It names the one a failed row of
    `status` names, written with the run's --patches (store/naming.py)."""
    import pytest

    from patchkit.base.errors import PlanError
    from patchkit.engine import manifest_describe, registry
    from patchkit.store.target import find_in
    from testing import synthetic as syn

    patches = syn.write_patches(tmp_path / "set")
    site = syn.make_tree(scratch / "site", overrides={syn.ALPHA: syn.ALPHA_WITHOUT_ANCHOR})
    with registry.running(registry.PatchSets((str(patches),))), pytest.raises(PlanError) as raised:
        manifest_describe.describe(find_in(site))
    said = str(raised.value)
    assert said.startswith(f"patch {syn.FIX} is failed on SGLang {syn.VERSION}: "), said
    assert said.endswith(f"; next: `patchkit --patches {patches} track --from A --to {syn.VERSION}` (A: a release "
                         "it applies to) shows what changed"), said
