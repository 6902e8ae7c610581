"""An upstream-fixed verdict's detail (upstream's fix narrower than the patch) is kept in the
manifest, so `status` on a pristine release (decided by hashes) and `matrix` say it without parsing;
a detail of another type is a corrupt manifest."""

from __future__ import annotations

import json

import pytest

from patchkit.base.errors import TargetError
from patchkit.engine import upstream
from patchkit.releases import manifest


def test_the_committed_manifests_carry_mtp_layer_detections_narrower_fix():
    for version in manifest.available():
        entry = manifest.load(version).patches["mtp-layer-detection"]
        if entry.verdict == "upstream-fixed":
            assert entry.detail.startswith("upstream's fix is narrower than this patch"), version
        else:
            assert entry.detail == "", version


def test_detail_round_trips_and_is_typed():
    found = manifest.load("0.5.23")
    again = manifest.parse(found.to_json(), "0.5.23.json")
    assert again == found and again.patches["mtp-layer-detection"].detail == found.patches["mtp-layer-detection"].detail
    data = json.loads(found.to_json())
    data["patches"]["mtp-layer-detection"]["detail"] = ["not", "a", "string"]
    with pytest.raises(TargetError, match="detail"):
        manifest.parse(json.dumps(data), "0.5.23.json")


def test_matrix_notes_group_a_detail_by_the_releases_it_holds_on():
    versions = ["0.5.17", "0.5.18", "0.5.19", "0.5.20"]
    rows = [{"id": "p", "details": {"0.5.18": "narrower", "0.5.19": "narrower", "0.5.20": "other"}},
            {"id": "q", "details": {}}]
    assert upstream.detail_notes(rows, versions) == ["p (0.5.18-0.5.19): narrower", "p (0.5.20): other"]
