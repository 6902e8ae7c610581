"""Unified diffs as `git diff` / `git format-patch` / `diff -u` write them, parsed into a typed
model: the header's fields (trailer lines `Patchkit-Id:` ..., format-patch's Subject and body)
and per file its paths, blob hashes, modes and hunks. Bytes in, bytes kept: a hunk's lines are
the file's own bytes (CRLF, a BOM, no final newline), so applying them is byte-exact.

The package's files are named relative to the site folder (`sglang/...`), whatever prefix the
diff used (`a/python/sglang/...` of an SGLang checkout, `a/sglang/...`, or none); files outside
the package (`test/...`, `sgl-kernel/...`, docs) are kept apart in `outside`.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from patchkit.base import package_path
from patchkit.base.errors import PlanError, UsageError
from patchkit.base.patch_id import PATCH_ID_RULE, is_patch_id
from patchkit.base.util import TooLarge, read_regular
from patchkit.diffs.units import split_lines

PACKAGE_DIR = "sglang/"
CHECKOUT_DIR = "python/"  # an SGLang checkout keeps the package under python/

# The most patchkit reads from a diff file: the largest real diff of a release's patches is about
# 300 kB; a file beyond 200 times that is no diff patch (a 300 MB one took 2.5 GB and 20 s to be
# found "not a diff").
FILE_LIMIT = 64 << 20

_TRAILER = re.compile(r"^(patchkit-[a-z-]+)\s*:\s*(.*?)\s*$", re.IGNORECASE)
_HUNK = re.compile(rb"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@")
_SEQUENCE = re.compile(r"^\d{4}-")
_SUBJECT_TAG = re.compile(r"^\s*\[[^\]]*PATCH[^\]]*\]\s*", re.IGNORECASE)


@dataclass(frozen=True)
class Hunk:
    old_start: int
    old_count: int
    new_start: int
    new_count: int
    # Each line with its tag first (b" ", b"-", b"+") and its own line ending (none where the
    # diff said "\ No newline at end of file").
    lines: tuple[bytes, ...]

    @property
    def before(self) -> list[bytes]:
        """The lines this hunk expects (context and removed lines), without tags."""
        return [line[1:] for line in self.lines if line[:1] in (b" ", b"-")]

    @property
    def after(self) -> list[bytes]:
        return [line[1:] for line in self.lines if line[:1] in (b" ", b"+")]


@dataclass(frozen=True)
class FileDiff:
    old_path: str | None  # relative to the site folder (sglang/...); None for a created file
    new_path: str | None  # None for a deleted file
    old_blob: str | None  # abbreviated git blob SHA-1 of the pre-image (from the index line)
    new_blob: str | None
    old_mode: str | None
    new_mode: str | None
    hunks: tuple[Hunk, ...]

    @property
    def path(self) -> str:
        """The file the change is about (its pre-image path, else the created file)."""
        return self.old_path or self.new_path or ""


@dataclass(frozen=True)
class DiffPatchFile:
    name: str  # the diff file's name, for messages
    id: str
    title: str
    rationale: str
    upstream: tuple[str, ...]
    applies_to: str  # PEP 440 specifier; "" = any release
    after: tuple[str, ...]  # ids of the patches it stacks on
    prefix: str  # "a/python/", "a/" or "" (of the first file in the package)
    files: tuple[FileDiff, ...]  # files in the package
    outside: tuple[str, ...] = ()  # files of the diff outside the package, left out
    notes: tuple[str, ...] = field(default_factory=tuple)  # what the parser tolerated


def git_blob_sha1(data: bytes) -> str:
    """The git blob hash of a file's bytes (what `git hash-object FILE` prints)."""
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()



