"""The field's diffs (testing.field_diffs: 30 files of upstream's changes re-based onto
0.5.15.post1, named `v0.5.15.post1-sglang.patch`) through the commands a new user runs."""

from __future__ import annotations

import pytest

from testing.checkout import wheel_home
from testing.cli import run
from testing.field_diffs import field_diff

pytestmark = pytest.mark.integration

FIELD_ID = "v0-5-15-post1-sglang"


@pytest.fixture
def home(tmp_path, monkeypatch):
    monkeypatch.setenv("PATCHKIT_HOME", str(wheel_home(tmp_path / "home", ("0.5.15.post1", "0.5.13"))))


def test_a_diff_that_does_not_apply_names_its_units_in_status_and_apply(home, release, tmp_path):
    """issue 37: status and apply named 40 files under "cause: an upstream change"; the detail
    names each unit that does not apply (`file:Class.method` and why), text and --json, as rebase does."""
    field = field_diff("0.5.15.post1")
    path = field.write(tmp_path)
    site = release("0.5.13", extra=tuple(rel for rel in field.after))
    unit = ("sglang/srt/disaggregation/prefill.py:SchedulerDisaggregationPrefillMixin.process_prefill_chunk "
            "changed here and by the diff in the same lines")
    gone = ("sglang/srt/disaggregation/prefill.py:SchedulerDisaggregationPrefillMixin.maybe_send_cached_prefix_chunk "
            "not in the file (removed or renamed)")
    found = {p["id"]: p for p in run("--patches", path, "status", "--site-packages", site, "--json").json()["patches"]}
    row = found[FIELD_ID]
    assert row["state"] == "failed"
    # A file of the diff missing from the release no longer hides why the others fail.
    assert "sglang/srt/arg_groups/arg_utils.py is not in this release" in row["detail"]
    assert unit in row["detail"] and gone in row["detail"]
    text = run("--patches", path, "status", "--site-packages", site)
    assert unit in text.stdout and gone in text.stdout
    applied = run("--patches", path, "apply", "--only", FIELD_ID, "--site-packages", site)
    assert applied.exit_code == 1 and unit in applied.stderr + applied.stdout
