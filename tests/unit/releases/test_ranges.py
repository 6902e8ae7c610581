"""One source of truth for a patch's range: the range it declares (`list`, `apply`'s warning)
agrees with the verified matrix (the committed manifests, which `manifest check` holds to the
real releases)."""

from __future__ import annotations

import pytest
from packaging.version import Version

from patchkit.releases import manifest
from patchkit.engine import registry

VERSIONS = manifest.available()
MANIFESTS = {v: manifest.load(v) for v in VERSIONS}


@pytest.mark.parametrize("patch", registry.load_all(), ids=lambda cls: cls.ID)
def test_declared_range_matches_the_matrix(patch):
    spec = patch.specifier()
    applies = [v for v in VERSIONS if MANIFESTS[v].patches[patch.ID].verdict == "applies"]
    assert applies, f"{patch.ID} applies to no release patchkit has a manifest for"
    outside = [v for v in applies if not spec.contains(Version(v), prereleases=True)]
    assert not outside, f"{patch.ID}: APPLIES_TO {patch.APPLIES_TO!r} leaves out {outside}, where it applies"
    inside = [v for v in VERSIONS if spec.contains(Version(v), prereleases=True)]
    assert inside[0] == applies[0], (
        f"{patch.ID}: APPLIES_TO {patch.APPLIES_TO!r} starts at {inside[0]}, but the patch first applies to {applies[0]}")


@pytest.mark.parametrize("patch", registry.load_all(), ids=lambda cls: cls.ID)
def test_declared_range_ends_where_the_patch_last_applies(patch):
    """An upper bound too: a range that runs on past the last release the patch applies to (upstream
    fixed it there) tells `list` and `apply`'s warning the wrong thing."""
    spec = patch.specifier()
    applies = [v for v in VERSIONS if MANIFESTS[v].patches[patch.ID].verdict == "applies"]
    inside = [v for v in VERSIONS if spec.contains(Version(v), prereleases=True)]
    assert inside and inside[-1] == applies[-1], (
        f"{patch.ID}: APPLIES_TO {patch.APPLIES_TO!r} ends at {inside[-1] if inside else None}, but the patch last "
        f"applies to {applies[-1]} (later: {[MANIFESTS[v].patches[patch.ID].verdict for v in VERSIONS[VERSIONS.index(applies[-1]) + 1:]]})")