def _without_bom(data: bytes, name: str) -> bytes:
    """The diff without a UTF-8 BOM before its first line (an editor's, PowerShell's
    `Out-File -Encoding utf8`): with it the first `diff --git` line is not seen and that file lost
    its index line (its pre-image, modes). A UTF-16 diff (PowerShell's `git diff > FILE`) is a usage error saying so."""
    if data.startswith(b"\xef\xbb\xbf"):
        return data[3:]
    if data.startswith((b"\xff\xfe", b"\xfe\xff")):
        raise UsageError(f"{name}: the diff is UTF-16 text (PowerShell's `git diff > FILE` writes it); write it "
                         "as bytes: `git diff --output=FILE`, or convert it to UTF-8")
    return data


def _is_file_start(lines: list[bytes], i: int) -> bool:
    line = lines[i]
    return line.startswith(b"diff --git ") or (
        line.startswith(b"--- ") and i + 1 < len(lines) and lines[i + 1].startswith(b"+++ "))


_NOT_ID = re.compile(r"[^a-z0-9]+")


def default_id(name: str) -> str:
    """The id a diff file's name gives (DERIVED_ID_RULE): its stem, a leading "NNNN-" sequence
    number dropped, lower-cased, every run of other characters than letters and digits one dash,
    no dash at either end: `v0.5.15.post1-sglang.patch` -> `v0-5-15-post1-sglang`. The field's
    files keep the names their framework gives them."""
    stem = _SEQUENCE.sub("", Path(name).name.rsplit(".", 1)[0])
    return _NOT_ID.sub("-", stem.lower()).strip("-")


DERIVED_ID_RULE = ("the file name without its suffix and a leading `NNNN-`, lower-cased, each run of other "
                   "characters than letters and digits one dash")


@dataclass(frozen=True)
class Header:
    id: str
    title: str
    rationale: str
    upstream: tuple[str, ...]
    applies_to: str
    after: tuple[str, ...]


def _header(lines: list[bytes], name: str) -> Header:
    text = [line.decode("utf-8", "replace").rstrip("\r\n") for line in lines]
    trailers: dict[str, list[str]] = {}
    for line in text:
        found = _TRAILER.match(line)
        if found:
            trailers.setdefault(found.group(1).lower(), []).append(found.group(2))
    subject, body = _subject_and_body(text)
    named = trailers.get("patchkit-id")
    pid = named[-1] if named else default_id(name)
    if not is_patch_id(pid):
        # A derived id breaks the rule only when the name has no letter or digit at all.
        said = "its `Patchkit-Id:`" if named else f"its file name ({DERIVED_ID_RULE})"
        raise UsageError(f"{name}: {pid!r} is not a valid patch id ({PATCH_ID_RULE}; from {said}); set "
                         "`Patchkit-Id:` in its header")
    applies_to = (trailers.get("patchkit-applies-to") or [""])[-1]
    from packaging.specifiers import InvalidSpecifier, SpecifierSet  # here: not a cost of every status

    try:
        SpecifierSet(applies_to)
    except InvalidSpecifier:
        raise UsageError(f"{name}: `Patchkit-Applies-To: {applies_to}` is not a PEP 440 version specifier "
                         f"({applies_to!r}; e.g. '>=0.5.14,<0.5.21')") from None
    title = (trailers.get("patchkit-title") or [subject or pid])[-1]
    rationale = "\n".join(trailers.get("patchkit-rationale") or []) or body or title
    return Header(id=pid, title=title, rationale=rationale, upstream=tuple(trailers.get("patchkit-upstream", ())),
                  applies_to=applies_to,
                  after=tuple(a for value in trailers.get("patchkit-after", ()) for a in value.replace(",", " ").split()))


def reads_as_diff_syntax(line: str) -> bool:
    """Whether a line of a patch's message would be read as something else: a patchkit trailer,
    the `---` that ends the message, or the start of a file's diff."""
    return bool(_TRAILER.match(line)) or line == "---" or line.startswith(("diff --git ", "--- ", "+++ "))


