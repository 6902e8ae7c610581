"""Conflict blocks as a person reads and resolves them (docs/diffs.md): where they are in a file, what
the release's marker line names, and the diff's hunk each one carries."""

from __future__ import annotations

import re
from dataclasses import dataclass

_BLOCK = re.compile(rb"^<<<<<<< release(?P<where>[^\n]*)\n(?P<release>.*?)^=======\n(?P<patch>.*?)^>>>>>>> patch[^\n]*\n",
                    re.S | re.M)
_PLACE = re.compile(r"this release has that code at (?P<file>[^\s:]+):(?P<line>\d+) ")


@dataclass(frozen=True)
class Block:
    where: str  # what the release's marker line says after `<<<<<<< release`
    release: bytes  # its release side
    patch: bytes  # its patch side
    start: int  # its first line in the file, 1-based
    lines: int  # its lines, the markers included

    @property
    def place(self) -> tuple[str, int] | None:
        """(FILE, LINE) where the marker line says this release has the code."""
        found = _PLACE.search(self.where)
        return (found.group("file"), int(found.group("line"))) if found else None

    @property
    def added(self) -> list[bytes]:
        return [line[1:] for line in self.patch.splitlines(keepends=True) if line.startswith(b"+")]


def blocks(data: bytes) -> list[Block]:
    return [Block(m.group("where").decode(), m.group("release"), m.group("patch"), data.count(b"\n", 0, m.start()) + 1,
                  m.group(0).count(b"\n")) for m in _BLOCK.finditer(data)]


def conflict_lines(data: bytes) -> int:
    """The lines of conflict a person reads in a file: every block's, markers included."""
    return sum(found.lines for found in blocks(data))


def without(data: bytes, found: Block) -> bytes:
    """The file with that block deleted (its change made elsewhere, or dropped)."""
    lines = data.splitlines(keepends=True)
    return b"".join(lines[:found.start - 1] + lines[found.start - 1 + found.lines:])


def take_patch_side(data: bytes, found: Block) -> bytes:
    """The file with git's block `found` resolved to the diff's side."""
    lines = data.splitlines(keepends=True)
    return b"".join(lines[:found.start - 1] + found.patch.splitlines(keepends=True) + lines[found.start - 1 + found.lines:])


def insert_after(data: bytes, line: int, anchor: bytes, added: list[bytes]) -> bytes:
    """`added` (the hunk's `+` lines, as the diff indents them) put after the first line at or
    below `line` (1-based) that reads `anchor` whitespace aside, indented as that line is."""
    lines = data.splitlines(keepends=True)
    key = b"".join(anchor.split())
    at = next(i for i in range(line - 1, len(lines)) if b"".join(lines[i].split()) == key)
    indent = lines[at][:len(lines[at]) - len(lines[at].lstrip())]
    base = min(len(x) - len(x.lstrip()) for x in added if x.strip())
    return b"".join(lines[:at + 1] + [indent + x[base:] if x.strip() else x for x in added] + lines[at + 1:])


def _key(line: bytes) -> bytes:
    return b"".join(line.split())


def _indent(line: bytes) -> bytes:
    return line[:len(line) - len(line.lstrip())]


def made_below(data: bytes, found: Block) -> bytes | None:
    """The file with the block deleted and its hunk made on the code it sits on (`blocks` sets a
    block whose code is in the same file right above it; the hunk's first context lines may be just
    above): each hunk's old lines found there in order, whitespace aside, and replaced by its new
    lines, indented as the code there is; None where the code there is not the hunk's."""
    lines = data.splitlines(keepends=True)
    here = found.start - 1
    lines = lines[:here] + lines[here + found.lines:]
    hunks: list[list[bytes]] = []
    for line in found.patch.splitlines(keepends=True):
        if line.startswith(b"@@"):
            hunks.append([])
        elif hunks and line[:1] in (b" ", b"-", b"+"):
            hunks[-1].append(line)
    out: list[bytes] = []
    at = 0
    for number, hunk in enumerate(hunks):
        while hunk and hunk[0][:1] == b" " and not hunk[0].strip():  # blank context: the release may have fewer
            hunk = hunk[1:]
        while hunk and hunk[-1][:1] == b" " and not hunk[-1].strip():
            hunk = hunk[:-1]
        old = [line[1:] for line in hunk if line[:1] in (b" ", b"-")]
        keys = [_key(line) for line in old]
        first = max(here - len(old), at) if number == 0 else at
        last = here + 3 if number == 0 else len(lines) - len(old)
        start = next((i for i in range(first, min(last, len(lines) - len(old)) + 1)
                      if [_key(line) for line in lines[i:i + len(old)]] == keys), None)
        if start is None or not old:
            return None
        anchor = next((n for n, line in enumerate(old) if line.strip()), 0)
        theirs, mine = _indent(lines[start + anchor]), _indent(old[anchor])
        new: list[bytes] = []
        taken = start
        for line in hunk:
            if line[:1] == b" ":
                new.append(lines[taken])
                taken += 1
            elif line[:1] == b"-":
                taken += 1
            else:
                text = line[1:]
                new.append(theirs + text[len(mine):] if text.strip() and text.startswith(mine) else text)
        out += lines[at:start] + new
        at = start + len(old)
    return b"".join(out + lines[at:]) if hunks else None
