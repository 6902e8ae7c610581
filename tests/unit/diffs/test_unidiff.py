"""patchkit.diffs.unidiff on synthetic diffs: header fields, path prefixes, files outside the package,
whitespace damage, CRLF, a BOM, no final newline, bad ids; and patchkit.diffs.unit_merge.apply_hunks
against real `git apply` on the same synthetic files."""

from __future__ import annotations

import hashlib
import subprocess
import tempfile
from pathlib import Path

import pytest

from patchkit.diffs import unidiff
from patchkit.diffs.unit_merge import apply_hunks
from patchkit.base.errors import UsageError
from testing.diffs import git, git_apply, git_diff, repo_of

REL = "sglang/srt/x.py"
BEFORE = b"import os\n\n\ndef f():\n    return 1\n\n\ndef g():\n\n    return 2\n"
AFTER = b"import os\n\n\ndef f():\n    return 10\n\n\ndef g():\n\n    return 2\n"


def test_git_blob_sha1_is_git_hash_object(tmp_path):
    (tmp_path / "f").write_bytes(BEFORE)
    want = subprocess.run(["git", "hash-object", str(tmp_path / "f")], capture_output=True, check=True).stdout.strip()
    assert unidiff.git_blob_sha1(BEFORE) == want.decode()
    assert unidiff.git_blob_sha1(BEFORE) != hashlib.sha1(BEFORE).hexdigest()


@pytest.mark.parametrize("prefix, layout", [("", "a/"), ("python/", "a/python/")])
def test_paths_relative_to_the_site_folder_whatever_the_prefix(prefix, layout):
    diff = unidiff.parse(git_diff({REL: BEFORE}, {REL: AFTER}, prefix=prefix), "fix.patch")
    assert diff.prefix == layout
    assert [f.path for f in diff.files] == [REL]
    assert diff.files[0].old_blob == unidiff.git_blob_sha1(BEFORE)[:len(diff.files[0].old_blob or "")]
    assert apply_hunks(BEFORE, diff.files[0].hunks) == AFTER


def test_no_prefix_and_plain_diff_u():
    text = git_diff({REL: BEFORE}, {REL: AFTER}).replace(b"a/sglang", b"sglang").replace(b"b/sglang", b"sglang")
    diff = unidiff.parse(text, "fix.diff")
    assert diff.prefix == "" and [f.path for f in diff.files] == [REL]
    plain = b"".join(line for line in text.splitlines(keepends=True) if not line.startswith((b"diff --git", b"index ")))
    plain = plain.replace(b"--- sglang/srt/x.py", b"--- sglang/srt/x.py\t2026-01-01 00:00:00")
    parsed = unidiff.parse(plain, "fix.diff")
    assert [f.path for f in parsed.files] == [REL] and parsed.files[0].old_blob is None
    assert apply_hunks(BEFORE, parsed.files[0].hunks) == AFTER


def test_files_outside_the_package_are_named_in_one_note():
    text = git_diff({REL: BEFORE, "test/t.py": b"a\n", "sgl-kernel/k.py": b"b\n"},
                    {REL: AFTER, "test/t.py": b"a2\n", "sgl-kernel/k.py": b"b2\n"}, prefix="python/")
    # test/ and sgl-kernel/ sit beside python/ in a checkout: make them so
    text = text.replace(b"python/test/", b"test/").replace(b"python/sgl-kernel/", b"sgl-kernel/")
    diff = unidiff.parse(text, "fix.patch")
    assert [f.path for f in diff.files] == [REL]
    assert sorted(diff.outside) == ["sgl-kernel/k.py", "test/t.py"]
    assert len(diff.notes) == 1 and "sgl-kernel/k.py" in diff.notes[0] and "test/t.py" in diff.notes[0]