def _subject_and_body(text: list[str]) -> tuple[str, str]:
    """format-patch's Subject (folded lines joined, "[PATCH ...]" dropped) and the body between
    the header block and the "---" line (trailer lines of patchkit left out)."""
    start = next((i for i, line in enumerate(text) if line.lower().startswith("subject:")), None)
    if start is None:
        return "", ""
    parts = [text[start].split(":", 1)[1].strip()]
    i = start + 1
    while i < len(text) and text[i][:1] in (" ", "\t"):
        parts.append(text[i].strip())
        i += 1
    while i < len(text) and text[i].strip():  # the rest of the mail header block
        i += 1
    body: list[str] = []
    for line in text[i:]:
        if line == "---":
            break
        if not _TRAILER.match(line):
            body.append(line)
    return _SUBJECT_TAG.sub("", " ".join(parts)).strip(), "\n".join(body).strip()


def _path(raw: bytes, name: str, line: int) -> str | None:
    """A path of a ---/+++ line: unquoted as git quotes it, else the timestamp after a tab dropped;
    None for /dev/null."""
    quoted = _c_unquoted(raw.strip())
    if quoted is not None:
        text = _decoded(quoted[0])
    else:
        text = _decoded(raw).rstrip("\r\n").split("\t", 1)[0].strip()
    return None if text == "/dev/null" else _checked_path(text, name, line)


def _decoded(raw: bytes) -> str:
    return raw.decode("utf-8", "surrogateescape")


# git's C quoting of a path (quote.c): a path with a byte outside printable ASCII, a quote or a
# backslash is written in double quotes, those bytes as \ooo octal or one of these escapes.
_C_ESCAPES = {ord("a"): 7, ord("b"): 8, ord("t"): 9, ord("n"): 10, ord("v"): 11, ord("f"): 12, ord("r"): 13,
              ord('"'): ord('"'), ord("\\"): ord("\\")}
_OCTAL = b"01234567"


def _c_unquoted(raw: bytes) -> tuple[bytes, bytes] | None:
    """(the path's bytes, what follows its closing quote) when `raw` starts with a path git
    C-quoted, unquoted as git does; None when it does not start with one (a `"` in an unquoted
    path, or a quote never closed, is read as it stands)."""
    if not raw.startswith(b'"'):
        return None
    out = bytearray()
    i = 1
    while i < len(raw):
        byte = raw[i]
        if byte == ord('"'):
            return bytes(out), raw[i + 1:]
        if byte != ord("\\"):
            out.append(byte)
            i += 1
            continue
        digits = raw[i + 1:i + 4]
        if len(digits) == 3 and all(d in _OCTAL for d in digits):
            out.append(int(digits, 8) & 0xFF)
            i += 4
        elif raw[i + 1:i + 2] and raw[i + 1] in _C_ESCAPES:
            out.append(_C_ESCAPES[raw[i + 1]])
            i += 2
        else:
            return None
    return None


def _git_line_paths(words: bytes) -> tuple[str | None, str | None]:
    """The two paths of a `diff --git A B` line, each C-quoted by git or not (two unquoted paths
    with spaces: the two halves, as they are the same path)."""
    first = _c_unquoted(words)
    if first is not None:
        path, rest = first
        second = _c_unquoted(rest[1:]) if rest.startswith(b" ") else None
        return _decoded(path), _decoded(second[0] if second is not None else rest[1:]) or None
    if b' "' in words:
        head, _, tail = words.rpartition(b' "')
        second = _c_unquoted(b'"' + tail)
        if second is not None:
            return _decoded(head) or None, _decoded(second[0])
    half = _decoded(words).split(" ")
    mid = len(half) // 2  # "a/x b/x": the two halves of a path without spaces
    return " ".join(half[:mid]) or None, " ".join(half[mid:]) or None


def _meta_path(value: str) -> str:
    """The path of a `rename from`/`rename to` line, unquoted when git quoted it."""
    quoted = _c_unquoted(value.encode("utf-8", "surrogateescape"))
    return _decoded(quoted[0]) if quoted is not None else value


