"""The committed manifests were made with today's patch sources: `matrix` takes its verdicts from
them, by hashes alone, only for the patch set they record (`patch_sha256`), so a patch edited
without `patchkit manifest update` would silently send a cold `matrix` back to parsing every
release (2.5x the download time instead of about 1x; bench/matrix.py)."""

from __future__ import annotations

import pytest

from patchkit.engine import identity, registry
from patchkit.releases import manifest


@pytest.mark.parametrize("version", manifest.available())
def test_manifest_was_made_with_todays_patch_sources(version):
    recorded = manifest.load(version)
    changed = recorded.changed_patches(manifest.Manifest(version, patch_sha256=identity.digests(registry.patch_ids())))
    assert not changed, (f"manifests/{version}.json was made with another source of {', '.join(changed)}: run "
                         f"`patchkit manifest update {' '.join(manifest.available())}` (it checks nothing "
                         "changed in the verdicts: `git diff manifests/`)")
    # Only "no target file" (matrix then searches the whole package for moved code) has no reads.
    assert all(entry.reads for entry in recorded.patches.values() if entry.verdict != "not-applicable"), version
