"""engine/bump_releases.py on real releases: V0 inferred from the loaded diffs (issue 40.11a)."""

from __future__ import annotations

import pytest

from testing.checkout import wheel_home
from testing.cli import run

pytestmark = pytest.mark.integration

DEVICE_CONFIG = "sglang/srt/configs/device_config.py"  # the same bytes on 0.5.13-0.5.23


def test_a_diff_of_a_file_several_releases_share_is_for_the_oldest_of_them(tmp_path, monkeypatch):
    """device_config.py is the same in 0.5.16, 0.5.17 and 0.5.23 (all three cached): a diff of it
    bumped --to 0.5.17 is a diff for 0.5.16 moved to 0.5.17 (the range said on stderr and in
    REPORT.md), never one for 0.5.23 refused as backwards."""
    from testing.diffs import git_diff
    from testing.releases import pristine

    monkeypatch.setenv("PATCHKIT_HOME", str(wheel_home(tmp_path / "home", ("0.5.16", "0.5.17", "0.5.23"))))
    before = (pristine("0.5.17") / DEVICE_CONFIG).read_bytes()
    assert before == (pristine("0.5.16") / DEVICE_CONFIG).read_bytes() == (pristine("0.5.23") / DEVICE_CONFIG).read_bytes()
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "device-fix.patch").write_bytes(git_diff(
        {DEVICE_CONFIG: before}, {DEVICE_CONFIG: before.replace(b"Not supported device type", b"Not a supported device")},
        prefix="python/"))
    out = tmp_path / "bump"
    done = run("--patches", tmp_path / "mine", "bump", "--to", "0.5.17", "-o", out, "--json")
    assert done.exit_code == 0, done.stderr
    report = done.json()
    assert (report["from"], report["to"]) == ("0.5.16", "0.5.17")
    said = "V0 is 0.5.16: the loaded diffs' files are the same in 0.5.16, 0.5.17, 0.5.23"
    assert said in done.stderr and any(note.startswith(said) for note in report["notes"])
    assert said in (out / "REPORT.md").read_text()
    row = next(row for row in report["patches"] if row["id"] == "device-fix")
    assert (row["on_from"], row["action"]) == ("applies", "carries over")
