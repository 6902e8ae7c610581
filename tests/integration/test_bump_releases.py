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


def test_files_outside_the_package_are_named_from_round_one_with_what_to_do(tmp_path, monkeypatch):
    """issue 40 item 9: a diff's files outside the installed package (a test, a kernel source, the
    checkout's python/pyproject.toml) were in no report of the first round. Each is named in the
    diff's row (--json `outside`), in REPORT.md, and in the next steps (what the user must do)."""
    from testing.diffs import git_diff
    from testing.releases import pristine

    monkeypatch.setenv("PATCHKIT_HOME", str(wheel_home(tmp_path / "home", ("0.5.16", "0.5.17"))))
    before = (pristine("0.5.16") / DEVICE_CONFIG).read_bytes()
    inside = git_diff({DEVICE_CONFIG: before, "pyproject.toml": b'dependencies = ["torch"]\n'},
                      {DEVICE_CONFIG: before.replace(b"Not supported device type", b"Not a supported device"),
                       "pyproject.toml": b'dependencies = ["torch", "mine"]\n'}, prefix="python/")
    elsewhere = git_diff({"test/srt/test_device.py": b"x = 1\n", "sgl-kernel/csrc/k.cu": b"// k\n"},
                         {"test/srt/test_device.py": b"x = 2\n", "sgl-kernel/csrc/k.cu": b"// k2\n"})
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "device-fix.patch").write_bytes(inside + elsewhere)
    out = tmp_path / "my bump"
    done = run("--patches", tmp_path / "mine", "bump", "--from", "0.5.16", "--to", "0.5.17", "-o", out, "--json")
    assert done.exit_code == 0, done.stderr
    report = done.json()
    files = ["python/pyproject.toml", "sgl-kernel/csrc/k.cu", "test/srt/test_device.py"]
    row = next(row for row in report["patches"] if row["id"] == "device-fix")
    assert sorted(row["outside"]) == files, row
    step = next(step for step in report["next"] if "outside the sglang package" in step)
    assert all(rel in step for rel in files) and "checkout yourself" in step
    text = (out / "REPORT.md").read_text()
    assert "## Outside the sglang package" in text and all(f"`{rel}`" in text for rel in files)
    # To finish: pasteable, the folder with a space quoted.
    assert f"`patchkit --patches '{out}' apply`" in text


def test_a_diff_wholly_outside_the_package_is_named_written_unchanged_and_the_set_finishes(tmp_path, monkeypatch):
    """issue 40 item 9 (the field's 27-patch stack holds a patch that only pins a dependency in
    python/pyproject.toml): such a diff was a load error, so the bump could not finish the set
    (exit 1, the patch file left out). It is named from round one as outside the package with what to
    do (check it against V by hand), written to DIR unchanged, and the set finishes: exit 0, the
    diff beside it carried over as before, DIR a set every command loads."""
    from testing.diffs import git_diff
    from testing.releases import pristine

    monkeypatch.setenv("PATCHKIT_HOME", str(wheel_home(tmp_path / "home", ("0.5.16", "0.5.17"))))
    before = (pristine("0.5.16") / DEVICE_CONFIG).read_bytes()
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "device-fix.patch").write_bytes(git_diff(
        {DEVICE_CONFIG: before}, {DEVICE_CONFIG: before.replace(b"Not supported device type", b"Not a supported device")},
        prefix="python/"))
    pin = tmp_path / "mine" / "0002-pin-torch.patch"
    pin.write_bytes(git_diff({"pyproject.toml": b'dependencies = ["torch==2.9.1"]\n'},
                             {"pyproject.toml": b'dependencies = ["torch==2.9.1", "flashinfer-python==0.6.1"]\n'},
                             prefix="python/"))
    out = tmp_path / "bump"
    done = run("--patches", tmp_path / "mine", "bump", "--from", "0.5.16", "--to", "0.5.17", "-o", out, "--json")
    assert done.exit_code == 0, done.stderr
    report = done.json()
    assert report["complete"] and not report["left_out"] and not report["blocked"], report
    rows = {row["id"]: row for row in report["patches"]}
    assert (rows["device-fix"]["action"], rows["device-fix"]["written"]) == ("carries over", "device-fix.patch")
    row = rows["pin-torch"]
    assert (row["on_from"], row["on_to"], row["action"]) == ("not-applicable", "not-applicable", "not applicable"), row
    assert row["written"] == pin.name and row["outside"] == ["python/pyproject.toml"], row
    assert (out / pin.name).read_bytes() == pin.read_bytes()  # unchanged
    step = next(step for step in report["next"] if "nothing inside the sglang package" in step)
    assert "check by hand against SGLang 0.5.17" in step and f"{pin.name}: python/pyproject.toml" in step
    text = (out / "REPORT.md").read_text()
    assert f"- `pin-torch`: `python/pyproject.toml` (the whole diff: written to DIR unchanged as `{pin.name}`; " \
           "check it against 0.5.17 by hand)" in text, text
    assert "| `pin-torch` | not-applicable | not-applicable | not applicable |" in text
    assert run("--patches", out, "list").exit_code == 0  # a finished set, not refused