def test_header_trailers_win_over_format_patch_fields():
    message = ("Speed up f\n\nf returned too little.\nIt now returns ten.\n\n"
               "Patchkit-Upstream: sgl-project/sglang#1\npatchkit-upstream: https://example.org/2\n"
               "Patchkit-Applies-To: >=0.5.14,<0.5.22\nPatchkit-After: other-fix\n")
    text = git_diff({REL: BEFORE}, {REL: AFTER}, header=message, format_patch=True)
    diff = unidiff.parse(text, "0007-speed-up-f.patch")
    assert diff.id == "speed-up-f"  # the file name without its sequence number
    assert diff.title == "Speed up f"  # format-patch's Subject without "[PATCH]"
    assert diff.rationale == "f returned too little.\nIt now returns ten."
    assert diff.upstream == ("sgl-project/sglang#1", "https://example.org/2")
    assert diff.applies_to == ">=0.5.14,<0.5.22" and diff.after == ("other-fix",)
    named = unidiff.parse(b"Patchkit-Id: my-fix\nPatchkit-Title: A title\n" + text, "0007-speed-up-f.patch")
    assert (named.id, named.title) == ("my-fix", "A title")
    plain = unidiff.parse(git_diff({REL: BEFORE}, {REL: AFTER}), "fix.patch")
    assert (plain.id, plain.title, plain.rationale, plain.applies_to) == ("fix", "fix", "fix", "")


@pytest.mark.parametrize("name, header", [("___.patch", b""), ("ok.patch", b"Patchkit-Id: Bad_Id\n"),
                                          ("ok.patch", b"Patchkit-Id: -x\n")])
def test_a_bad_id_is_a_usage_error_naming_the_file(name, header):
    with pytest.raises(UsageError) as info:
        unidiff.parse(header + git_diff({REL: BEFORE}, {REL: AFTER}), name)
    assert name in str(info.value) and info.value.exit_code == 2


@pytest.mark.parametrize("name, pid", [
    ("v0.5.15.post1-sglang.patch", "v0-5-15-post1-sglang"),  # an RL framework's docker/patch/<release>/ file
    ("fixA.patch", "fixa"), ("0003-Fix_A.diff", "fix-a"), ("My Fix (2).patch", "my-fix-2"),
    ("sglang.patch", "sglang"), ("0.5.12.post1.diff", "0-5-12-post1"),
])
def test_a_file_name_that_is_not_an_id_gives_one(name, pid):
    assert unidiff.parse(git_diff({REL: BEFORE}, {REL: AFTER}), name).id == pid
    # A header id still wins.
    assert unidiff.parse(b"Patchkit-Id: mine\n" + git_diff({REL: BEFORE}, {REL: AFTER}), name).id == "mine"


def _strip_blank_context(text: bytes) -> bytes:
    """What an editor that strips trailing whitespace does to a diff: a blank context line loses
    its single space, and the blank lines that end the file go."""
    lines = [line[1:] if line in (b" \n", b" \r\n") else line for line in text.splitlines(keepends=True)]
    while lines and lines[-1] in (b"\n", b"\r\n"):
        lines.pop()
    return b"".join(lines)


@pytest.mark.parametrize("before", [
    BEFORE.replace(b"\n", b"\r\n"),  # CRLF: git does not read "\r\n" alone as a blank context line
    b"def f():\n    return 1\n\n\n\n",  # the hunk's last context lines are blank: the editor drops them
])
def test_whitespace_damaged_blank_context_lines_are_tolerated_with_a_note(before):
    after = before.replace(b"return 1", b"return 10")
    text = git_diff({REL: before}, {REL: after})
    damaged = _strip_blank_context(text)
    assert damaged != text
    code, _, err = git_apply({REL: before}, damaged, "--check")
    assert code != 0 and "corrupt patch" in err  # what git makes of it
    diff = unidiff.parse(damaged, "fix.patch")
    assert apply_hunks(before, diff.files[0].hunks) == after
    assert any("whitespace damage" in note for note in diff.notes)
    assert not unidiff.parse(text, "fix.patch").notes


