"""Diff patches as the field writes them, on real releases: the parts of a `git diff` patchkit
cannot carry out (a renamed file, a binary change, a created file that is not Python) are refused at load
with one line naming the file, never silently dropped or half done; a mode change is left out
with a note; a bad header is exit 2, not a crash; a patch the state records but that is no
longer loaded does not crash `apply`. Every diff is made by real git from real release files."""

from __future__ import annotations

import os

import pytest

from testing.cli import run
from testing.diffs import git, git_apply, git_diff, repo_of
from testing.releases import pristine, snapshot

pytestmark = pytest.mark.integration

OFFLOADER = "sglang/srt/utils/offloader.py"
HF_UTILS = "sglang/srt/utils/hf_transformers_utils.py"
DEVICE_CONFIG = "sglang/srt/configs/device_config.py"


def _release_file(rel: str, version: str = "0.5.20") -> bytes:
    return (pristine(version) / rel).read_bytes()


def _fix() -> tuple[bytes, bytes]:
    """offloader.py of 0.5.20 and of 0.5.21 (upstream's tied-parameters fix)."""
    return _release_file(OFFLOADER), _release_file(OFFLOADER, "0.5.21")


def _with_mode(before: dict[str, bytes], after: dict[str, bytes], executable: str, tmp_path,
               binary: dict[str, bytes] | None = None) -> bytes:
    """`git diff --binary` of `before` -> `after` with `executable` made 0755 (and `binary` files added)."""
    repo = repo_of(tmp_path / "repo", before)
    for rel, data in {**after, **(binary or {})}.items():
        (repo / rel).parent.mkdir(parents=True, exist_ok=True)
        (repo / rel).write_bytes(data)
    os.chmod(repo / executable, 0o755)
    git(repo, "add", "-A")
    return git(repo, "diff", "--cached", "--binary").stdout


def _refused(tmp_path, site, name: str, diff: bytes, *words: str) -> None:
    path = tmp_path / f"{name}.patch"
    path.write_bytes(diff)
    before = snapshot(site)
    for command in (("list",), ("status", "--site-packages", site), ("apply", "--site-packages", site)):
        result = run("--patches", path, *command)
        assert result.exit_code == 2, (command, result.stdout, result.stderr)
        line = result.stderr.strip()
        assert len(line.splitlines()) == 1 and str(path) in line, line
        for word in words:
            assert word in line, line
    assert snapshot(site) == before


def test_renamed_binary_and_created_non_python_files_are_refused_at_load(tmp_path, release):
    site = release("0.5.20", extra=(OFFLOADER, HF_UTILS))
    old, new = _fix()
    # git apply would rename these files or create a data file; patchkit says so instead of
    # applying the rest (a renamed one was recorded as applied without a backup, and revert then
    # exited 1). A created or deleted Python file is applied (test_diff_moved_and_whole_files).
    _refused(tmp_path, site, "creates", git_diff({OFFLOADER: old}, {OFFLOADER: new, "sglang/srt/utils/new_helper.json": b"{}\n"}),
             "creates sglang/srt/utils/new_helper.json, which is not a Python file")
    _refused(tmp_path, site, "renames", git_diff({OFFLOADER: old}, {OFFLOADER: None, "sglang/srt/utils/offloader2.py": old}),
             f"renames {OFFLOADER} to sglang/srt/utils/offloader2.py")
    _refused(tmp_path, site, "renames-edits", git_diff({OFFLOADER: old}, {OFFLOADER: None, "sglang/srt/utils/offloader2.py": new}),
             f"renames {OFFLOADER}")
    blob = bytes(range(256)) * 8
    _refused(tmp_path, site, "binary", _with_mode({OFFLOADER: old, "sglang/srt/data.bin": blob[:1000]},
                                                  {OFFLOADER: new, "sglang/srt/data.bin": blob}, OFFLOADER, tmp_path),
             "binary change of sglang/srt/data.bin")


