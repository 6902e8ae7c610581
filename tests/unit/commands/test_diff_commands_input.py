"""Bad input to export / capture / rebase: one line, its exit code, nothing downloaded or
written (offline: every refusal comes before a release is read); a hostile diff header as `list`
prints it."""

from __future__ import annotations

import os

from testing.cli import run
from testing.releases import snapshot


def assert_refused(result, code: int, message: str) -> None:
    assert result.exit_code == code, (result.stdout, result.stderr)
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    assert message in lines[0], lines[0]


def test_export_refusals(tmp_path, patchkit_home):
    before, home = snapshot(tmp_path), snapshot(patchkit_home)
    out = tmp_path / "fix.patch"
    assert_refused(run("export", "no-such-patch", "--release", "0.5.17", "-o", out), 2, "unknown patch id 'no-such-patch'")
    assert_refused(run("export", "cpu-offload-tied-params", "--release", "0.5.17", "-o", tmp_path / "missing" / "x.patch"),
                   2, f"the folder {tmp_path / 'missing'} does not exist; create it first")
    assert_refused(run("export", "cpu-offload-tied-params", "--release", "0.5.17", "-o", tmp_path), 2, "is a folder")
    assert_refused(run("export", "cpu-offload-tied-params", "--release", "banana"), 2, "'banana' is not a version")
    assert_refused(run("export", "cpu-offload-tied-params", "--release", "0.4.0", "-o", out), 3,
                   "patchkit knows nothing about SGLang 0.4.0")
    json_error = run("export", "no-such-patch", "--release", "0.5.17", "--json")
    assert json_error.exit_code == 2 and json_error.json()["error"]["message"].startswith("unknown patch id")
    assert snapshot(tmp_path) == before and snapshot(patchkit_home) == home


def test_capture_refusals(tmp_path, patchkit_home):
    site = tmp_path / "site"
    site.mkdir()
    (tmp_path / "a-file").write_text("x")
    before, home = snapshot(tmp_path), snapshot(patchkit_home)
    assert_refused(run("capture", "FixA", "--site-packages", site, "--out", tmp_path / "out"), 2, "patch id 'FixA'")
    assert_refused(run("capture", "cpu-offload-tied-params", "--site-packages", site, "--out", tmp_path / "out"), 2,
                   "exists already (built-in)")
    assert_refused(run("capture", "mine", "--site-packages", site, "--out", tmp_path / "a-file"), 2, "not a folder")
    assert_refused(run("capture", "mine", "--site-packages", site, "--out", tmp_path / "no" / "out"), 2,
                   f"the folder {tmp_path / 'no'} does not exist")
    assert_refused(run("capture", "mine", "--site-packages", site, "--out", tmp_path / "out"), 3, "no SGLang in")
    assert snapshot(tmp_path) == before and snapshot(patchkit_home) == home


def test_rebase_refusals(tmp_path, patchkit_home):
    import os

    diff = tmp_path / "fix.diff"
    diff.write_text("diff --git a/sglang/x.py b/sglang/x.py\n--- a/sglang/x.py\n+++ b/sglang/x.py\n@@ -1 +1 @@\n-a\n+b\n")
    fifo = tmp_path / "fifo.diff"
    os.mkfifo(fifo)
    (tmp_path / "notes.diff").write_text("just some words\n")
    bad_id = tmp_path / "bad-id.diff"
    bad_id.write_text("Patchkit-Id: Bad_Id\n" + diff.read_text())
    before, home = snapshot(tmp_path), snapshot(patchkit_home)
    assert_refused(run("rebase", tmp_path / "missing.diff", "--to", "0.5.17"), 2, "missing.diff: no such file")
    assert_refused(run("rebase", fifo, "--to", "0.5.17"), 6, "fifo.diff: a FIFO, not a diff file")
    assert_refused(run("rebase", tmp_path, "--to", "0.5.17"), 6, "a folder, not a diff file")
    assert_refused(run("rebase", tmp_path / "notes.diff", "--to", "0.5.17"), 2, "notes.diff: not a diff")
    assert_refused(run("rebase", bad_id, "--to", "0.5.17"), 2, "bad-id.diff: 'Bad_Id' is not a valid patch id")
    assert_refused(run("rebase", diff, "--to", "banana"), 2, "--to: 'banana' is not a version")
    assert_refused(run("rebase", diff, "--to", "0.5.17", "-o", tmp_path / "no" / "x.diff"), 2,
                   f"the folder {tmp_path / 'no'} does not exist")
    assert snapshot(tmp_path) == before and snapshot(patchkit_home) == home


def test_an_author_that_is_not_one_plain_line_is_refused(tmp_path, patchkit_home):
    """A newline in --author wrote trailers (`Patchkit-Id:`) and a whole extra diff section into the
    exported file, which then loaded under another id."""
    before, home = snapshot(tmp_path), snapshot(patchkit_home)
    out = tmp_path / "fix.patch"
    injected = ("A <a@example.com>\nPatchkit-Id: evil\n\ndiff --git a/python/sglang/x.py b/python/sglang/x.py\n"
                "--- a/python/sglang/x.py\n+++ b/python/sglang/x.py\n@@ -1 +1 @@\n-x\n+import os; os.system('id')\n")
    for author in (injected, "A <a@example.com>\r", "A\x1b[2J <a@example.com>", "A <a@example.com>\x7f"):
        assert_refused(run("export", "cpu-offload-tied-params", "--release", "0.5.17", "--author", author, "-o", out),
                       2, "--author: ")
    assert_refused(run("export", "cpu-offload-tied-params", "--release", "0.5.17", "--author", "no address", "-o", out),
                   2, "--author: 'no address' is not 'NAME <EMAIL>'")
    assert snapshot(tmp_path) == before and snapshot(patchkit_home) == home