def test_blank_context_lines_without_their_space_inside_a_hunk_read_as_git_reads_them():
    text = git_diff({REL: BEFORE}, {REL: AFTER})
    damaged = b"".join(b"\n" if line == b" \n" else line for line in text.splitlines(keepends=True))
    code, out, err = git_apply({REL: BEFORE}, damaged)
    assert code == 0, err
    assert apply_hunks(BEFORE, unidiff.parse(damaged, "fix.patch").files[0].hunks) == out[REL] == AFTER


@pytest.mark.parametrize("before, after", [
    (BEFORE.replace(b"\n", b"\r\n"), AFTER.replace(b"\n", b"\r\n")),  # CRLF
    (b"\xef\xbb\xbf" + BEFORE, b"\xef\xbb\xbf" + AFTER.replace(b"import os", b"import sys")),  # BOM, first line edited
    (BEFORE.rstrip(b"\n"), AFTER.rstrip(b"\n").replace(b"return 2", b"return 3")),  # no final newline
    (BEFORE, BEFORE + b"x = 1"),  # a final line without newline added
])
def test_applied_bytes_are_git_applys(before, after):
    text = git_diff({REL: before}, {REL: after})
    code, out, err = git_apply({REL: before}, text)
    assert code == 0, err
    diff = unidiff.parse(text, "fix.patch")
    assert apply_hunks(before, diff.files[0].hunks) == out[REL] == after
    assert apply_hunks(after, diff.files[0].hunks, reverse=True) == before


def test_hunk_that_does_not_apply_gives_none_and_an_offset_one_applies():
    diff = unidiff.parse(git_diff({REL: BEFORE}, {REL: AFTER}), "fix.patch")
    assert apply_hunks(BEFORE.replace(b"return 1", b"return 5"), diff.files[0].hunks) is None
    shifted = b"# a\n# b\n" + BEFORE
    code, out, _ = git_apply({REL: shifted}, git_diff({REL: BEFORE}, {REL: AFTER}))
    assert code == 0 and apply_hunks(shifted, diff.files[0].hunks) == out[REL]


def test_not_a_diff_and_a_short_hunk_are_usage_errors():
    with pytest.raises(UsageError, match="not a diff"):
        unidiff.parse(b"hello\n", "x.patch")
    text = git_diff({REL: BEFORE}, {REL: AFTER})
    with pytest.raises(UsageError, match="ends early"):
        unidiff.parse(text.replace(b"+    return 10\n", b"XX\n"), "x.patch")


def test_a_truncated_diff_names_the_diff_file_and_its_lines():
    text = git_diff({REL: BEFORE}, {REL: AFTER})
    lines = text.splitlines(keepends=True)
    header = next(n for n, line in enumerate(lines, 1) if line.startswith(b"@@ "))
    removed = next(n for n, line in enumerate(lines, 1) if line.startswith(b"-    return 1"))
    cut = b"".join(lines[:removed])  # ends after the removed line: its added line is missing
    with pytest.raises(UsageError) as info:
        unidiff.parse(cut, "v0.5.15.post1-sglang.patch")
    # The .patch file's lines, not the target file's.
    assert str(info.value).startswith(f"v0.5.15.post1-sglang.patch: line {removed}: the diff ends inside the "
                                      f"hunk of line {header} ")
    replaced = text.replace(b"+    return 10\n", b"XX\n")
    at = replaced.splitlines().index(b"XX") + 1
    with pytest.raises(UsageError, match=f"^x.patch: line {at}: the hunk of line {header} ends early"):
        unidiff.parse(replaced, "x.patch")