def test_a_mode_change_is_left_out_with_a_note_and_the_hunks_apply_as_git_apply_does(tmp_path, release):
    site = release("0.5.20", extra=(OFFLOADER,))
    old, new = _fix()
    diff = _with_mode({OFFLOADER: old}, {OFFLOADER: new}, OFFLOADER, tmp_path)
    assert b"new mode 100755" in diff
    path = tmp_path / "offloader-mode.patch"
    path.write_bytes(diff)
    result = run("--patches", path, "apply", "--site-packages", site, "--only", "offloader-mode")
    assert result.exit_code == 0, result.stderr
    assert f"mode change of {OFFLOADER} (100644 -> 100755) left out" in result.stderr + result.stdout
    code, expected, err = git_apply({OFFLOADER: old}, diff)
    assert code == 0, err
    assert (site / OFFLOADER).read_bytes() == expected[OFFLOADER] == new
    assert run("--patches", path, "revert", "--site-packages", site).exit_code == 0
    assert (site / OFFLOADER).read_bytes() == old
    # A diff whose only change is a mode has nothing patchkit applies: exit 1, nothing written.
    only_mode = tmp_path / "only-mode.patch"
    only_mode.write_bytes(_with_mode({OFFLOADER: old}, {OFFLOADER: old}, OFFLOADER, tmp_path / "again"))
    before = snapshot(site)
    result = run("--patches", only_mode, "apply", "--site-packages", site)
    assert result.exit_code == 1 and "no change to a file of the sglang package" in result.stderr, result.stderr
    assert snapshot(site) == before


@pytest.mark.parametrize("spec", [">=0.5.x", "0.5.20", "~=1"])
def test_a_bad_applies_to_is_exit_2_naming_the_file_not_a_crash(tmp_path, release, spec):
    site = release("0.5.20", extra=(OFFLOADER,))
    old, new = _fix()
    path = tmp_path / "bad-range.patch"
    path.write_bytes(git_diff({OFFLOADER: old}, {OFFLOADER: new}, header=f"Patchkit-Applies-To: {spec}\n"))
    before = snapshot(site)
    for command in (("list",), ("apply", "--site-packages", site, "--only", "bad-range")):
        result = run("--patches", path, *command)
        assert result.exit_code == 2, (command, result.stderr)
        assert str(path) in result.stderr and repr(spec) in result.stderr and "PEP 440" in result.stderr, result.stderr
    assert snapshot(site) == before


def test_apply_after_the_applied_diff_file_is_gone_applies_the_rest_and_revert_restores_all(tmp_path, release):
    site = release("0.5.20", extra=(OFFLOADER,))
    before = snapshot(site)
    old, new = _fix()
    path = tmp_path / "offloader-fix.patch"
    path.write_bytes(git_diff({OFFLOADER: old}, {OFFLOADER: new}))
    assert run("--patches", path, "apply", "--site-packages", site, "--only", "offloader-fix").exit_code == 0
    path.unlink()
    # The built-in set alone (cpu-offload-tied-params shares offloader.py with the recorded diff):
    # this was an unexpected KeyError, exit 70.
    result = run("apply", "--site-packages", site)
    assert result.exit_code == 0, result.stderr
    assert "offloader-fix" in result.stderr and "not loaded here" in result.stderr
    assert (site / OFFLOADER).read_bytes() == new
    result = run("revert", "--site-packages", site)
    assert result.exit_code == 0, result.stderr
    assert snapshot(site) == before


def test_a_diff_converted_to_crlf_applies_as_the_diff_git_wrote_with_a_note(tmp_path, release):
    site = release("0.5.20", extra=(OFFLOADER,))
    old, new = _fix()
    diff = git_diff({OFFLOADER: old}, {OFFLOADER: new})
    converted = diff.replace(b"\n", b"\r\n")
    assert git_apply({OFFLOADER: old}, converted, "--check")[0] != 0  # git calls it a patch that does not apply
    path = tmp_path / "offloader-crlf.patch"
    path.write_bytes(converted)
    result = run("--patches", path, "apply", "--site-packages", site, "--only", "offloader-crlf")
    assert result.exit_code == 0, result.stderr
    assert "ends in CRLF" in result.stderr + result.stdout
    assert (site / OFFLOADER).read_bytes() == new


