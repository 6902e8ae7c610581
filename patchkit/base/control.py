"""Control characters (C0 but tab, DEL, C1) and the Unicode line and paragraph separators (U+2028,
U+2029: line breaks to str.splitlines, a mail reader, an editor): the one set patchkit escapes in
every line it prints for people (a newline would split a one-line message, an ESC drive the
terminal) and refuses in the header fields of a patch file it writes (a newline there starts
another field)."""

from __future__ import annotations

CONTROL = frozenset(chr(c) for c in (*range(0x00, 0x09), *range(0x0a, 0x20), *range(0x7f, 0xa0), 0x2028, 0x2029))
_ESCAPES = {ord(c): ascii(c)[1:-1] for c in CONTROL}  # Python's escapes: \n, \r, \x1b


def escaped(text: str) -> str:
    """`text` with every control character written as its Python escape: one line, inert on a terminal."""
    return text.translate(_ESCAPES)


def first_control(text: str) -> str | None:
    """The first control character in `text`, or None."""
    return next((c for c in text if c in CONTROL), None)
