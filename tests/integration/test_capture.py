"""`patchkit capture` on real release trees: hand edits become a diff patch that `git apply`
takes on a checkout of the pristine release and gives the edited bytes; patchkit's own bytes are
left out; a patched file edited since is refused (exit 4); the tree is never written."""

from __future__ import annotations

import pytest

from testing.checkout import checkout, git, package_bytes, wheel_home
from testing.cli import run
from testing.releases import pristine, snapshot

pytestmark = pytest.mark.integration

VERSION = "0.5.17"
OFFLOADER = "sglang/srt/utils/offloader.py"
MODEL_CONFIG = "sglang/srt/configs/model_config.py"
ADDED = "sglang/srt/utils/my_helper.py"
COMMON = "sglang/srt/utils/common.py"


@pytest.fixture
def home(tmp_path, monkeypatch):
    monkeypatch.setenv("PATCHKIT_HOME", str(wheel_home(tmp_path / "home", (VERSION,))))


def hand_edit(site) -> None:
    """Two real files edited as a user would, and a module added."""
    path = site / OFFLOADER
    path.write_bytes(path.read_bytes().replace(b"class OffloaderV1(BaseOffloader):\n",
                                               b"class OffloaderV1(BaseOffloader):\n    # tuned by hand\n", 1))
    path = site / MODEL_CONFIG
    path.write_bytes(path.read_bytes() + b"\n\nHAND_EDITED = True\n")
    (site / ADDED).write_bytes(b"def helper():\n    return 42\n")


def test_capture_writes_the_hand_edits_as_a_diff(home, release, tmp_path):
    site = release(VERSION)
    repo = checkout(site, tmp_path / "repo")  # the pristine release's files, before the edits
    hand_edit(site)
    before = snapshot(site)
    out = tmp_path / "mine"
    result = run("capture", "my-tuning", "--site-packages", site, "--out", out, "--json")
    assert result.exit_code == 0, result.stderr
    report = result.json()
    assert [f["file"] for f in report["files"]] == sorted([OFFLOADER, MODEL_CONFIG])
    assert any(ADDED in note and "does not have" in note for note in report["notes"])
    assert snapshot(site) == before  # nothing written or recorded in the tree
    diff = out / "my-tuning.patch"
    assert report["path"] == str(diff)
    assert diff.read_text().startswith("Patchkit-Id: my-tuning\n")
    checked = git(repo, "apply", "--directory=python", "--check", diff, check=False)  # a/sglang/... paths
    assert checked.returncode == 0, checked.stderr
    git(repo, "apply", "--directory=python", diff)
    assert package_bytes(repo / "python") == {rel: data for rel, data in package_bytes(site).items() if rel != ADDED}

    again = run("capture", "my-tuning", "--site-packages", site, "--out", out)
    assert again.exit_code == 2 and "exists already" in again.stderr


def test_patchkit_bytes_are_left_out_and_a_patched_file_edited_since_is_refused(home, release, tmp_path):
    site = release(VERSION, extra=(COMMON,))
    assert run("apply", "--site-packages", site).exit_code == 0
    out = tmp_path / "mine"
    nothing = run("capture", "my-tuning", "--site-packages", site, "--out", out)
    assert nothing.exit_code == 1 and "nothing to capture" in nothing.stderr, nothing.stderr

    path = site / COMMON
    path.write_bytes(path.read_bytes().replace(b"\nimport os\n", b"\nimport os  # mine\n", 1))
    only_mine = run("capture", "my-tuning", "--site-packages", site, "--out", out, "--json")
    assert only_mine.exit_code == 0, only_mine.stderr
    assert [f["file"] for f in only_mine.json()["files"]] == [COMMON]
    assert any("patchkit wrote" in note and OFFLOADER in note for note in only_mine.json()["notes"])

    path = site / OFFLOADER  # patched by cpu-offload-tied-params, then edited by hand
    path.write_bytes(path.read_bytes() + b"# mine\n")
    before, folder = snapshot(site), snapshot(out)
    refused = run("capture", "other-tuning", "--site-packages", site, "--out", out)
    assert refused.exit_code == 4, refused.stderr
    assert f"{OFFLOADER} carries patch cpu-offload-tied-params and was changed since" in refused.stderr
    assert snapshot(site) == before and snapshot(out) == folder