@pytest.mark.parametrize("bad", ["\0", "\x1b[31m", "\r", "\x7f", "\x01"])
@pytest.mark.parametrize("where", ["git", "minus", "plus"])
def test_a_control_character_in_a_path_is_a_usage_error_naming_the_line(bad, where):
    """A NUL in a path reached Path.resolve (exit 70, `embedded null byte`); every control
    character is refused where the diff is read: exit 2, the .patch file and line."""
    text = git_diff({REL: BEFORE}, {REL: AFTER}).decode()
    lines = text.splitlines(keepends=True)
    index = {"git": 0, "minus": 2, "plus": 3}[where]
    assert lines[index].startswith(("diff --git", "---", "+++"))
    lines[index] = lines[index].replace("x.py", f"x{bad}.py")
    with pytest.raises(UsageError) as info:
        unidiff.parse("".join(lines).encode(), "evil.patch")
    assert str(info.value).startswith(f"evil.patch: line {index + 1}: the path ")
    assert "control character" in str(info.value) and info.value.exit_code == 2


@pytest.mark.parametrize("name", ["sglang/srt/caf\u00e9.py", 'sglang/srt/q"uote.py',
                                  "sglang/srt/back\\slash.py"])
def test_paths_git_quotes_are_unquoted_as_git_does(name):
    """git writes a path with a non-ASCII byte, a quote or a backslash C-quoted ("a/caf\\303\\251.py",
    octal escapes); it was read literally, backslashes and all."""
    text = git_diff({name: BEFORE}, {name: AFTER})
    assert b'"a/' in text  # git quoted it (core.quotePath is on by default)
    diff = unidiff.parse(text, "fix.patch")
    assert [(f.old_path, f.new_path) for f in diff.files] == [(name, name)]


def test_octal_and_named_escapes_are_unquoted():
    text = git_diff({REL: BEFORE}, {REL: AFTER}).replace(b"a/sglang/srt/x.py", b'"a/sglang/srt/x\\056py"')
    text = text.replace(b"b/sglang/srt/x.py", b'"b/sglang/srt/x\\056py"')
    assert [f.path for f in unidiff.parse(text, "fix.patch").files] == [REL]
    tabbed = text.replace(b"x\\056py", b"x\\tpy")  # unquoted, a tab: a control character, refused
    with pytest.raises(UsageError, match="control character"):
        unidiff.parse(tabbed, "fix.patch")


def test_a_rename_git_quotes_is_unquoted():
    old, new = "sglang/srt/caf\u00e9.py", "sglang/srt/th\u00e9.py"
    text = git_diff({old: BEFORE}, {old: None, new: AFTER})
    assert b'rename from "sglang/srt/caf\\303\\251.py"' in text, text
    with pytest.raises(UsageError, match=f"renames {old} to {new}, which a diff patch cannot do"):
        unidiff.parse(text, "fix.patch")  # (refused, naming the files as they are named)


NEW_FILE = ("diff --git a/{p} b/{p}\nnew file mode 100644\nindex 0000000..1111111\n--- /dev/null\n+++ b/{p}\n"
            "@@ -0,0 +1 @@\n+x = 1\n")


@pytest.mark.parametrize("path, why", [
    ("sglang/../../../escaped3.py", "has a '..' component"),
    ("python/sglang/../../escaped3.py", "has a '..' component"),
    ("sglang/srt/../x.py", "has a '..' component"),  # inside after all, but a '..' is refused as git refuses it
    ("../sglang/x.py", "has a '..' component"),
])
def test_a_path_that_leads_out_is_refused_at_load(path, why):
    """A diff creating sglang/../../../escaped3.py loaded (apply refused it only at its write, exit 3;
    bump wrote it beside DIR): every path a diff names is checked when it is parsed."""
    with pytest.raises(UsageError) as info:
        unidiff.parse(NEW_FILE.format(p=path).encode(), "evil.patch")
    assert str(info.value).startswith(f"evil.patch: line 1: the path 'a/{path}' {why}")
    assert info.value.exit_code == 2