RETIRED = "sglang/srt/configs/interns2preview.py"  # the same bytes on 0.5.16 and 0.5.17


def test_an_upper_diff_re_creating_a_file_its_lower_one_deletes_is_made_on_it(tmp_path, monkeypatch):
    """A lower diff deletes a module (a stack retiring a model), the diff stacked on it creates that
    file again. bump's stack held the deleted file as empty bytes on V (`apply_on`), and its rebase
    of the upper diff read V's own file where the lower one had deleted it (`rebase_stack`): the upper
    one was a conflict, "the diff creates it, and it is there with other bytes", exit 1. A file a
    diff before it deletes is absent to it, as `git apply` of the two in order leaves it: both
    written, applying on 0.5.17 in order as on 0.5.16."""
    from testing.diffs import git_apply, git_diff
    from testing.releases import pristine

    monkeypatch.setenv("PATCHKIT_HOME", str(wheel_home(tmp_path / "home", ("0.5.16", "0.5.17"))))
    device, retired = ((pristine("0.5.16") / rel).read_bytes() for rel in (DEVICE_CONFIG, RETIRED))
    middle = device.replace(b"Not supported device type", b"Not a supported device")
    top = middle.replace(b"Not a supported device", b"Not a supported device here")
    again = retired.replace(b'model_type = "intern_s2_preview"', b'model_type = "intern_s2_preview_v2"')
    (tmp_path / "mine").mkdir()
    lower = tmp_path / "mine" / "a-retire.patch"
    lower.write_bytes(git_diff({DEVICE_CONFIG: device, RETIRED: retired}, {DEVICE_CONFIG: middle, RETIRED: None},
                               prefix="python/"))
    upper = tmp_path / "mine" / "b-again.patch"
    upper.write_bytes(git_diff({DEVICE_CONFIG: middle, RETIRED: None}, {DEVICE_CONFIG: top, RETIRED: again},
                               prefix="python/"))
    assert b"deleted file mode" in lower.read_bytes() and b"new file mode" in upper.read_bytes()
    out = tmp_path / "bump"
    done = run("--patches", tmp_path / "mine", "bump", "--from", "0.5.16", "--to", "0.5.17", "-o", out, "--json")
    rows = {row["id"]: row for row in done.json()["patches"]}
    assert done.exit_code == 0, (rows["a-retire"], rows["b-again"])
    assert done.json()["order"] == [lower.name, upper.name]
    for pid in ("a-retire", "b-again"):
        assert rows[pid]["on_from"] == "applies" and rows[pid]["action"] in ("carries over", "rebased"), rows[pid]
    files: dict[str, bytes | None] = {"python/" + rel: (pristine("0.5.17") / rel).read_bytes()
                                      for rel in (DEVICE_CONFIG, RETIRED)}
    for name in (lower.name, upper.name):
        code, files, err = git_apply(files, (out / name).read_bytes())
        assert code == 0, (name, err)
    assert files == {"python/" + DEVICE_CONFIG: top, "python/" + RETIRED: again}