def test_nothing_to_capture_and_no_wheel(release, tmp_path, monkeypatch):
    monkeypatch.setenv("PATCHKIT_HOME", str(tmp_path / "home"))
    site = release(VERSION)
    out = tmp_path / "mine"
    nothing = run("capture", "my-tuning", "--site-packages", site, "--out", out)
    assert nothing.exit_code == 1 and "nothing to capture" in nothing.stderr
    assert not (tmp_path / "home" / "wheels").exists()  # told by the RECORD hashes: no download

    metadata = next(site.glob("sglang-*.dist-info")) / "METADATA"
    metadata.write_text(metadata.read_text().replace(f"Version: {VERSION}\n", "Version: 0.5.99\n"))
    hand_edit(site)
    no_wheel = run("capture", "my-tuning", "--site-packages", site, "--out", out)
    assert no_wheel.exit_code == 3 and "cannot download SGLang 0.5.99" in no_wheel.stderr, no_wheel.stderr
    assert not out.exists()


def test_without_a_record_the_wheel_tells_what_changed(home, tmp_path):
    """A source tree (a checkout's python/) has no RECORD: the wheel's CRCs tell the edited files."""
    from testing.releases import source_project

    project = source_project(VERSION, tmp_path / "python")
    path = project / OFFLOADER
    path.write_bytes(path.read_bytes() + b"# mine\n")
    result = run("capture", "my-tuning", "--source", project, "--out", tmp_path / "mine", "--json")
    assert result.exit_code == 0, result.stderr
    assert [f["file"] for f in result.json()["files"]] == [OFFLOADER]
    assert pristine(VERSION).is_dir()


def test_revert_and_apply_take_a_captured_tree_back_and_forth(home, release, tmp_path):
    site = release(VERSION)
    release_tree = snapshot(site)
    hand_edit(site)
    (site / ADDED).unlink()  # not captured (a new file): the round trip is about the two edited files
    edited = package_bytes(site)
    out = tmp_path / "mine"
    assert run("capture", "my-tuning", "--site-packages", site, "--out", out).exit_code == 0

    with_diff = ("--patches", out)
    status = run(*with_diff, "status", "--site-packages", site, "--json").json()["patches"]
    mine = next(p for p in status if p["id"] == "my-tuning")
    assert mine["state"] == "applied" and "applied by hand" in mine["detail"], mine
    for _ in range(2):
        reverted = run(*with_diff, "revert", "--site-packages", site, "--json")
        assert reverted.exit_code == 0, reverted.stderr
        assert reverted.json()["reverted"] == ["my-tuning"]
        assert snapshot(site) == release_tree  # the release's bytes, no .patchkit/ left
        states = {p["id"]: p["state"] for p in run(*with_diff, "status", "--site-packages", site, "--json").json()["patches"]}
        assert states["my-tuning"] == "pending"
        applied = run(*with_diff, "apply", "--only", "my-tuning", "--site-packages", site)
        assert applied.exit_code == 0, applied.stderr
        assert package_bytes(site) == edited


def test_the_next_commands_name_the_captured_tree(home, release, tmp_path):
    """`capture --site-packages DIR` printed `patchkit --patches OUT revert`: pasted in a venv whose
    own SGLang was patched, it reverted that venv's patches (issue 37.1). Each command it names,
    run as printed, acts on DIR; here this Python has no SGLang, so a bare command could not."""
    import re
    import shlex

    site = release(VERSION)
    release_tree = snapshot(site)
    hand_edit(site)
    (site / ADDED).unlink()
    edited = package_bytes(site)
    out = tmp_path / "mine"
    result = run("capture", "my-tuning", "--site-packages", site, "--out", out)
    assert result.exit_code == 0, result.stderr
    as_json = run("capture", "again", "--site-packages", site, "--out", tmp_path / "again", "--json").json()
    assert f"--site-packages {shlex.quote(str(site))}" in as_json["next"]
    (line,) = [line for line in result.stdout.splitlines() if line.startswith("next: ")]
    revert, apply = [shlex.split(command)[1:] for command in re.findall(r"`(patchkit [^`]+)`", line)]
    for command in (revert, apply):
        assert command[command.index("--site-packages") + 1] == str(site), line
    assert run(*revert).exit_code == 0 and snapshot(site) == release_tree  # the tree captured, back to the release
    assert run(*apply).exit_code == 0 and package_bytes(site) == edited