def test_a_hunk_that_holds_more_lines_than_its_header_counts_is_exit_2_as_git_refuses_it(tmp_path, release):
    import re

    site = release("0.5.20", extra=(OFFLOADER,))
    old, new = _fix()
    diff = git_diff({OFFLOADER: old}, {OFFLOADER: new})
    # The first hunk's header counts two lines fewer on each side (a hand-edited diff).
    short = re.sub(rb"@@ -(\d+),(\d+) \+(\d+),(\d+)", lambda m: b"@@ -%s,%d +%s,%d" % (
        m.group(1), int(m.group(2)) - 2, m.group(3), int(m.group(4)) - 2), diff, count=1)
    assert short != diff and git_apply({OFFLOADER: old}, short, "--check")[0] != 0
    path = tmp_path / "short-hunk.patch"
    path.write_bytes(short)
    before = snapshot(site)
    result = run("--patches", path, "apply", "--site-packages", site)
    assert result.exit_code == 2, result.stderr
    assert str(path) in result.stderr and "a hunk outside any file" in result.stderr, result.stderr
    assert snapshot(site) == before


def test_apply_on_a_file_a_captured_diff_holds_by_hand_is_refused_until_it_is_reverted(tmp_path, release, monkeypatch):
    from testing.checkout import wheel_home

    version = "0.5.17"  # cpu-offload-tied-params (built-in) is pending on offloader.py there
    monkeypatch.setenv("PATCHKIT_HOME", str(wheel_home(tmp_path / "home", (version,))))
    site = release(version)
    pristine_tree = snapshot(site)
    path = site / OFFLOADER
    path.write_bytes(path.read_bytes().replace(b"class OffloaderV1(BaseOffloader):\n",
                                               b"class OffloaderV1(BaseOffloader):\n    # tuned by hand\n", 1))
    out = tmp_path / "mine"
    assert run("capture", "my-tuning", "--site-packages", site, "--out", out).exit_code == 0
    edited = snapshot(site)
    # Applying the built-in on top made the hand edit part of the file's backup: `revert` then
    # restored the edited bytes and left my-tuning in place (upstream-fixed, then applied again).
    result = run("--patches", out, "apply", "--site-packages", site)
    assert result.exit_code == 4, result.stderr
    assert "my-tuning" in result.stderr and "cpu-offload-tied-params" in result.stderr
    assert "revert --only my-tuning" in result.stderr
    assert snapshot(site) == edited
    assert run("--patches", out, "revert", "--site-packages", site, "--only", "my-tuning").exit_code == 0
    assert snapshot(site) == pristine_tree
    result = run("--patches", out, "apply", "--site-packages", site)
    assert result.exit_code == 0, result.stderr
    assert b"# tuned by hand" in path.read_bytes()
    assert run("--patches", out, "revert", "--site-packages", site).exit_code == 0
    assert {k: v for k, v in snapshot(site).items() if not k.startswith(".patchkit")} == pristine_tree


def test_a_diff_that_fails_on_top_of_a_patch_sharing_its_file_names_that_patch(tmp_path, release):
    # The field case: a user's own fix of offloader.py (upstream's, made against 0.5.20) beside the
    # built-in cpu-offload-tied-params, which rewrites the same functions on 0.5.20 and comes first.
    site = release("0.5.20", extra=(OFFLOADER,))
    old, new = _fix()
    path = tmp_path / "offloader-fix.patch"
    path.write_bytes(git_diff({OFFLOADER: old}, {OFFLOADER: new}))
    before = snapshot(site)
    result = run("--patches", path, "apply", "--site-packages", site)
    assert result.exit_code == 1, result.stderr
    line = result.stderr.strip()
    assert len(line.splitlines()) == 1 and "patch offloader-fix" in line, line
    assert "on top of cpu-offload-tied-params" in line and "--skip cpu-offload-tied-params" in line, line
    assert snapshot(site) == before
    # Alone, it applies as git apply does.
    assert run("--patches", path, "apply", "--site-packages", site, "--skip", "cpu-offload-tied-params").exit_code == 0
    assert (site / OFFLOADER).read_bytes() == new