def _checked_path(text: str, name: str, line: int) -> str:
    """A path as the diff spells it, normalised (`package_path.normalised`), refused (a usage error
    naming the diff file and its line) where it could lead out of the folder it is relative to
    (`package_path.problem`: absolute, a `..` component, a NUL byte or another control character):
    the one rule for every path a diff names, checked when the diff is loaded, so that no command
    writes through it (`apply` once refused it only at its write, while `bump` wrote it into DIR's
    parent)."""
    why = package_path.problem(text)
    if why:
        raise UsageError(f"{name}: line {line}: the path {text!r} {why}; no file of the package is named so: a "
                         "damaged or hostile diff")
    return package_path.normalised(text)


def _strip_prefix(old: str | None, new: str | None) -> tuple[str | None, str | None, str]:
    """Paths without git's a/ b/ prefixes (when both sides carry them), and the prefix seen."""
    if all(p is None or p.startswith(side) for p, side in ((old, "a/"), (new, "b/"))) and (old or new):
        return (old[2:] if old else None), (new[2:] if new else None), "a/"
    return old, new, ""


def _in_package(path: str | None) -> tuple[str | None, str]:
    """(path relative to the site folder, or None when outside the package; the checkout part)."""
    if path is None:
        return None, ""
    if path.startswith(CHECKOUT_DIR + PACKAGE_DIR):
        return path[len(CHECKOUT_DIR):], CHECKOUT_DIR
    if path.startswith(PACKAGE_DIR):
        return path, ""
    return None, ""


def _changes_bytes(section: "_Section") -> bool:
    """Whether a section changes its file's bytes or name: hunks, a file created or deleted, a
    rename or copy, a binary change (not a mode change alone, nor a header without hunks)."""
    meta = section.meta
    return bool(section.hunks) or section.old is None or section.new is None or "from" in meta or "to" in meta \
        or bool(meta.get("binary"))


def _refuse_package_under_a_folder(name: str, *paths: str | None) -> None:
    """A path outside the package that holds a file of it under a folder patchkit does not strip
    (`vendor/sglang/python/sglang/...`: a checkout kept in a monorepo; `site.orig/sglang/...`:
    `diff -ru` of two copies of the package) is a usage error naming the folder to make the diff
    from: read as a file outside the package, the fix would be a diff with nothing to apply."""
    for path in paths:
        parts = (path or "").split("/")
        at = max((i for i in range(1, len(parts) - 1) if parts[i] + "/" == PACKAGE_DIR), default=None)
        if at is None:
            continue
        root = parts[:at - 1] if parts[at - 1] + "/" == CHECKOUT_DIR and at > 1 else parts[:at]
        folder = "/".join(parts[:at]) + "/"
        raise UsageError(f"{name}: {path} is {'/'.join(parts[at:])} of the package under {folder}, a folder patchkit "
                         f"does not strip (it reads python/sglang/... or sglang/...): make the diff from "
                         f"{'/'.join(root)}/ (`git diff --relative={'/'.join(root)}`) and load it again")


def too_large(name: str) -> UsageError:
    return UsageError(f"{name}: more than {FILE_LIMIT >> 20} MiB, the most patchkit reads from a diff file (a "
                      "release's diff patch is well under 1 MiB): not a diff patch; refused")


def read_file(path: Path) -> bytes:
    """A diff file's bytes, no more than FILE_LIMIT of them read (a larger one is exit 2,
    `too_large`); `read_regular`'s rules otherwise (never blocks: a FIFO is exit 6)."""
    try:
        return read_regular(path, FILE_LIMIT)
    except TooLarge:
        raise too_large(str(path)) from None


