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