def test_a_format_patch_series_changing_one_file_twice_is_exit_2_not_half_applied(tmp_path, release):
    site = release("0.5.20", extra=(OFFLOADER,))
    old = _release_file(OFFLOADER)
    one = old.replace(b"class OffloaderV1(BaseOffloader):\n", b"class OffloaderV1(BaseOffloader):\n    # step one\n", 1)
    two = one.replace(b"    # step one\n", b"    # step one\n    # step two\n", 1)
    repo = repo_of(tmp_path / "repo", {OFFLOADER: old})
    for data, subject in ((one, "step one"), (two, "step two")):
        (repo / OFFLOADER).write_bytes(data)
        git(repo, "commit", "-qam", subject)
    series = git(repo, "format-patch", "--stdout", "HEAD~2").stdout
    assert series.count(b"\ndiff --git ") == 2
    # git applies both commits (the second was silently dropped: "step one" only, reported applied).
    assert git_apply({OFFLOADER: old}, series)[1][OFFLOADER] == two
    _refused(tmp_path, site, "series", series, f"{OFFLOADER} is changed by more than one section")


def test_a_diff_made_on_top_of_another_is_judged_on_its_stack_and_applies_with_it(tmp_path, release):
    site = release("0.5.20", extra=(OFFLOADER,))
    before = snapshot(site)
    old, new = _fix()
    # The second diff changes a function the first one adds (0.5.21's _get_offloaded_device_state):
    # made against the tree with the first applied, as a 0002-*.patch is.
    top = new.replace(b"def _get_offloaded_device_state(", b"def _get_offloaded_device_state(  # stacked\n", 1)
    assert top != new and b"_get_offloaded_device_state" not in old
    folder = tmp_path / "stack"
    folder.mkdir()
    (folder / "0001-base-fix.patch").write_bytes(git_diff({OFFLOADER: old}, {OFFLOADER: new}))
    (folder / "0002-on-top.patch").write_bytes(git_diff({OFFLOADER: new}, {OFFLOADER: top}, header="Patchkit-After: base-fix\n"))
    code, expected, err = git_apply({OFFLOADER: old}, (folder / "0001-base-fix.patch").read_bytes()
                                    + (folder / "0002-on-top.patch").read_bytes())
    assert code == 0 and expected[OFFLOADER] == top, err
    listed = {p["id"]: p for p in run("--patches", folder, "status", "--site-packages", site, "--json").json()["patches"]}
    # It was `failed` (judged alone on the release: "_get_offloaded_device_state not in the file").
    assert listed["on-top"]["state"] == "pending", listed["on-top"]
    assert "on top of base-fix" in listed["on-top"]["detail"]
    result = run("--patches", folder, "apply", "--site-packages", site, "--skip", "cpu-offload-tied-params")
    assert result.exit_code == 0, result.stderr
    assert (site / OFFLOADER).read_bytes() == top
    applied = snapshot(site)
    result = run("--patches", folder, "revert", "--site-packages", site, "--only", "base-fix")
    assert result.exit_code == 1 and "on-top stacks on base-fix" in result.stderr, result.stderr
    assert "--only base-fix --only on-top" in result.stderr and snapshot(site) == applied
    assert run("--patches", folder, "revert", "--site-packages", site).exit_code == 0
    assert snapshot(site) == before


@pytest.mark.parametrize("kind", ["fifo", "dangling-link"])
def test_a_diff_name_in_a_patches_folder_that_is_not_a_file_is_exit_6_not_skipped(tmp_path, release, kind):
    site = release("0.5.20", extra=(OFFLOADER,))
    old, new = _fix()
    folder = tmp_path / "set"
    folder.mkdir()
    (folder / "offloader-fix.patch").write_bytes(git_diff({OFFLOADER: old}, {OFFLOADER: new}))
    odd = folder / "0002-mine.patch"
    if kind == "fifo":
        os.mkfifo(odd)
    else:
        odd.symlink_to(tmp_path / "moved-away.patch")
    (folder / "notes.patch").mkdir()  # a folder so named is not a patch
    before = snapshot(site)
    for command in (("list",), ("apply", "--site-packages", site)):
        result = run("--patches", folder, *command)
        # It was skipped in silence: apply went on without that patch (exit 0).
        assert result.exit_code == 6, (command, result.stderr)
        assert str(odd) in result.stderr and len(result.stderr.strip().splitlines()) == 1, result.stderr
    assert snapshot(site) == before