def parse(data: bytes, name: str) -> DiffPatchFile:
    """A diff file parsed; a file that is not a diff (no file in it, a hunk cut short by
    something that is not a diff line) is a usage error naming the file and the line."""
    lines = split_lines(_without_bom(data, name))
    start = next((i for i in range(len(lines)) if _is_file_start(lines, i)), None)
    if start is None:
        raise UsageError(f"{name}: not a diff (no 'diff --git' or '--- '/'+++ ' lines)")
    header = _header(lines[:start], name)
    lines, notes = _crlf_dropped(lines, start, name)
    files: list[FileDiff] = []
    outside: list[str] = []
    prefix: str | None = None
    damaged = 0
    for section in _sections(lines, start, name):  # each one judged before the next is read
        damaged += section.damaged
        old_rel, new_rel, folder = _package_paths(section)
        if old_rel is None and new_rel is None:
            _refuse_package_under_a_folder(name, section.new, section.old)
            if _changes_bytes(section):  # (a mode change alone is no change to carry: `load` says so)
                outside.append(section.new or section.old or "?")
            continue
        file, note = _file_diff(section, old_rel, new_rel, name)
        notes += [note] if note else []
        if file is not None:
            prefix = section.side + folder if prefix is None else prefix
            files.append(file)
    _refuse_two_sections(files, name)
    notes += _left_out(name, outside, damaged)
    return DiffPatchFile(name=name, id=header.id, title=header.title, rationale=header.rationale,
                         upstream=header.upstream, applies_to=header.applies_to, after=header.after,
                         prefix=prefix or "", files=tuple(files), outside=tuple(outside), notes=tuple(notes))


@dataclass(frozen=True)
class _Section:
    """One file's section as the diff writes it: its paths without git's a/ b/ (`side`: the
    prefix seen; None: /dev/null), git's extended header lines (`meta`, `_meta_line`), its hunks
    and how many of their blank context lines had lost their space."""
    old: str | None
    new: str | None
    side: str
    meta: dict[str, str]
    hunks: tuple[Hunk, ...]
    damaged: int


def _crlf_dropped(lines: list[bytes], start: int, name: str) -> tuple[list[bytes], list[str]]:
    """The lines from `start` on with their CRs dropped where git's own lines end in CRLF too
    (git writes its lines with LF whatever the files hold: the whole diff was converted after git
    wrote it, by an editor or a Windows checkout), and the note saying so."""
    if not _converted_to_crlf(lines[start:]):
        return lines, []
    return lines[:start] + [line[:-2] + b"\n" if line.endswith(b"\r\n") else line for line in lines[start:]], [
        f"{name}: every line of the diff ends in CRLF, git's own lines too (the diff was converted after git wrote "
        "it): read with the CRs dropped, as GNU patch does (`git apply` refuses it)"]


def _sections(lines: list[bytes], start: int, name: str) -> Iterator[_Section]:
    """Each file's section from line `start` on: its git header (`_git_header`), its paths
    (`_section_paths`), its hunks (`_hunks`); lines between sections (format-patch's signature,
    stray text) skipped, a hunk among them refused."""
    i = start
    while i < len(lines):
        if not _is_file_start(lines, i):
            if lines[i].startswith(b"@@ "):
                # git: "patch fragment without header": the hunk before counts fewer lines than it holds.
                raise UsageError(f"{name}: line {i + 1}: a hunk outside any file (the hunk before it holds more "
                                 "lines than its header counts: a hand-edited diff?)")
            i += 1
            continue
        meta, git_paths, i = _git_header(lines, i, name)
        old, new, i = _section_paths(lines, i, name, meta, git_paths)
        hunks, i, damaged = _hunks(lines, i, name)
        old, new, side = _strip_prefix(old, new)
        yield _Section(old, new, side, meta, hunks, damaged)


def _git_header(lines: list[bytes], i: int, name: str) -> tuple[dict[str, str], tuple[str | None, str | None], int]:
    """A section's `diff --git A B` line and the extended header lines after it, up to its
    ---/+++ lines or its first hunk: (what those lines say, `_meta_line`; the git line's two
    paths; the line after them). A section of `diff -u` has neither."""
    meta: dict[str, str] = {}
    if not lines[i].startswith(b"diff --git "):
        return meta, (None, None), i
    first, second = (_checked_path(part, name, i + 1) if part else part
                     for part in _git_line_paths(lines[i][len(b"diff --git "):].rstrip(b"\r\n")))
    i += 1
    while i < len(lines) and not lines[i].startswith((b"--- ", b"diff --git ", b"@@ ")):
        meta.update(_meta_line(lines[i], name, i + 1))
        i += 1
    return meta, (first, second), i