@pytest.mark.parametrize("where", ["git", "minus", "plus", "rename"])
def test_a_path_that_leads_out_is_refused_on_every_line_that_names_one(where):
    text = git_diff({REL: BEFORE}, {REL: AFTER}).decode()
    if where == "rename":
        text = text.replace("index ", "rename from sglang/srt/x.py\nrename to sglang/../../x.py\nindex ", 1)
    lines = text.splitlines(keepends=True)
    index = {"git": 0, "minus": 2, "plus": 3, "rename": 2}[where]
    if where != "rename":
        lines[index] = lines[index].replace("sglang/srt/x.py", "sglang/../../x.py")
    with pytest.raises(UsageError, match=rf"^evil.patch: line {index + 1}: the path '.*sglang/\.\./\.\./x.py' has"):
        unidiff.parse("".join(lines).encode(), "evil.patch")


def test_an_absolute_path_is_refused():
    text = git_diff({REL: BEFORE}, {REL: AFTER}).replace(b"--- a/sglang/srt/x.py", b"--- /sglang/srt/x.py")
    text = text.replace(b"+++ b/sglang/srt/x.py", b"+++ /sglang/srt/x.py")
    with pytest.raises(UsageError, match="^evil.patch: line 3: the path '/sglang/srt/x.py' is absolute"):
        unidiff.parse(text, "evil.patch")


def test_dot_and_empty_components_are_normalised():
    text = git_diff({REL: BEFORE}, {REL: AFTER}).replace(b"a/sglang/srt/x.py", b"a/sglang/./srt//x.py")
    diff = unidiff.parse(text, "fix.patch")
    assert [(f.old_path, f.new_path) for f in diff.files] == [(REL, REL)]


EMPTY = "sglang/srt/e.py"


def test_a_deleted_empty_file_is_read_as_deleted_never_as_a_mode_change_left_out():
    """git writes an empty file's deletion as `deleted file mode 100644` and its index line, no
    ---/+++ lines and no hunk: it was read as a mode change 100644 -> None and left out (the
    `deleted file` branch of the header reader was never reached), so apply kept the file."""
    text = git_diff({EMPTY: b"", REL: BEFORE}, {EMPTY: None, REL: AFTER})
    assert b"deleted file mode 100644\nindex e69de29..0000000\ndiff --git" in text, text
    diff = unidiff.parse(text, "drop.patch")
    assert [(f.old_path, f.new_path, f.hunks) for f in diff.files if f.path == EMPTY] == [(EMPTY, None, ())]
    assert diff.notes == ()
    assert apply_hunks(b"", diff.files[0].hunks) == b""
    assert git_apply({EMPTY: b"", REL: BEFORE}, text)[:2] == (0, {EMPTY: None, REL: AFTER})


def test_each_change_of_an_empty_file_is_carried_or_named():
    """An empty file created (carried: no hunk, its bytes are b""), its mode changed (a note
    naming it), renamed (refused naming both paths), deleted (carried, above)."""
    created = unidiff.parse(git_diff({}, {EMPTY: b""}), "add.patch")
    assert [(f.old_path, f.new_path, f.hunks) for f in created.files] == [(None, EMPTY, ())]
    with tempfile.TemporaryDirectory() as tmp:
        repo = repo_of(Path(tmp), {EMPTY: b"", REL: BEFORE})
        (repo / EMPTY).chmod(0o755)
        (repo / REL).write_bytes(AFTER)
        mode = unidiff.parse(git(repo, "diff", "--no-color").stdout, "mode.patch")
    assert [f.path for f in mode.files] == [REL]
    assert mode.notes == (f"mode.patch: mode change of {EMPTY} (100644 -> 100755) left out (patchkit changes a "
                          "file's bytes, not its mode)",)
    renamed = git_diff({EMPTY: b""}, {EMPTY: None, "sglang/srt/f.py": b""})
    assert b"rename from" in renamed
    with pytest.raises(UsageError, match=f"^rename.patch: the diff renames {EMPTY} to sglang/srt/f.py, which a diff"):
        unidiff.parse(renamed, "rename.patch")