def test_a_diff_ru_of_a_copy_kept_before_a_hand_edit_applies(tmp_path, release):
    import subprocess

    site = release("0.5.20", extra=(OFFLOADER,))
    old, new = _fix()
    work = tmp_path / "work"
    for folder, data in (("sglang.orig", old), ("sglang", new)):
        path = work / folder / OFFLOADER.removeprefix("sglang/")
        path.parent.mkdir(parents=True)
        path.write_bytes(data)
    done = subprocess.run(["diff", "-ru", "sglang.orig", "sglang"], cwd=work, capture_output=True)
    assert done.returncode == 1 and done.stdout.startswith(b"diff -ru sglang.orig/srt/utils/offloader.py"), done.stderr
    path = tmp_path / "hand-fix.patch"
    path.write_bytes(done.stdout)
    # e12d00f refused it as a diff that creates offloader.py (its old name is outside the package).
    result = run("--patches", path, "apply", "--site-packages", site, "--only", "hand-fix")
    assert result.exit_code == 0, result.stderr
    assert (site / OFFLOADER).read_bytes() == new


def test_a_diff_file_with_a_utf8_bom_keeps_its_first_file_and_utf16_is_exit_2(tmp_path, release, patchkit_home):
    from testing.releases import HOME

    (patchkit_home / "wheels").symlink_to(HOME / "wheels")  # the pre-images are found there by blob hash
    changed = ("sglang/srt/configs/kimi_linear.py", "sglang/srt/dllm/algorithm/base.py")  # by upstream in 0.5.17
    site = release("0.5.16", extra=changed)
    before = snapshot(site)
    files = {rel: ((pristine("0.5.16") / rel).read_bytes(), (pristine("0.5.17") / rel).read_bytes())
             for rel in changed}
    assert all(old != new for old, new in files.values())
    diff = git_diff({rel: old for rel, (old, _) in files.items()}, {rel: new for rel, (_, new) in files.items()},
                    prefix="python/")
    path = tmp_path / "two-files.patch"
    path.write_bytes(b"\xef\xbb\xbf" + diff)  # as PowerShell's Out-File -Encoding utf8 writes it
    listed = next(p for p in run("--patches", path, "list", "--json").json()["patches"] if p["id"] == "two-files")
    # The first `diff --git` line started with the BOM and was not seen: that file was read from its
    # ---/+++ lines without its index line, so only one of two pre-images named the release.
    assert sorted(listed["targets"]) == sorted(files)
    assert [(m["version"], m["matched"], m["total"]) for m in listed["made_for"]] == [("0.5.16", 2, 2)], listed["made_for"]
    result = run("--patches", path, "apply", "--site-packages", site, "--only", "two-files")
    assert result.exit_code == 0, result.stderr
    assert all((site / rel).read_bytes() == new for rel, (_, new) in files.items())
    assert run("--patches", path, "revert", "--site-packages", site).exit_code == 0
    assert snapshot(site) == before
    wide = tmp_path / "wide.patch"
    wide.write_bytes(diff.decode().encode("utf-16"))
    result = run("--patches", wide, "list")
    assert result.exit_code == 2 and "UTF-16" in result.stderr and str(wide) in result.stderr, result.stderr


