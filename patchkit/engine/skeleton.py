"""The part of a file the patches read and edit, as a skeleton libcst parses instead of the file.

Parsing and regenerating a 2,000-line module with libcst costs far more than the patches' work
on the two methods they touch. `build` keeps only the top-level statements the patches declare
(and, inside a class, only the declared members), found with `ast`, and puts one placeholder
line in place of each run of statements left out:

    class ModelRunner(ModelRunnerKVCacheMixin):
        __patchkit_elided_0__
        def __init__(self, ...):
            ...
        __patchkit_elided_1__

The transforms run on the parsed skeleton; `restore` puts the bytes of every run back in place
of its placeholder. Runs are cut where libcst itself would cut between two statements (the
comments above a statement are its own, the comments indented into a block that ended belong
to that block), so what libcst regenerates around an edit is what it regenerates when it
parses the whole file; the module's default indent and newline are those of the whole file.
Where a cut would be unclear (tabs, form feeds, a stray line between statements), the
statements stay together.

What to keep is a `Wants`: top-level names mapped to None (the whole statement) or to the
member selectors of a class: a member name (`"__init__"`), or `":text"` for the members whose
source mentions `text`; the name "" maps to `":text"` selectors of whole top-level statements.
"""

from __future__ import annotations

import ast
import functools
import re
from collections.abc import Mapping
from dataclasses import dataclass

Wants = Mapping[str, "frozenset[str] | None"]

_PLACEHOLDER = "__patchkit_elided_{}__"
# A PEP 263 cookie other than utf-8: libcst must see it to decode the file.
_CODING = re.compile(rb"^(?:[^\n]*\n)?[ \t\f]*#[^\n]*?coding[:=][ \t]*(?!utf[-_]?8\b)[-\w.]+", re.IGNORECASE)
_PLACEHOLDER_LINE = re.compile(rb"(?m)^[ ]*__patchkit_elided_(\d+)__\n")


class SkeletonError(Exception):
    """A transform removed or copied a placeholder: the elided code cannot be put back."""


@dataclass(frozen=True)
class Skeleton:
    source: bytes  # what libcst parses
    elided: tuple[bytes, ...]  # the bytes each placeholder stands for, by number
    default_indent: str  # the whole file's, as libcst would detect it (its newline is \n)

    def restore(self, code: bytes) -> bytes:
        if not self.elided:
            return code
        pieces: list[bytes] = []
        seen: list[int] = []
        last = 0
        for match in _PLACEHOLDER_LINE.finditer(code):
            index = int(match.group(1))
            pieces += [code[last:match.start()], self.elided[index]]
            seen.append(index)
            last = match.end()
        if seen != list(range(len(self.elided))):
            raise SkeletonError(f"placeholders {seen} after the transforms, expected 0..{len(self.elided) - 1}")
        pieces.append(code[last:])
        return b"".join(pieces)