def _meta_line(raw: bytes, name: str, number: int) -> dict[str, str]:
    """What one extended header line of git says: the index line's blob hashes (and mode), the
    old and new modes, a created or deleted file, a rename's or copy's paths, a binary change;
    nothing for another line."""
    line = raw.decode("utf-8", "surrogateescape").rstrip("\r\n")
    key, _, value = line.partition(" ")
    if key == "index":
        blobs, _, mode = value.partition(" ")
        old_blob, _, new_blob = blobs.partition("..")
        return {"old_blob": old_blob, "new_blob": new_blob, **({"old_mode": mode, "new_mode": mode} if mode else {})}
    if line.startswith(("old mode ", "deleted file mode ")):
        # A deleted file is said here only: an empty one has no ---/+++ lines to say it.
        return {"old_mode": line.rsplit(" ", 1)[1], **({"deleted": "1"} if line.startswith("deleted file") else {})}
    if line.startswith(("new mode ", "new file mode ")):
        return {"new_mode": line.rsplit(" ", 1)[1], **({"created": "1"} if line.startswith("new file") else {})}
    if line.startswith(("rename from ", "copy from ")):
        return {"from": _checked_path(_meta_path(line.split(" ", 2)[2]), name, number),
                **({"copy": "1"} if line.startswith("copy") else {})}
    if line.startswith(("rename to ", "copy to ")):
        return {"to": _checked_path(_meta_path(line.split(" ", 2)[2]), name, number)}
    if line.startswith(("GIT binary patch", "Binary files ")):
        return {"binary": "1"}
    return {}


def _section_paths(lines: list[bytes], i: int, name: str, meta: dict[str, str],
                   git_paths: tuple[str | None, str | None]) -> tuple[str | None, str | None, int]:
    """A section's two paths as the diff writes them (None: /dev/null) and the line after them:
    its ---/+++ lines, or without them (a mode change, a rename without edits, a binary file) the
    paths its git lines name."""
    if i < len(lines) and lines[i].startswith(b"--- ") and i + 1 < len(lines) and lines[i + 1].startswith(b"+++ "):
        return _path(lines[i][4:], name, i + 1), _path(lines[i + 1][4:], name, i + 2), i + 2
    old = None if meta.get("created") else (("a/" + meta["from"]) if "from" in meta else git_paths[0])
    new = None if meta.get("deleted") else (("b/" + meta["to"]) if "to" in meta else git_paths[1])
    return old, new, i


def _hunks(lines: list[bytes], i: int, name: str) -> tuple[tuple[Hunk, ...], int, int]:
    """The hunks from line `i` on (`_hunk` reads each; one opening a conflict block is refused):
    (them, the line after them, their blank context lines that had lost their space)."""
    hunks: list[Hunk] = []
    damaged = 0
    while i < len(lines) and lines[i].startswith(b"@@ "):
        at = i
        hunk, i, blank = _hunk(lines, i, name)
        hunks.append(hunk)
        damaged += blank
        _refuse_conflict_markers(name, lines, at, i)
    return tuple(hunks), i, damaged


def _package_paths(section: _Section) -> tuple[str | None, str | None, str]:
    """A section's two paths relative to the site folder (None: outside the package, or
    /dev/null) and the checkout folder they were under ("python/" or "")."""
    old_rel, old_dir = _in_package(section.old)
    new_rel, new_dir = _in_package(section.new)
    if section.old is not None and section.new is not None and "from" not in section.meta \
            and (old_rel is None) != (new_rel is None):
        # `diff -ru sglang.orig sglang` (a copy kept before a hand edit): one file under two
        # folder names, as `patch` reads it; not a rename (git says so in its own lines).
        old_rel = new_rel = old_rel or new_rel
    return old_rel, new_rel, old_dir or new_dir


