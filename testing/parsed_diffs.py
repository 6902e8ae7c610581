"""Every kind of diff the tests build, each read by `unidiff.parse` into plain data: the record that
says a change to the parser reads each of them as before (tests/fixtures/parsed_diffs.json, recorded
from the parser it replaced; tests/unit/diffs/test_unidiff_record.py), and `git apply --numstat`'s
reading of each, an independent parser's.

- `SYNTHETIC`: diffs made here by real git from small files (no release): "\\ No newline at end
  of file" on either side, files created and deleted, renames and copies, binary changes (both of
  git's forms), CRLF files and a diff converted to CRLF after git wrote it, blank context lines
  whose space an editor stripped, mode changes, format-patch headers, `diff -ru`, `-U0`, quoted
  paths, a BOM, files outside the package, many sections; and the diffs the parser refuses.
- `from_releases()`: testing.field_diffs' diffs (both field diffs, stacked, sibling, disjoint,
  .cuh, moved code, the three one-change diffs) and upstream's own changes between every two
  releases in a row (three large modules, files created and deleted, 0.5.17's folder move as
  renames).

`python -m testing.parsed_diffs [--releases]` writes the record (run it on the parser the record
is to hold, never to make a red test green).
"""

from __future__ import annotations

import hashlib
import json
import re
import sys
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

from patchkit.base.errors import UsageError
from patchkit.diffs import unidiff
from testing.diffs import git, git_diff, many_sections, repo_of, write_files

RECORD = Path(__file__).resolve().parents[1] / "tests" / "fixtures" / "parsed_diffs.json"
PY = "sglang/srt/m.py"
TEXT = b"import os\n\n\ndef f():\n    return 1\n\n\ndef g():\n\n    return 2\n\n\nclass A:\n    x = 1\n"


def reading(data: bytes, name: str = "case.patch") -> dict:
    """What `parse` makes of a diff, as plain data: every field of the model, bytes as latin-1
    text (one character per byte), or the usage error it raises."""
    try:
        diff = unidiff.parse(data, name)
    except UsageError as exc:
        return {"error": str(exc)}
    return {
        "id": diff.id, "title": diff.title, "rationale": diff.rationale, "upstream": list(diff.upstream),
        "applies_to": diff.applies_to, "after": list(diff.after), "prefix": diff.prefix,
        "outside": list(diff.outside), "notes": list(diff.notes),
        "files": [{"old_path": f.old_path, "new_path": f.new_path, "old_blob": f.old_blob, "new_blob": f.new_blob,
                   "old_mode": f.old_mode, "new_mode": f.new_mode,
                   "hunks": [[h.old_start, h.old_count, h.new_start, h.new_count,
                              [line.decode("latin-1") for line in h.lines]] for h in f.hunks]} for f in diff.files],
    }


def digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()[:16]


def summary(data: bytes) -> dict:
    """The record's entry of one diff: its bytes' and its reading's digests, and what the reading
    holds in numbers (or its error) so that a difference reads as more than two hashes."""
    found = reading(data)
    entry: dict = {"diff": digest(data), "reading": digest(json.dumps(found, sort_keys=True).encode())}
    if "error" in found:
        entry["error"] = found["error"]
    else:
        entry.update(files=len(found["files"]), hunks=sum(len(f["hunks"]) for f in found["files"]),
                     notes=len(found["notes"]), outside=len(found["outside"]))
    return entry


def numstat(data: bytes) -> list[tuple[int, int, str]] | None:
    """`git apply --numstat`'s reading of a diff: (added, deleted, path) per file section, binary
    sections left out; None where git refuses the diff (whitespace damage, CRLF it did not write)."""
    with tempfile.TemporaryDirectory() as tmp:
        done = git(Path(tmp), "apply", "--numstat", "-", input=data, check=False)
    if done.returncode != 0:
        return None
    found = []
    for line in done.stdout.decode("utf-8", "surrogateescape").splitlines():
        added, deleted, path = line.split("\t", 2)
        if added != "-":
            found.append((int(added), int(deleted), path))
    return found


def _git_diff(before: dict[str, bytes | None], after: dict[str, bytes | None], *args: str,
              modes: dict[str, str] | None = None) -> bytes:
    """`git diff --cached ARGS` from `before` to `after` (`modes`: chmod a file before staging)."""
    with tempfile.TemporaryDirectory() as tmp:
        repo = repo_of(Path(tmp), before)
        write_files(repo, after)
        for rel, mode in (modes or {}).items():
            git(repo, "update-index", "--add", f"--chmod={mode}", rel)
        git(repo, "add", "-A")
        for rel, mode in (modes or {}).items():
            git(repo, "update-index", f"--chmod={mode}", rel)
        return git(repo, "diff", "--cached", "--no-color", *args).stdout


