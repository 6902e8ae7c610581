"""patchkit.diffs.diffpatch: a diff file as a Patch class of the registry, on a synthetic file and a
synthetic cached release holding its pre-image (the per-unit merge it asks is tests/unit/diffs/
test_unit_merge.py): the status detail that names units already in their patched form."""

from __future__ import annotations

from patchkit.diffs import diffpatch
from testing.diffs import git_diff
from tests.unit.diffs.test_unit_merge import BASE, PATCHED, REL


def test_the_status_detail_names_units_already_in_their_patched_form(tmp_path, patchkit_home):
    from tests.unit.diffs.test_release_blobs import wheel

    wheel(patchkit_home, "0.5.98", {REL: BASE})  # the diff's pre-image, found by its blob hash
    path = tmp_path / "d.patch"
    path.write_bytes(git_diff({REL: BASE}, {REL: PATCHED}))
    patch = diffpatch.patch_class(path, "test")()
    target = BASE.replace(b"return 2", b"return 20") + b"\n\nx = 1\n"  # g already changed upstream
    assert not patch.is_fixed_upstream(REL, target)
    assert patch.notes(REL, target) == [f"{REL}: 1 of 4 unit(s) already in their patched form (g)"]
    assert patch.transform(REL, target) == PATCHED + b"\n\nx = 1\n"
    assert patch.is_fixed_upstream(REL, PATCHED + b"\n\nx = 1\n")