def _file_diff(section: _Section, old_rel: str | None, new_rel: str | None,
               name: str) -> tuple[FileDiff | None, str | None]:
    """A section of a package file as the model's file (None: it changes only the file's mode),
    and the note a mode change left out gets; a change patchkit cannot make is refused
    (`_refuse_unsupported`)."""
    old, new, meta = section.old, section.new, section.meta
    _refuse_unsupported(name, old_rel if old is not None else None, new_rel if new is not None else None, meta)
    whole = old is None or new is None  # a file the diff creates or deletes (its mode goes with it)
    note = None
    if meta.get("old_mode") != meta.get("new_mode") and not whole:
        note = (f"{name}: mode change of {old_rel or new_rel} ({meta.get('old_mode')} -> {meta.get('new_mode')}) left "
                "out (patchkit changes a file's bytes, not its mode)")
    if not section.hunks and not whole:
        return None, note  # nothing but the mode changes
    return FileDiff(old_path=old_rel if old is not None else None, new_path=new_rel if new is not None else None,
                    old_blob=_blob(meta.get("old_blob")), new_blob=_blob(meta.get("new_blob")),
                    old_mode=meta.get("old_mode"), new_mode=meta.get("new_mode"), hunks=section.hunks), note


def _refuse_two_sections(files: list[FileDiff], name: str) -> None:
    """A file changed by two sections of the diff is a usage error naming it."""
    seen: set[str] = set()
    for file in files:
        if file.path in seen:
            # A format-patch series: the second section's hunks are against the first one's result.
            raise UsageError(f"{name}: {file.path} is changed by more than one section of the diff (a `git "
                             "format-patch` series of several commits?); patchkit applies one change per file: make "
                             "one diff of the series (`git diff BASE HEAD`), or one diff file per commit ordered "
                             "with `Patchkit-After:`")
        seen.add(file.path)


def _left_out(name: str, outside: list[str], damaged: int) -> list[str]:
    """The notes on what the parser left out or tolerated: files outside the package, blank
    context lines without their space."""
    notes = []
    if outside:
        notes.append(f"{name}: {len(outside)} file(s) outside the sglang package left out: {', '.join(outside)}")
    if damaged:
        notes.append(f"{name}: {damaged} blank context line(s) without their leading space (whitespace damage, "
                     "which `git apply` calls a corrupt patch) read as blank context lines")
    return notes


def load(data: bytes, name: str) -> DiffPatchFile:
    """A diff patch's file parsed (`parse`), refused when it changes no file at all (only modes:
    the parser's notes say so). A diff whose every file is outside the package (a checkout's
    `python/pyproject.toml`, `test/...`) loads: a member of its set with nothing to apply
    (`nothing_inside`)."""
    diff = parse(data, name)
    if not diff.files and not diff.outside:
        raise PlanError(f"{name}: no change to a file of the sglang package in it")
    return diff


def nothing_inside(diff: DiffPatchFile) -> str | None:
    """What a diff whose every file is outside the installed package is, in words (status's
    detail, list, the note every command that reads its set prints); None for another diff."""
    if diff.files or not diff.outside:
        return None
    return (f"a diff with nothing inside the sglang package: nothing to apply here; its files belong to an SGLang "
            f"checkout, yours to carry there: {', '.join(diff.outside)}")


def _refuse_conflict_markers(name: str, lines: list[bytes], start: int, end: int) -> None:
    """An added line that opens a conflict block (`patchkit rebase` writes them where a unit
    conflicts): the diff is not resolved yet, and what it would write does not compile."""
    for i in range(start, end):
        if lines[i].startswith(b"+<<<<<<< "):
            raise UsageError(f"{name}: line {i + 1}: an unresolved conflict block (`<<<<<<<` ... `>>>>>>>`, as "
                             "`patchkit rebase` writes one where a unit conflicts); resolve it, then load the diff")


def _converted_to_crlf(lines: list[bytes]) -> bool:
    """Whether the lines git writes itself (diff --git, index, ---/+++, @@) all end in CRLF."""
    own = [line for line in lines if line.startswith((b"diff --git ", b"index ", b"--- ", b"+++ ", b"@@ "))]
    return bool(own) and all(line.endswith(b"\r\n") for line in own)