def _names(node: ast.stmt) -> set[str]:
    if isinstance(node, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
        return {node.name}
    targets: list[ast.expr] = []
    if isinstance(node, ast.Assign):
        targets = node.targets
    elif isinstance(node, (ast.AnnAssign, ast.AugAssign)):
        targets = [node.target]
    return {t.id for t in targets if isinstance(t, ast.Name)}


def _first_line(node: ast.stmt) -> int:
    decorators: list[ast.expr] = getattr(node, "decorator_list", [])
    return min([node.lineno, *(d.lineno for d in decorators)])


def _blocks(node: ast.stmt) -> list[list[ast.stmt]]:
    """The statement lists nested directly in `node` (if/else, try/except/finally, ...)."""
    found: list[list[ast.stmt]] = []
    for attr in ("body", "orelse", "finalbody"):
        value = getattr(node, attr, None)
        if isinstance(value, list) and value and isinstance(value[0], ast.stmt):
            found.append(value)
    for handler in getattr(node, "handlers", ()):
        found.append(handler.body)
    for case in getattr(node, "cases", ()):
        found.append(case.body)
    return found


def _inner_indent(node: ast.stmt) -> int | None:
    """The column of the block `node` ends with (whose footer claims deeper comments after it),
    None for a simple statement."""
    blocks = _blocks(node)
    if not blocks:
        return None
    last = max(blocks, key=lambda block: (block[-1].end_lineno or 0, block[-1].end_col_offset or 0))
    return last[-1].col_offset


class _Lines:
    def __init__(self, data: bytes) -> None:
        self.lines = data.splitlines(keepends=True)
        self.offsets = [0]
        for line in self.lines:
            self.offsets.append(self.offsets[-1] + len(line))

    def text(self, first: int, end: int) -> bytes:
        """Lines first..end-1 (1-based, end exclusive)."""
        return b"".join(self.lines[first - 1:end - 1])

    def kind(self, number: int) -> tuple[str, int]:
        """('blank' | 'comment' | 'other', indent) of a line between statements."""
        line = self.lines[number - 1].rstrip(b"\r\n")
        if number > 1 and self.lines[number - 2].rstrip(b"\r\n").endswith(b"\\"):
            return "other", 0  # continues the line above: it is not between statements
        stripped = line.lstrip(b" ")
        if b"\t" in line[:len(line) - len(stripped)] or b"\f" in line:
            return "other", 0
        if not stripped.strip():
            return "blank", 0
        return ("comment" if stripped.startswith(b"#") else "other"), len(line) - len(stripped)


@dataclass
class _Unit:
    nodes: list[ast.stmt]
    first: int  # first line it owns (its leading comments and blank lines included)
    end: int  # first line after it (after the comments its blocks claim)


def _units(lines: _Lines, body: list[ast.stmt], start: int, stop: int) -> tuple[list[_Unit], int] | None:
    """`body`'s statements grouped as libcst would own lines[start:stop): each unit with its
    leading lines and the footers its blocks claim; and where the enclosing block's own footer
    begins. None when a line between statements is not a blank line or a comment."""
    units: list[_Unit] = []
    for node in body:
        first = _first_line(node)
        if units and first <= units[-1].end - 1:  # shares a line with the one before
            units[-1].nodes.append(node)
            units[-1].end = max(units[-1].end, (node.end_lineno or node.lineno) + 1)
            continue
        units.append(_Unit([node], first, (node.end_lineno or node.lineno) + 1))
    if not units:
        return None
    units[0].first = start
    bounds = [u.first for u in units[1:]] + [stop]
    for unit, limit in zip(units, bounds):
        inner = max((i for i in (_inner_indent(n) for n in unit.nodes[-1:]) if i is not None), default=None)
        claimed = unit.end
        for number in range(unit.end, limit):
            kind, indent = lines.kind(number)
            if kind == "other":
                return None
            if kind == "comment" and inner is not None and indent >= inner:
                claimed = number + 1
        unit.end = claimed
    for unit, nxt in zip(units, units[1:]):
        nxt.first = unit.end
    return units, units[-1].end


def _class_header_end(lines: _Lines, node: ast.ClassDef) -> int | None:
    """The first line after `class X(...):` (its body's leading comments start there)."""
    first = _first_line(node.body[0])
    if first <= node.lineno:
        return None  # a one-line body
    number = first
    while number - 1 > node.lineno and lines.kind(number - 1)[0] in ("blank", "comment"):
        number -= 1
    return number


def _selected(lines: _Lines, unit: _Unit, selectors: frozenset[str]) -> bool:
    names = set().union(*(_names(n) for n in unit.nodes))
    if names & selectors:
        return True
    text = lines.text(unit.first, unit.end)
    if any(s.startswith(":") and s[1:].encode() in text for s in selectors):
        return True
    # A member that defines a selected name deeper (a nested class's method, a def under
    # `if`/`try`) is kept: the patch's matchers, run on the whole class, would see it too.
    return _defines(text, _member_names(selectors))


@functools.lru_cache(maxsize=64)
def _member_names(selectors: frozenset[str]) -> tuple[bytes, ...]:
    return tuple(s.encode() for s in sorted(selectors) if not s.startswith(":"))


def _defines(text: bytes, names: tuple[bytes, ...]) -> bool:
    """Whether `text` holds `def NAME` or `class NAME` for one of `names` (bytes.find: a regex
    over every member's text cost more than a third of building the skeleton)."""
    for name in names:
        at = text.find(name)
        while at >= 0:
            end = at + len(name)
            if (text[at - 1:at] in (b" ", b"\t") and text[max(0, at - 16):at].rstrip(b" \t").endswith((b"def", b"class"))
                    and not (text[end:end + 1].isalnum() or text[end:end + 1] == b"_")):
                return True
            at = text.find(name, end)
    return False


def _detect_indent(lines: _Lines, body: list[ast.stmt]) -> str:
    """The indent of the file's first indented block (libcst's default_indent: its first INDENT
    token, which may follow a one-line block, as in `if x: y` + `else:`, or be a `case` line)."""
    for node in body:
        if isinstance(node, ast.Match):
            line = lines.lines[node.cases[0].pattern.lineno - 1]
            return line[:len(line) - len(line.lstrip(b" \t"))].decode("ascii", "replace")
        for block in sorted(_blocks(node), key=lambda block: block[0].lineno):
            child = block[0]
            line = lines.lines[child.lineno - 1]
            prefix = line[:child.col_offset]
            if not prefix.strip():
                return prefix.decode("ascii", "replace")
    return "    "  # no indented block: libcst's default


def build(data: bytes, module: ast.Module, wants: Wants) -> Skeleton | None:
    """The skeleton of `data` (already parsed with ast as `module`) holding what `wants`
    names; None when the whole file is better parsed as it is."""
    # No final newline: libcst ends the regenerated skeleton with one, and code added after the
    # last placeholder would be glued to the last line the placeholder stands for.
    if b"\r" in data or not module.body or _CODING.match(data) or not data.endswith(b"\n"):
        return None
    lines = _Lines(data)
    top = _units(lines, module.body, 1, len(lines.lines) + 1)
    indent = _detect_indent(lines, module.body)
    if top is None:
        return None
    units, footer = top
    out: list[bytes] = []
    elided: list[bytes] = []
    pending: list[bytes] = []  # an elided run not yet closed

    def close(column: int) -> None:
        if pending:
            out.append(b" " * column + _PLACEHOLDER.format(len(elided)).encode() + b"\n")
            elided.append(b"".join(pending))
            pending.clear()

    mentions = wants.get("") or frozenset()  # top-level statements chosen by their text
    for unit in units:
        names = set().union(*(_names(n) for n in unit.nodes))
        chosen = [name for name in names if name in wants and name]
        if not chosen and not (mentions and _selected(lines, unit, mentions)):
            pending.append(lines.text(unit.first, unit.end))
            continue
        close(0)
        selectors = [wants[name] for name in chosen] or [None]
        node = unit.nodes[0]
        if any(s is None for s in selectors) or len(unit.nodes) > 1 or not isinstance(node, ast.ClassDef):
            out.append(lines.text(unit.first, unit.end))
            continue
        members = _class_members(lines, node, unit, frozenset().union(*selectors))  # type: ignore[arg-type]
        if members is None:
            out.append(lines.text(unit.first, unit.end))
            continue
        for piece, keep, column in members:  # the last part (the class's footer) is kept
            if keep:
                close(column)
                out.append(piece)
            else:
                pending.append(piece)
    close(0)
    out.append(lines.text(footer, len(lines.lines) + 1))
    if not elided:
        return None
    return Skeleton(source=b"".join(out), elided=tuple(elided), default_indent=indent)


def _class_members(lines: _Lines, node: ast.ClassDef, unit: _Unit,
                   selectors: frozenset[str]) -> list[tuple[bytes, bool, int]] | None:
    """The class's text as (piece, kept, column) parts: its header, each member run, its
    footer; None when its members cannot be told apart cleanly."""
    header_end = _class_header_end(lines, node)
    if header_end is None:
        return None
    column = node.body[0].col_offset
    if lines.lines[node.body[0].lineno - 1][:column] != b" " * column:
        return None  # members indented with tabs: a placeholder line indents with spaces
    grouped = _units(lines, node.body, header_end, unit.end)
    if grouped is None:
        return None
    members, footer = grouped
    parts: list[tuple[bytes, bool, int]] = [(lines.text(unit.first, header_end), True, column)]
    parts += [(lines.text(m.first, m.end), _selected(lines, m, selectors), column) for m in members]
    parts.append((lines.text(footer, unit.end), True, column))
    return parts
