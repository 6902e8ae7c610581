"""The git-style writer (patchkit.diffs.format_patch) on synthetic file shapes: real `git apply` and
`git am` take what it writes and give exactly the new bytes; the index lines are the blob hashes
`git hash-object` computes."""

from __future__ import annotations

from datetime import datetime, timezone

import pytest

from patchkit.base.errors import UsageError
from patchkit.diffs import format_patch
from patchkit.diffs.format_patch import FileChange, Trailers
from testing.checkout import git

BEFORE = {
    "sglang/plain.py": b"".join(b"line %d\n" % i for i in range(40)),
    "sglang/crlf.py": b"one\r\ntwo\r\nthree\r\n",
    "sglang/bom.py": b"\xef\xbb\xbfx = 1\ny = 2\n",
    "sglang/no_newline.py": b"a\nb",
    "sglang/gone.py": b"print('bye')\n",
    "sglang/emptied.py": b"z = 0\n",
}
AFTER = {
    "sglang/plain.py": b"".join(b"line %d\n" % i for i in range(40) if i != 3).replace(b"line 30\n", b"line 30 x\n"),
    "sglang/crlf.py": b"one\r\n2\r\nthree\r\n",
    "sglang/bom.py": b"\xef\xbb\xbfx = 1\ny = 'caf\xc3\xa9'\n",
    "sglang/no_newline.py": b"a\nB",
    "sglang/emptied.py": b"",
    "sglang/new.py": b"def f():\n    return 1\n",
    "sglang/new_empty.py": b"",
}
CHANGES = [FileChange(rel, BEFORE.get(rel), AFTER.get(rel)) for rel in sorted({*BEFORE, *AFTER})]


def _repo(root, files: dict[str, bytes], prefix: str):
    root.mkdir()
    for rel, data in files.items():
        path = root / prefix / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
    git(root, "init", "-q", "-b", "main")
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "base")
    return root


def _files(root, prefix: str) -> dict[str, bytes]:
    base = root / prefix if prefix else root
    return {p.relative_to(base).as_posix(): p.read_bytes() for p in base.rglob("*") if p.is_file() and ".git" not in p.parts}


@pytest.mark.parametrize("prefix", ["", "python/"])
def test_git_apply_gives_the_new_bytes(tmp_path, prefix):
    repo = _repo(tmp_path / "repo", BEFORE, prefix)
    diff = tmp_path / "change.diff"
    diff.write_bytes(format_patch.git_diff(CHANGES, prefix))
    checked = git(repo, "apply", "--check", diff, check=False)
    assert checked.returncode == 0, checked.stderr
    git(repo, "apply", diff)
    assert _files(repo, prefix) == AFTER


def test_index_lines_are_git_blob_hashes(tmp_path):
    path = tmp_path / "f"
    for data in (*BEFORE.values(), b""):
        path.write_bytes(data)
        assert format_patch.git_blob_sha1(data) == git(tmp_path, "hash-object", path).stdout.strip()
    text = format_patch.file_diff(CHANGES[-1]).decode()  # sglang/plain.py
    old, new = BEFORE["sglang/plain.py"], AFTER["sglang/plain.py"]
    assert f"index {format_patch.git_blob_sha1(old)}..{format_patch.git_blob_sha1(new)} 100644\n" in text