def _refuse_unsupported(name: str, old: str | None, new: str | None, meta: dict[str, str]) -> None:
    """A file section patchkit cannot carry out is a usage error naming it: a diff patch changes
    the bytes of the package's files (a file it creates or deletes is written or removed whole,
    with a backup), so renaming or copying a file, creating one that is not Python, or a binary
    change would otherwise be dropped or half done."""
    why = None
    if meta.get("binary"):
        why = f"holds a binary change of {new or old}"
    elif old is None or meta.get("created"):
        if new is None or not new.endswith(".py"):
            why = f"creates {new}, which is not a Python file"
    elif new is None or meta.get("deleted"):
        pass  # removed with a backup; revert restores it
    elif old != new:
        why = f"{'copies' if meta.get('copy') else 'renames'} {old} to {new}"
    if why:
        raise UsageError(f"{name}: the diff {why}, which a diff patch cannot do (it changes the release's files in "
                         "place); apply that part with git, or leave it out of the diff")


def _blob(value: str | None) -> str | None:
    """An index line's hash; None for git's all-zero "no file" hash or no hash at all."""
    return value if value and value.strip("0") else None


def _hunk(lines: list[bytes], i: int, name: str) -> tuple[Hunk, int, int]:
    found = _HUNK.match(lines[i])
    if found is None:
        raise UsageError(f"{name}: line {i + 1}: a hunk header that is not '@@ -N,M +N,M @@'")
    header = i + 1  # the hunk's line in the diff file, for messages
    old_start, new_start = int(found.group(1)), int(found.group(3))
    old_left = 1 if found.group(2) is None else int(found.group(2))
    new_left = 1 if found.group(4) is None else int(found.group(4))
    old_count, new_count = old_left, new_left
    body: list[bytes] = []
    blank = 0
    i += 1
    while i < len(lines) and (old_left > 0 or new_left > 0):
        line = lines[i]
        tag = line[:1]
        if line in (b"\n", b"\r\n"):  # a blank context line whose single space an editor stripped
            line, tag = b" " + line, b" "
            blank += 1
        if tag == b" ":
            old_left, new_left = old_left - 1, new_left - 1
        elif tag == b"-":
            old_left -= 1
        elif tag == b"+":
            new_left -= 1
        elif tag == b"\\":
            _drop_newline(body)
            i += 1
            continue
        elif old_left == new_left and (line.startswith((b"@@ ", b"diff --git ")) or _is_file_start(lines, i)):
            break  # cut short where only context is left: blank lines an editor stripped at the end
        else:
            raise UsageError(f"{name}: line {i + 1}: the hunk of line {header} ends early, before this line "
                             f"(expected {max(old_left, 0)} more old and {max(new_left, 0)} more new line(s))")
        body.append(line)
        i += 1
    if old_left == new_left > 0:
        # Only context is missing (an editor stripped the blank context lines that ended the hunk,
        # as `git apply --recount` would count them): they are blank lines.
        ending = b"\r\n" if body and body[-1].endswith(b"\r\n") else b"\n"
        body += [b" " + ending] * old_left
        blank += old_left
        old_left = new_left = 0
    elif old_left > 0 or new_left > 0:
        raise UsageError(f"{name}: line {i}: the diff ends inside the hunk of line {header} (expected "
                         f"{max(old_left, 0)} more old and {max(new_left, 0)} more new line(s)): a truncated diff?")
    if old_left < 0 or new_left < 0:
        raise UsageError(f"{name}: line {header}: the hunk holds more lines than its header counts")
    if i < len(lines) and lines[i].startswith(b"\\"):  # "\ No newline at end of file" after the last line
        _drop_newline(body)
        i += 1
    return Hunk(old_start, old_count, new_start, new_count, tuple(body)), i, blank


def _drop_newline(body: list[bytes]) -> None:
    if body:
        # Only the b"\n": a file ending in b"\r" without b"\n" keeps its b"\r" (git's view of it).
        body[-1] = body[-1][:-1] if body[-1].endswith(b"\n") else body[-1]