def test_a_patchkit_after_naming_no_loaded_patch_is_a_warning(tmp_path, release):
    site = release("0.5.20", extra=(OFFLOADER,))
    old, new = _fix()
    path = tmp_path / "offloader-fix.patch"
    path.write_bytes(git_diff({OFFLOADER: old}, {OFFLOADER: new}, header="Patchkit-After: offloader-bsae\n"))
    result = run("--patches", path, "apply", "--site-packages", site, "--only", "offloader-fix")
    assert result.exit_code == 0, result.stderr
    # It was accepted in silence: the order it asks for on a shared file was never kept.
    assert "stacks after offloader-bsae" in result.stderr and "not loaded here" in result.stderr, result.stderr


def test_a_rebased_diff_with_its_conflict_block_unresolved_is_exit_2_at_load(tmp_path, release, monkeypatch):
    from testing.checkout import wheel_home

    monkeypatch.setenv("PATCHKIT_HOME", str(wheel_home(tmp_path / "home", ("0.5.20", "0.5.22"))))
    old, new = _fix()
    diff = tmp_path / "offloader-fix.patch"
    diff.write_bytes(git_diff({OFFLOADER: old}, {OFFLOADER: new}))
    out = tmp_path / "rebased.patch"
    result = run("rebase", diff, "--to", "0.5.22", "-o", out)
    assert result.exit_code == 1 and "OffloaderV2.__init__" in result.stderr, result.stderr
    assert b"\n+<<<<<<< release\n" in out.read_bytes()
    site = release("0.5.22", extra=(OFFLOADER,))
    before = snapshot(site)
    # It loaded, read `pending`, and apply then failed on invalid Python.
    for command in (("status", "--site-packages", site), ("apply", "--site-packages", site)):
        result = run("--patches", out, *command)
        assert result.exit_code == 2, (command, result.stderr)
        assert "unresolved conflict block" in result.stderr and str(out) in result.stderr, result.stderr
    assert snapshot(site) == before


def test_a_diff_wholly_outside_the_package_is_a_member_with_nothing_to_apply(tmp_path, release):
    """issue 40 item 9: a stack's diff whose every file is outside the installed package (the field's
    `python/pyproject.toml` pin; `test/...`, `sgl-kernel/...`) was a load error: left out of its folder
    with exit 1 on every command (`--patches FILE`: refused), so no set holding one could be used. It
    loads: `not-applicable` on status and apply saying what it is and where its files belong, named
    on stderr by every command that reads the set (revert, image dockerfile too), copied into an
    image's context; a set of it alone applies nothing, exit 0."""
    site = release("0.5.20", extra=(DEVICE_CONFIG,))
    before = snapshot(site)
    old = _release_file(DEVICE_CONFIG)
    new = old.replace(b"Not supported device type", b"Not a supported device")
    folder = tmp_path / "stack"
    folder.mkdir()
    (folder / "device-fix.patch").write_bytes(git_diff({DEVICE_CONFIG: old}, {DEVICE_CONFIG: new}, prefix="python/"))
    pin = folder / "pin.patch"
    pin.write_bytes(git_diff({"pyproject.toml": b'dependencies = ["torch"]\n', "test/srt/test_x.py": b"x = 1\n"},
                             {"pyproject.toml": b'dependencies = ["torch==2.9.1"]\n', "test/srt/test_x.py": b"x = 2\n"},
                             prefix="python/"))
    files = "python/pyproject.toml, python/test/srt/test_x.py"
    said = f"{pin} (pin): a diff with nothing inside the sglang package: nothing to apply here"

    def named(result, *words: str) -> None:
        assert result.exit_code == 0, (result.exit_code, result.stderr)
        assert f"note: {said}" in result.stderr and files in result.stderr, result.stderr
        for word in words:
            assert word in result.stdout, result.stdout

    listed = run("--patches", folder, "list", "--json")
    named(listed)
    row = next(row for row in listed.json()["patches"] if row["id"] == "pin")
    assert row["targets"] == [] and row["outside"] == files.split(", ") and "nothing to apply here" in row["nothing_inside"]
    named(run("--patches", folder, "list"), "nothing inside the sglang package")
    status = run("--patches", folder, "status", "--site-packages", site, "--json")
    named(status)
    rows = {row["id"]: row for row in status.json()["patches"]}
    assert rows["pin"]["state"] == "not-applicable" and files in rows["pin"]["detail"], rows["pin"]
    assert rows["device-fix"]["state"] == "pending"
    named(run("--patches", folder, "apply", "--site-packages", site), "not-applicable  pin")
    assert (site / DEVICE_CONFIG).read_bytes() == new
    named(run("--patches", folder, "revert", "--site-packages", site))
    assert snapshot(site) == before
    # A set of that diff alone: nothing to apply, exit 0, nothing written.
    alone = run("--patches", pin, "apply", "--site-packages", site, "--only", "pin")
    named(alone, "nothing to do")
    assert snapshot(site) == before
    wheel = tmp_path / "sglang_patchkit-0.1.0-py3-none-any.whl"
    wheel.write_bytes(b"PK")
    (tmp_path / "ctx").mkdir()
    image = run("--patches", folder, "image", "dockerfile", "--base", "b", "--target", "0.5.20", "--wheel", wheel,
                "-o", tmp_path / "ctx" / "Dockerfile")
    named(image)
    assert (tmp_path / "ctx" / "patchkit-patches" / "1" / "pin.patch").read_bytes() == pin.read_bytes()