def test_git_am_takes_the_format_patch_file(tmp_path):
    repo = _repo(tmp_path / "repo", BEFORE, "python/")
    trailers = Trailers(id="my-fix", title="Fix the café", upstream=("sgl-project/sglang#1",), applies_to=">=0.5.10",
                        after=("other-fix",))
    mail = format_patch.Mail(author="Ann <ann@example.org>", date=datetime(2026, 1, 2, 3, 4, 5, tzinfo=timezone.utc))
    path = tmp_path / "0001-my-fix.patch"
    path.write_bytes(format_patch.format_patch(trailers, "Why it is needed.\n\nUpstream: sgl-project/sglang#1",
                                               CHANGES, "python/", mail))
    # git am drops the CR of every line unless asked to keep it (its mbox reading, not the diff).
    am = git(repo, "am", "--keep-cr", path, check=False)
    assert am.returncode == 0, am.stdout + am.stderr
    assert _files(repo, "python/") == AFTER
    message = git(repo, "log", "-1", "--format=%an <%ae>|%aI|%s|%b").stdout
    assert message.startswith("Ann <ann@example.org>|2026-01-02T03:04:05+00:00|Fix the café|Why it is needed.")
    trailer_block = git(repo, "log", "-1", "--format=%(trailers:only)").stdout.split()
    assert "Patchkit-Id:" in trailer_block and "my-fix" in trailer_block and "other-fix" in trailer_block


def test_diffstat_counts_lines():
    stat = format_patch.diffstat(CHANGES, "python/")
    assert " python/sglang/plain.py      | 3 +--\n" in stat and " python/sglang/new_empty.py  | 0\n" in stat
    assert stat.endswith(" 8 files changed, 6 insertions(+), 7 deletions(-)\n")
    assert format_patch.diffstat([FileChange("sglang/x.py", b"a\n", b"a\n")]) == ""


_TRAILERS = Trailers(id="my-fix", title="Fix the café")
_MAIL = format_patch.Mail(author="Ann <ann@example.org>", date=datetime(2026, 1, 2, 3, 4, 5, tzinfo=timezone.utc))


@pytest.mark.parametrize("field, trailers, body, mail", [
    ("author", _TRAILERS, "Why.", format_patch.Mail(author="Ann <ann@example.org>\nPatchkit-Id: evil")),
    ("author", _TRAILERS, "Why.", format_patch.Mail(author="Ann\r <ann@example.org>")),
    ("title", Trailers(id="my-fix", title="Fix\x1b[2J the café"), "Why.", _MAIL),
    ("title", Trailers(id="my-fix", title="Fix\x00"), "Why.", _MAIL),
    ("upstream reference", Trailers(id="my-fix", title="Fix", upstream=("x\ny",)), "Why.", _MAIL),
    ("rationale", _TRAILERS, "Why\x1b]0;owned\x07 it is needed.", _MAIL),
    ("rationale", _TRAILERS, "Why it is needed:\nPatchkit-Applies-To: <0.1", _MAIL),
    ("rationale", _TRAILERS, "Why:\ndiff --git a/python/sglang/evil.py b/python/sglang/evil.py", _MAIL),
    ("rationale", _TRAILERS, "Why:\n---\nmore", _MAIL),
])
def test_a_header_field_that_would_not_read_back_is_refused(field, trailers, body, mail):
    """Every header field written is one line of text that reads back as itself: a control
    character, or a line of the body that reads as a trailer or as the start of the diff, would
    change what the file loads as (another id, another range, another file's change)."""
    with pytest.raises(UsageError) as refused:
        format_patch.format_patch(trailers, body, CHANGES, "python/", mail)
    assert str(refused.value).startswith(f"patch my-fix: its {field} ") or str(refused.value).startswith("--author: ")
    assert field in str(refused.value) and "\n" not in str(refused.value), refused.value


def test_a_written_file_reads_back_as_the_same_patch():
    from patchkit.diffs import unidiff

    trailers = Trailers(id="my-fix", title="Fix the café", upstream=("sgl-project/sglang#1",), applies_to=">=0.5.10",
                        after=("other-fix",))
    data = format_patch.format_patch(trailers, "Why it is needed.\n\nUpstream: sgl-project/sglang#1", CHANGES,
                                     "python/", _MAIL)
    back = unidiff.parse(data, "0001-my-fix.patch")
    assert (back.id, back.title, back.applies_to, back.after, back.upstream) == (
        "my-fix", "Fix the café", ">=0.5.10", ("other-fix",), ("sgl-project/sglang#1",))