def _fixed_mail(text: bytes) -> bytes:
    """A format-patch with its commit hash, date and git version fixed, so that it is the same
    diff on every run."""
    text = re.sub(rb"^From [0-9a-f]{40} ", b"From " + b"0" * 40 + b" ", text)
    text = re.sub(rb"\nDate: [^\n]*\n", b"\nDate: Thu, 1 Jan 2026 00:00:00 +0000\n", text, count=1)
    return re.sub(rb"\n-- \n[^\n]*\n", b"\n-- \n2.0\n", text)


def _blank_context_stripped(text: bytes) -> bytes:
    """The diff with each blank context line's single space removed, as an editor does."""
    return b"".join(b"\n" if line == b" \n" else line for line in text.splitlines(keepends=True))


CHANGED = TEXT.replace(b"return 1", b"return 10").replace(b"x = 1", b"x = 2")
CRLF = TEXT.replace(b"\n", b"\r\n")
HEADER = "Patchkit-Id: recorded-fix\nPatchkit-Title: A fix\nPatchkit-Upstream: sgl-project/sglang#1\n\n"
# {case: its diff's maker}: made by real git here, no release needed.
SYNTHETIC: dict[str, Callable[[], bytes]] = {
    "modify": lambda: git_diff({PY: TEXT}, {PY: CHANGED}),
    "modify-checkout-prefix": lambda: git_diff({PY: TEXT}, {PY: CHANGED}, prefix="python/"),
    "modify-no-prefix": lambda: _git_diff({PY: TEXT}, {PY: CHANGED}, "--no-prefix"),
    "modify-U0": lambda: git_diff({PY: TEXT}, {PY: CHANGED}, context=0),
    "modify-U1": lambda: git_diff({PY: TEXT}, {PY: CHANGED}, context=1),
    "trailers": lambda: git_diff({PY: TEXT}, {PY: CHANGED}, header=HEADER),
    "format-patch": lambda: _fixed_mail(git_diff({PY: TEXT}, {PY: CHANGED}, header="[fix] A fix\n\nWhy it is needed.\n\n"
                                                 "Patchkit-After: other-fix\n", format_patch=True)),
    "no-newline-old": lambda: git_diff({PY: TEXT.rstrip(b"\n")}, {PY: CHANGED}),
    "no-newline-new": lambda: git_diff({PY: TEXT}, {PY: CHANGED.rstrip(b"\n")}),
    "no-newline-both": lambda: git_diff({PY: TEXT.rstrip(b"\n")}, {PY: CHANGED.rstrip(b"\n")}),
    "no-newline-context": lambda: git_diff({PY: TEXT.rstrip(b"\n")}, {PY: TEXT.replace(b"return 1", b"return 10")
                                                                     .rstrip(b"\n")}),
    "create": lambda: git_diff({}, {PY: TEXT}),
    "create-empty": lambda: git_diff({}, {PY: b""}),
    "create-not-python": lambda: git_diff({}, {"sglang/srt/notes.txt": b"a\n"}),
    "delete": lambda: git_diff({PY: TEXT}, {PY: None}),
    "rename-edited": lambda: git_diff({PY: TEXT}, {PY: None, "sglang/srt/n.py": CHANGED}),
    "rename-pure": lambda: git_diff({PY: TEXT}, {PY: None, "sglang/srt/n.py": TEXT}),
    "copy": lambda: _git_diff({PY: TEXT}, {"sglang/srt/n.py": TEXT}, "-C", "--find-copies-harder"),
    "binary": lambda: _git_diff({"sglang/srt/k.bin": b"\0\1\2" * 40}, {"sglang/srt/k.bin": b"\0\1\3" * 40}, "--binary"),
    "binary-plain": lambda: git_diff({"sglang/srt/k.bin": b"\0\1\2" * 40}, {"sglang/srt/k.bin": b"\0\1\3" * 40}),
    "binary-outside": lambda: git_diff({"docs/k.png": b"\0\1\2"}, {"docs/k.png": b"\0\1\3"}),
    "crlf-files": lambda: git_diff({PY: CRLF}, {PY: CRLF.replace(b"return 1", b"return 10")}),
    "crlf-file-no-newline": lambda: git_diff({PY: CRLF.rstrip(b"\n")}, {PY: CRLF.replace(b"x = 1", b"x = 2")
                                                                       .rstrip(b"\n")}),
    "crlf-converted": lambda: git_diff({PY: TEXT}, {PY: CHANGED}).replace(b"\n", b"\r\n"),
    "blank-context-stripped": lambda: _blank_context_stripped(git_diff({PY: TEXT}, {PY: CHANGED})),
    "blank-context-stripped-at-end": lambda: _blank_context_stripped(
        git_diff({PY: TEXT + b"\n\n"}, {PY: TEXT.replace(b"x = 1", b"x = 2") + b"\n\n"})),
    "blank-context-stripped-two-files": lambda: _blank_context_stripped(
        git_diff({PY: TEXT, "sglang/srt/n.py": TEXT}, {PY: CHANGED, "sglang/srt/n.py": CHANGED})),
    "mode-only": lambda: _git_diff({PY: TEXT}, {}, modes={PY: "+x"}),
    "mode-and-edit": lambda: _git_diff({PY: TEXT}, {PY: CHANGED}, modes={PY: "+x"}),
    "outside-and-inside": lambda: git_diff({PY: TEXT, "test/t.py": b"a\n", "docs/d.md": b"a\n"},
                                           {PY: CHANGED, "test/t.py": b"b\n", "docs/d.md": b"b\n"}, prefix="python/"),
    "outside-only": lambda: git_diff({"test/t.py": b"a\n"}, {"test/t.py": b"b\n"}),
    "quoted-paths": lambda: git_diff({"sglang/srt/a b.py": TEXT, "sglang/srt/é.py": TEXT},
                                     {"sglang/srt/a b.py": CHANGED, "sglang/srt/é.py": CHANGED}),
    "bom": lambda: b"\xef\xbb\xbf" + git_diff({PY: TEXT}, {PY: CHANGED}),
    "many-sections": lambda: many_sections(40, "sections", prefix="python/"),
    "diff-ru": lambda: (b"diff -ru sglang.orig/srt/m.py sglang/srt/m.py\n"
                        + git_diff({PY: TEXT}, {PY: CHANGED}).split(b"\n--- ", 1)[1].join([b"--- ", b""])
                        .replace(b"--- a/sglang/", b"--- sglang.orig/").replace(b"+++ b/sglang/", b"+++ sglang/")),
    "diff-u-plain": lambda: b"--- sglang/srt/m.py\n+++ sglang/srt/m.py\n@@ -4,2 +4,2 @@\n def f():\n-    return 1\n"
                            b"+    return 10\n",
    "hunk-without-counts": lambda: b"--- a/sglang/srt/m.py\n+++ b/sglang/srt/m.py\n@@ -5 +5 @@\n-    return 1\n"
                                   b"+    return 10\n",
    "signature-and-stray-text": lambda: _fixed_mail(git_diff({PY: TEXT}, {PY: CHANGED}, header="[fix] A fix\n",
                                                             format_patch=True)) + b"stray text\n",
    "delete-empty": lambda: git_diff({"sglang/srt/e.py": b""}, {"sglang/srt/e.py": None}),
    "mixed-prefixes": lambda: (git_diff({PY: TEXT}, {PY: CHANGED}, prefix="python/")
                               + git_diff({"sglang/srt/n.py": TEXT}, {"sglang/srt/n.py": CHANGED})),
    "mixed-prefixes-reversed": lambda: (git_diff({"sglang/srt/n.py": TEXT}, {"sglang/srt/n.py": CHANGED})
                                        + git_diff({PY: TEXT}, {PY: CHANGED}, prefix="python/")),
    "every-note": lambda: _blank_context_stripped(_git_diff({PY: TEXT, "docs/d.md": b"a\n"},
                                                            {PY: CHANGED, "docs/d.md": b"b\n"}, modes={PY: "+x"})),
    "every-note-crlf": lambda: _blank_context_stripped(_git_diff({PY: TEXT, "docs/d.md": b"a\n"},
                                                                 {PY: CHANGED, "docs/d.md": b"b\n"}, modes={PY: "+x"})
                                                       ).replace(b"\n", b"\r\n"),
    # refused
    "not-a-diff": lambda: b"hello\nworld\n",
    "utf16": lambda: b"\xff\xfe" + "diff --git a/x b/x\n".encode("utf-16-le"),
    "truncated": lambda: git_diff({PY: TEXT}, {PY: CHANGED}).split(b"+    return 10")[0],
    "hunk-ends-early": lambda: git_diff({PY: TEXT}, {PY: CHANGED}).replace(b"\n-    return 1\n", b"\nstray\n-    return 1\n"),
    "hunk-outside-a-file": lambda: (b"--- a/sglang/srt/m.py\n+++ b/sglang/srt/m.py\n@@ -1,1 +1,1 @@\n-a\n+b\n c\n"
                                    b"@@ -5,1 +5,1 @@\n-c\n+d\n"),
    "bad-hunk-header": lambda: git_diff({PY: TEXT}, {PY: CHANGED}).replace(b"@@ -", b"@@ x", 1),
    "two-sections-one-file": lambda: git_diff({PY: TEXT}, {PY: CHANGED}) * 2,
    "conflict-block": lambda: git_diff({PY: TEXT}, {PY: CHANGED.replace(b"    x = 2", b"<<<<<<< release\n    x = 2")}),
    "path-leads-out": lambda: git_diff({PY: TEXT}, {PY: CHANGED}).replace(b"sglang/srt/m.py", b"sglang/../../m.py"),
    "bad-id": lambda: b"Patchkit-Id: Not An Id\n\n" + git_diff({PY: TEXT}, {PY: CHANGED}),
}


