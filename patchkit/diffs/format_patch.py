"""Writing git-style diffs and `git format-patch` files (pure: bytes in, text out).

A section per file as `git diff --full-index` writes it: `diff --git`, `new file mode` /
`deleted file mode`, `index <pre>..<post> 100644` with the files' full git blob hashes (what
tells the release a diff was made against, see docs/diffs.md), `---`/`+++` and the hunks,
byte-exact (CRLF, a BOM and a missing final newline kept). A format-patch file adds the mbox
header, a body, the patchkit trailers (so the file loads back as a diff patch with the same id),
`---` and a diffstat.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timezone
from email.header import Header as MailHeader
from email.utils import format_datetime

from patchkit.base.control import first_control
from patchkit.base.errors import UsageError
from patchkit.diffs.unidiff import git_blob_sha1, reads_as_diff_syntax
from patchkit.diffs.units import split_lines

FILE_MODE = "100644"
NULL_BLOB = "0" * 40
DEFAULT_AUTHOR = "patchkit <patchkit@localhost>"
_CONTEXT = 3
_NO_NEWLINE = b"\\ No newline at end of file\n"


@dataclass(frozen=True)
class FileChange:
    """One file's bytes before and after (None: the file is absent on that side), by its path
    in the installed package (`sglang/...`)."""

    rel: str
    before: bytes | None
    after: bytes | None


@dataclass(frozen=True)
class Trailers:
    """The header fields of a diff patch (see docs/diffs.md for the format)."""

    id: str
    title: str
    rationale: str = ""
    upstream: tuple[str, ...] = ()
    applies_to: str = ""
    after: tuple[str, ...] = ()

    def lines(self) -> list[str]:
        # The rationale is the body (format-patch's own place for it), so no Patchkit-Rationale
        # line: a trailer is one line, a rationale is often several.
        found = [f"Patchkit-Id: {self.id}", f"Patchkit-Title: {_one_line(self.title)}"]
        found += [f"Patchkit-Upstream: {ref}" for ref in self.upstream]
        if self.applies_to:
            found.append(f"Patchkit-Applies-To: {self.applies_to}")
        found += [f"Patchkit-After: {pid}" for pid in self.after]
        return found


@dataclass(frozen=True)
class Mail:
    """The mbox header of a format-patch file."""

    author: str = DEFAULT_AUTHOR
    date: datetime = field(default_factory=lambda: datetime.now(timezone.utc))
    commit: str = NULL_BLOB  # the `From <sha>` line: git writes the commit's hash


def _one_line(text: str) -> str:
    return " ".join(text.split())


def check_author(author: str) -> str:
    """`--author` as written into the From: line: `NAME <EMAIL>` on one line (a newline there
    wrote trailers and a whole diff section of its own into the file); UsageError otherwise."""
    found = first_control(author)
    if found:
        raise UsageError(f"--author: {author!r} holds a control character ({found!r}); give 'NAME <EMAIL>' on one line")
    name, _, email = author.removesuffix(">").rpartition(" <")
    if not (author.endswith(">") and name.strip() and email) or any(c in name + email for c in "<>") \
            or any(c.isspace() for c in email):
        raise UsageError(f"--author: {author!r} is not 'NAME <EMAIL>'")
    return author


def _check_fields(trailers: Trailers, body: str) -> None:
    """Every header field read back as itself: no control character in the one-line fields (the
    title is one line, whitespace runs joined), none but newlines and tabs in the message, and no
    line of the message that would be read as a trailer or as the start of the diff."""
    one_line = [("title", trailers.title), ("range", trailers.applies_to),
                *(("upstream reference", ref) for ref in trailers.upstream),
                *(("stacking order", pid) for pid in trailers.after)]
    for field_name, value in one_line:
        found = first_control(_one_line(value) if field_name == "title" else value)
        if found:
            raise UsageError(f"patch {trailers.id}: its {field_name} holds a control character ({found!r}); "
                             f"a header field is written as one line of text: {value!r}")
    for line in body.split("\n"):  # (not splitlines: a CR or a form feed is a character to refuse)
        found = first_control(line.replace("\t", " "))
        if found:
            raise UsageError(f"patch {trailers.id}: its rationale holds a control character ({found!r}) in {line!r}")
        if reads_as_diff_syntax(line):
            raise UsageError(f"patch {trailers.id}: its rationale has a line that would be read as part of the patch, "
                             f"not its message ({line!r}); reword it")



def _range(start: int, count: int) -> str:
    # The unified format: a hunk that is empty on one side names the line before it.
    if count == 0:
        return f"{start},0"
    return str(start + 1) if count == 1 else f"{start + 1},{count}"


def _hunks(old: list[bytes], new: list[bytes]) -> list[bytes]:
    import difflib  # only diffs need it

    out: list[bytes] = []
    matcher = difflib.SequenceMatcher(None, old, new, autojunk=False)
    for group in matcher.get_grouped_opcodes(_CONTEXT):
        first, last = group[0], group[-1]
        i1, i2, j1, j2 = first[1], last[2], first[3], last[4]
        out.append(f"@@ -{_range(i1, i2 - i1)} +{_range(j1, j2 - j1)} @@\n".encode())
        for tag, a1, a2, b1, b2 in group:
            if tag == "equal":
                out += [_marked(b" ", line) for line in old[a1:a2]]
                continue
            out += [_marked(b"-", line) for line in old[a1:a2]]
            out += [_marked(b"+", line) for line in new[b1:b2]]
    return out


def _marked(sign: bytes, line: bytes) -> bytes:
    return sign + line if line.endswith(b"\n") else sign + line + b"\n" + _NO_NEWLINE


def file_diff(change: FileChange, prefix: str = "", sides: bool = True) -> bytes:
    """One `diff --git` section; b"" when the bytes are the same. `prefix` goes before the
    package path: "python/" for an SGLang checkout, "" for an installed tree; `sides=False`
    leaves out git's a/ b/ (as `git diff --no-prefix` writes)."""
    if change.before == change.after:
        return b""
    path = prefix + change.rel
    a, b = ("a/", "b/") if sides else ("", "")
    old_blob = NULL_BLOB if change.before is None else git_blob_sha1(change.before)
    new_blob = NULL_BLOB if change.after is None else git_blob_sha1(change.after)
    head = [f"diff --git {a}{path} {b}{path}\n"]
    if change.before is None:
        head += [f"new file mode {FILE_MODE}\n", f"index {old_blob}..{new_blob}\n"]
    elif change.after is None:
        head += [f"deleted file mode {FILE_MODE}\n", f"index {old_blob}..{new_blob}\n"]
    else:
        head.append(f"index {old_blob}..{new_blob} {FILE_MODE}\n")
    old, new = split_lines(change.before or b""), split_lines(change.after or b"")
    if not old and not new:  # an empty file added or removed: git writes no hunk
        return "".join(head).encode()
    head.append("--- /dev/null\n" if change.before is None else f"--- {a}{path}\n")
    head.append("+++ /dev/null\n" if change.after is None else f"+++ {b}{path}\n")
    return "".join(head).encode() + b"".join(_hunks(old, new))