@pytest.mark.parametrize("old, new, named, root", [
    ("a/vendor/sglang/python/", "b/vendor/sglang/python/", "vendor/sglang/python/", "vendor/sglang"),
    ("vendor/python/", "vendor/python/", "vendor/python/", "vendor"),
    ("site.orig/", "site/", "site/", "site")])
def test_a_package_file_under_another_folder_is_exit_2_not_a_diff_with_nothing_inside(tmp_path, release, old, new,
                                                                                       named, root):
    """A diff of a checkout kept under another folder (`a/vendor/sglang/python/sglang/...`, `git
    diff` from a monorepo's root) or of two copies of the package (`diff -ru site.orig site`) names
    a file of the package under a prefix patchkit does not strip. Since 3eac3bc such a diff loaded
    as one with nothing inside the package: `not-applicable`, apply exit 0 with the fix not
    applied. It is exit 2 naming the file and the folder to make the diff from, nothing written."""
    site = release("0.5.20", extra=(DEVICE_CONFIG,))
    old_bytes = _release_file(DEVICE_CONFIG)
    new_bytes = old_bytes.replace(b"Not supported device type", b"Not a supported device")
    diff = git_diff({DEVICE_CONFIG: old_bytes}, {DEVICE_CONFIG: new_bytes}, prefix="python/")
    diff = diff.replace(b"a/python/", old.encode()).replace(b"b/python/", new.encode())
    _refused(tmp_path, site, "vendored", diff, f"{named}{DEVICE_CONFIG} is {DEVICE_CONFIG} of the package under "
             f"{named}", f"make the diff from {root}/")


@pytest.mark.parametrize("section", [
    b"old mode 100644\nnew mode 100755\n",  # a mode change alone
    b"index 1111111..2222222 100644\n--- a/python/pyproject.toml\n+++ b/python/pyproject.toml\n"])  # no hunk
def test_a_diff_changing_nothing_outside_the_package_is_exit_1_as_a_mode_only_diff(tmp_path, release, section):
    """A diff whose one file is outside the package and changes nothing (a mode change alone, a
    header without hunks) loaded as a member with "its files ... yours to carry there", exit 0
    (3eac3bc), while the same inside the package is exit 1: a diff with no change at all stays exit
    1 (docs/diffs.md), whichever side of the package its file is on; nothing written."""
    site = release("0.5.20")
    path = tmp_path / "empty-pin.patch"
    path.write_bytes(b"diff --git a/python/pyproject.toml b/python/pyproject.toml\n" + section)
    before = snapshot(site)
    for command in (("list",), ("status", "--site-packages", site), ("apply", "--site-packages", site)):
        result = run("--patches", path, *command)
        assert result.exit_code == 1, (command, result.exit_code, result.stderr)
        assert result.stderr.strip() == f"error: {path}: no change to a file of the sglang package in it"
    assert snapshot(site) == before