def _upstream(first: str, second: str, rels: list[str]) -> bytes:
    from testing.releases import pristine

    def files(version: str) -> dict[str, bytes | None]:
        root = pristine(version)
        return {rel: (root / rel).read_bytes() if (root / rel).is_file() else None for rel in rels}

    return git_diff(files(first), files(second), prefix="python/")


def _created_and_deleted(first: str, second: str, count: int = 3) -> list[str]:
    from testing.releases import pristine

    old, new = ({p.relative_to(root).as_posix() for p in (root / "sglang" / "srt").rglob("*.py")}
                for root in (pristine(first), pristine(second)))
    return sorted(new - old)[:count] + sorted(old - new)[:count]


UPSTREAM_FILES = ("sglang/srt/mem_cache/hiradix_cache.py", "sglang/srt/entrypoints/http_server.py",
                  "sglang/srt/mem_cache/memory_pool.py")
RELEASES = tuple(f"0.5.{minor}" for minor in range(10, 24))


def from_releases() -> Iterator[tuple[str, bytes]]:
    from testing import field_diffs

    for post in field_diffs.NEXT:
        yield f"field-{post}", field_diffs.field_diff(post).text
        yield f"stacked-{post}", field_diffs.stacked_diff(post).text
        yield f"sibling-{post}", field_diffs.sibling_diff(post).text
    for part in field_diffs.disjoint_diffs():
        yield part.name, part.text
    yield "cuh", field_diffs.cuh_diff().text
    yield "moved-code", field_diffs.moved_code_diff().text
    yield "moved-field", field_diffs.moved_field_diff()[0].text
    yield "log-line", field_diffs.log_line_diff()[0].text
    yield "import-section", field_diffs.import_section_diff()[0].text
    for first, second in zip(RELEASES, RELEASES[1:]):
        yield f"upstream-{first}-{second}", _upstream(first, second, [*UPSTREAM_FILES,
                                                                      *_created_and_deleted(first, second)])
    moved = sorted(rel.replace("sglang/kernels/jit/", "sglang/jit_kernel/") for rel in _package_files("0.5.17")
                   if rel.startswith("sglang/kernels/jit/csrc/dsa/"))[:3]
    yield "upstream-folder-move", _upstream("0.5.16", "0.5.17", [*moved, *(rel.replace(
        "sglang/jit_kernel/", "sglang/kernels/jit/") for rel in moved)])


def _package_files(version: str) -> list[str]:
    from testing.releases import pristine

    root = pristine(version)
    return sorted(p.relative_to(root).as_posix() for p in (root / "sglang").rglob("*") if p.is_file())


def record(releases: bool) -> dict[str, dict]:
    found = {f"synthetic/{name}": summary(make()) for name, make in SYNTHETIC.items()}
    if releases:
        found.update({f"releases/{name}": summary(data) for name, data in from_releases()})
    return found


def main(argv: list[str]) -> int:
    old = json.loads(RECORD.read_text()) if RECORD.exists() else {}
    new = record("--releases" in argv)
    RECORD.write_text(json.dumps({**old, **new}, indent=1, sort_keys=True) + "\n")
    sys.stdout.write(f"{len(new)} diffs recorded in {RECORD}\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