def git_diff(changes: list[FileChange] | tuple[FileChange, ...], prefix: str = "", sides: bool = True) -> bytes:
    """The `diff --git` sections of every change, in path order."""
    return b"".join(file_diff(change, prefix, sides) for change in sorted(changes, key=lambda c: c.rel))


def counts(change: FileChange) -> tuple[int, int]:
    """(lines added, lines removed) of one change."""
    added = removed = 0
    for line in _hunks(split_lines(change.before or b""), split_lines(change.after or b"")):
        if line.startswith(b"+"):
            added += 1
        elif line.startswith(b"-"):
            removed += 1
    return added, removed


def diffstat(changes: list[FileChange] | tuple[FileChange, ...], prefix: str = "") -> str:
    """The summary `git format-patch` writes after `---`."""
    rows = [(prefix + c.rel, *counts(c)) for c in sorted(changes, key=lambda c: c.rel) if c.before != c.after]
    if not rows:
        return ""
    width = max(len(path) for path, _, _ in rows)
    most = max(added + removed for _, added, removed in rows)
    digits = len(str(most))
    room = max(10, 72 - width - digits - 4)  # git keeps a line within about 80 columns
    out = []
    for path, added, removed in rows:
        total = added + removed
        plus, minus = added, removed
        if most > room:  # scaled, but a change never shrinks to nothing
            plus = max(1, added * room // most) if added else 0
            minus = max(1, removed * room // most) if removed else 0
        out.append(f" {path:<{width}} | {total:>{digits}} {'+' * plus}{'-' * minus}".rstrip() + "\n")
    added = sum(row[1] for row in rows)
    removed = sum(row[2] for row in rows)
    summary = f" {len(rows)} file{'s' if len(rows) != 1 else ''} changed"
    if added or not removed:
        summary += f", {added} insertion{'s' if added != 1 else ''}(+)"
    if removed:
        summary += f", {removed} deletion{'s' if removed != 1 else ''}(-)"
    return "".join(out) + summary + "\n"


def _subject(title: str) -> str:
    subject = f"[PATCH] {_one_line(title)}"
    if subject.isascii():
        return subject
    return MailHeader(subject, "utf-8").encode()  # RFC 2047, as git format-patch writes it


def format_patch(trailers: Trailers, body: str, changes: list[FileChange] | tuple[FileChange, ...],
                 prefix: str = "python/", mail: Mail | None = None) -> bytes:
    """A `git format-patch` file: mbox header, `body` (free text), the trailers, `---`, the
    diffstat, the `diff --git` sections. `git am` takes it as one commit."""
    from patchkit import __version__

    mail = mail or Mail()
    check_author(mail.author)
    _check_fields(trailers, body)
    text = "\n\n".join(part for part in (body.strip(), "\n".join(trailers.lines())) if part)
    header = [
        f"From {mail.commit} Mon Sep 17 00:00:00 2001",  # the fixed date is git's own marker
        f"From: {mail.author}",
        f"Date: {format_datetime(mail.date)}",
        f"Subject: {_subject(trailers.title)}",
    ]
    if not (mail.author + text).isascii():
        header += ["MIME-Version: 1.0", "Content-Type: text/plain; charset=UTF-8", "Content-Transfer-Encoding: 8bit"]
    head = "\n".join(header) + "\n\n" + text + "\n---\n" + diffstat(changes, prefix) + "\n"
    return head.encode() + git_diff(changes, prefix) + f"-- \npatchkit {__version__}\n\n".encode()