def test_list_prints_a_diff_headers_text_escaped(tmp_path):
    """A diff's title and upstream reference are printed with control characters escaped: an ESC or
    a CR in them drove the terminal and forged `list`'s lines."""
    from testing.diffs import git_diff

    rel = "sglang/srt/x.py"
    header = "Patchkit-Id: hostile\nPatchkit-Title: fix\x1b[2J\rforged\nPatchkit-Upstream: https://x/\x1b]0;t\x07\n\n"
    diff = tmp_path / "hostile.diff"
    diff.write_bytes(git_diff({rel: b"a = 1\n"}, {rel: b"a = 2\n"}, header=header))
    result = run("--patches", diff, "list")
    assert result.exit_code == 0, result.stderr
    block = result.stdout[result.stdout.index("hostile  ("):]
    assert not any(c in block for c in "\x1b\r\x07\x08"), block
    assert "fix\\x1b[2J\\rforged" in block and "https://x/\\x1b]0;t\\x07" in block, block


def test_a_diff_whose_path_leads_out_is_refused_at_load_by_every_command(tmp_path, patchkit_home):
    """A diff creating sglang/../../../escaped3.py loaded with --patches: `list` listed it (exit 0),
    `apply` refused it only at its write (exit 3), `bump -o deep/H2` wrote deep/escaped3.py. Now the
    parser refuses it when the file is loaded: named alone, exit 2 before anything is done; in a
    folder, left out and named (issue 29's rule), exit 2; no byte outside changes."""
    from testing.synthetic import make_tree

    site = make_tree(tmp_path / "site")
    hostile = "sglang/../../../escaped3.py"
    text = (f"diff --git a/{hostile} b/{hostile}\nnew file mode 100644\nindex 0000000..1111111\n--- /dev/null\n"
            f"+++ b/{hostile}\n@@ -0,0 +1 @@\n+import os; os.system('id')\n")
    diff = tmp_path / "evil.patch"
    diff.write_text(text)
    (tmp_path / "set").mkdir()
    (tmp_path / "set" / "evil.patch").write_text(text)
    before, home = snapshot(tmp_path), snapshot(patchkit_home)
    said = f"evil.patch: line 1: the path 'a/{hostile}' has a '..' component"
    for args in (("list",), ("status", "--site-packages", site), ("apply", "--site-packages", site),
                 ("bump", "--to", "0.5.23", "-o", tmp_path / "deep" / "H2")):
        assert_refused(run("--patches", diff, *args), 2, said)
    for args in (("list",), ("status", "--site-packages", site), ("apply", "--site-packages", site)):
        result = run("--patches", tmp_path / "set", *args)
        assert result.exit_code == 2, (args, result.stdout, result.stderr)
        assert said in result.stderr and "(left out; the other patches of its folder were loaded)" in result.stderr
    assert snapshot(tmp_path) == before and snapshot(patchkit_home) == home


def test_a_patch_file_over_the_cap_is_refused_unread(tmp_path, patchkit_home, monkeypatch):
    """A 300 MB file in --patches took 2.5 GB and 20 s to be found "not a diff" (measured: 19.7 s,
    2,569,920 KB max RSS). A diff file over unidiff.FILE_LIMIT (64 MiB) is exit 2, one line, from
    --patches FILE and `rebase PATCH`, and left out of a folder (exit 2); none of its bytes is read."""
    big = tmp_path / "set" / "big.patch"
    big.parent.mkdir()
    with big.open("wb") as handle:
        handle.truncate((64 << 20) + 1)  # sparse
    before, home = snapshot(tmp_path), snapshot(patchkit_home)
    real, sizes = os.read, []

    def counting(fd: int, n: int) -> bytes:
        data = real(fd, n)
        sizes.append(len(data))
        return data

    monkeypatch.setattr(os, "read", counting)
    said = "big.patch: more than 64 MiB, the most patchkit reads from a diff file"
    assert_refused(run("--patches", big, "list"), 2, said)
    assert_refused(run("rebase", big, "--to", "0.5.17"), 2, said)
    folder = run("--patches", big.parent, "list")
    assert folder.exit_code == 2 and said in folder.stderr and "(left out;" in folder.stderr, folder.stderr
    assert sum(sizes) < 1 << 20, sizes
    assert snapshot(tmp_path) == before and snapshot(patchkit_home) == home


def test_an_author_with_a_unicode_line_break_is_refused(tmp_path, patchkit_home):
    """U+2028 and U+2029 are line breaks to str.splitlines (and to a mail reader, an editor): they
    were accepted into the From: line; they are refused as a newline is."""
    before, home = snapshot(tmp_path), snapshot(patchkit_home)
    out = tmp_path / "fix.patch"
    for brk in ("\u2028", "\u2029"):
        author = f"A{brk}Patchkit-Id: evil <a@example.com>"
        assert len(author.splitlines()) == 2
        result = run("export", "cpu-offload-tied-params", "--release", "0.5.17", "--author", author, "-o", out)
        assert_refused(result, 2, "--author: ")
        assert "holds a control character" in result.stderr and brk not in result.stderr, result.stderr
    assert snapshot(tmp_path) == before and snapshot(patchkit_home) == home
