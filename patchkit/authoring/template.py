"""Snippets: the code a patch inserts, written once as source with named holes, parsed once.

A `Snippet` is both what a patch inserts (`fill`) and how it recognises that code later
(`find`, `present_in`): "already applied" is structural equality with the same parsed
snippet (layout, comments and quote style ignored; holes match anything), never a second,
hand-written matcher. In the spirit of libcst's `parse_template_statement`, but the source
is parsed once, when the patch module is imported, and filled per use by node substitution.

    GUARD = Snippet('''
        if {name} is None:
            return {value}
    ''')
    GUARD.fill(name=cst.Name("slot"), value="0")   # -> [cst.If(...)]

Holes are `{name}` where a Python name may stand (an expression, an attribute or function
name). Constants known when the patch module is written go in as keyword arguments to
`Snippet(...)` and are substituted as text (also inside string literals); literal braces
are doubled, as with `str.format`.
"""

from __future__ import annotations

import ast
import dataclasses
import string
import textwrap
from collections.abc import Iterator, Sequence

import libcst as cst

from patchkit.base.errors import PatchkitError

_HOLE = "__patchkit_hole_{}__"
_HOLE_PREFIX, _HOLE_SUFFIX = "__patchkit_hole_", "__"

# Fields that hold layout only: whitespace, comments, parentheses, trailing commas.
_LAYOUT_FIELDS = frozenset({
    "lpar", "rpar", "comma", "semicolon", "leading_lines", "lines_after_decorators", "header", "footer",
    "indent", "newline", "trailing_whitespace", "default_indent", "default_newline", "encoding",
    "has_trailing_newline",
})


# Holes are `{name}`; every other brace in a snippet's code (a dict, a set, an f-string) is written doubled.
_DOUBLE = "a literal brace in the snippet's code is written doubled: {{ and }}"


class TemplateError(PatchkitError):
    """A snippet that cannot be parsed or filled: a bug in the patch module."""


def _hole_name(node: cst.CSTNode) -> str | None:
    if isinstance(node, cst.Name) and node.value.startswith(_HOLE_PREFIX) and node.value.endswith(_HOLE_SUFFIX):
        return node.value[len(_HOLE_PREFIX):-len(_HOLE_SUFFIX)]
    return None


class _Fill(cst.CSTTransformer):
    def __init__(self, values: dict[str, cst.BaseExpression]) -> None:
        super().__init__()
        self.values = values
        self.used: set[str] = set()

    def leave_Name(self, original_node: cst.Name, updated_node: cst.Name) -> cst.BaseExpression:
        hole = _hole_name(original_node)
        if hole is None:
            return updated_node
        self.used.add(hole)
        return self.values[hole]


class Snippet:
    """Statements with named holes, parsed once; see the module docstring."""

    def __init__(self, source: str, *, blank_lines_before: int = 0, mark_statement: int = 0, **constants: object) -> None:
        text = textwrap.dedent(source).lstrip("\n")
        self.holes: tuple[str, ...] = ()
        pieces: list[str] = []
        holes: list[str] = []
        for literal, field, spec, conversion in string.Formatter().parse(text):
            pieces.append(literal)
            if field is None:
                continue
            if spec or conversion:
                raise TemplateError(f"snippet hole {{{field}}}: no format spec or conversion allowed ({_DOUBLE})")
            if field in constants:
                pieces.append(str(constants[field]))
            else:
                if not field.isidentifier():
                    raise TemplateError(f"snippet hole {{{field}}} is not a name ({_DOUBLE})")
                holes.append(field)
                pieces.append(_HOLE.format(field))
        self.holes = tuple(dict.fromkeys(holes))
        self.source = "".join(pieces)
        try:
            body = list(cst.parse_module(self.source).body)
        except cst.ParserSyntaxError as exc:
            raise TemplateError(f"snippet does not parse: {exc.message} (line {exc.raw_line})") from None
        if not body:
            raise TemplateError("empty snippet")
        # Blank lines between the statements carry no indentation once they are indented into a
        # block, and `blank_lines_before` separates the snippet from what precedes it.
        unindented = [
            stmt.with_changes(leading_lines=[
                line.with_changes(indent=False) if line.comment is None else line for line in stmt.leading_lines
            ])
            for stmt in body
        ]
        if blank_lines_before:
            first = unindented[0]
            unindented[0] = first.with_changes(
                leading_lines=[cst.EmptyLine(indent=False)] * blank_lines_before + list(first.leading_lines)
            )
        self.statements: tuple[cst.BaseStatement, ...] = tuple(unindented)
        if not 0 <= mark_statement < len(self.statements):
            raise TemplateError(f"snippet has {len(self.statements)} statement(s); mark_statement {mark_statement} is not one of them")
        self.mark_statement = mark_statement

    def __repr__(self) -> str:
        first = self.source.splitlines()[0] if self.source else ""
        return f"Snippet({first!r}...)"

    def fill(self, **values: cst.BaseExpression | str) -> list[cst.BaseStatement]:
        """The statements with every hole filled (a `str` stands for a name, or an expression
        when it is not an identifier)."""
        missing = set(self.holes) - set(values)
        extra = set(values) - set(self.holes)
        if missing or extra:
            raise TemplateError(
                f"{self!r}: holes {sorted(self.holes)}; missing {sorted(missing)}, unknown {sorted(extra)}"
            )
        nodes = {name: _as_expression(value) for name, value in values.items()}
        if not nodes:
            return list(self.statements)
        fill = _Fill(nodes)
        filled = [stmt.visit(fill) for stmt in self.statements]
        return [stmt for stmt in filled if isinstance(stmt, cst.BaseStatement)]

    def code(self, indent: int = 0, **values: cst.BaseExpression | str) -> str:
        """The filled snippet as the text it becomes in a file, its statements `indent` spaces
        deep (blank lines before it included): what a before/after test expects, read from the
        patch instead of written again."""
        text = cst.Module(body=[]).with_changes(body=self.fill(**values)).code
        return textwrap.indent(text, " " * indent)

    @property
    def head(self) -> cst.BaseStatement:
        """The statement that identifies the snippet (the first, or the one `mark_statement` names, when
        the first is as common as `import os`): what `find` looks for."""
        return self.statements[self.mark_statement]

    def matches(self, node: cst.CSTNode) -> bool:
        """Whether `node` is this snippet's identifying statement, by shape."""
        return same_shape(self.head, node)

    def find(self, scope: cst.CSTNode) -> list[cst.CSTNode]:
        """Statements inside `scope` (at any depth of nested blocks) shaped like the snippet's
        identifying statement."""
        return [node for node in walk_statements(scope) if same_shape(self.head, node)]

    def present_in(self, scope: cst.CSTNode) -> bool:
        return bool(self.find(scope))


def _as_expression(value: cst.BaseExpression | str) -> cst.BaseExpression:
    if isinstance(value, str):
        return cst.Name(value) if value.isidentifier() else cst.parse_expression(value)
    return value


def same_shape(pattern: cst.CSTNode, node: cst.CSTNode) -> bool:
    """Structural equality of two parsed trees, ignoring layout (whitespace, comments,
    parentheses, trailing commas) and quote style; a hole of `pattern` matches anything."""
    if _hole_name(pattern) is not None:
        return True
    if type(pattern) is not type(node):
        return False
    if isinstance(pattern, cst.SimpleString) and isinstance(node, cst.SimpleString):
        return _literal(pattern.value) == _literal(node.value)
    for field in dataclasses.fields(pattern):
        if field.name in _LAYOUT_FIELDS or field.name.startswith("whitespace"):
            continue
        if not _same_value(getattr(pattern, field.name), getattr(node, field.name)):
            return False
    return True


def _same_value(a: object, b: object) -> bool:
    if isinstance(a, cst.CSTNode):
        return isinstance(b, cst.CSTNode) and same_shape(a, b)
    if isinstance(a, (list, tuple)):
        return isinstance(b, (list, tuple)) and len(a) == len(b) and all(_same_value(x, y) for x, y in zip(a, b))
    return a == b


def _literal(raw: str) -> object:
    try:
        return ast.literal_eval(raw)
    except (ValueError, SyntaxError):
        return raw


# Where compound statements keep nested statements (if/elif/else, loops, try, with).
_NESTED = ("body", "orelse", "handlers", "finalbody")


def walk_statements(scope: cst.CSTNode) -> Iterator[cst.CSTNode]:
    """Every statement (and except/else/finally clause) nested inside `scope`, in source
    order, without descending into expressions: a fraction of what a full visit costs."""
    pending: list[cst.CSTNode] = list(reversed(_children(scope)))
    while pending:
        node = pending.pop()
        yield node
        if not isinstance(node, cst.SimpleStatementLine):
            pending.extend(reversed(_children(node)))


def _children(node: cst.CSTNode) -> list[cst.CSTNode]:
    if isinstance(node, cst.Module):
        return list(node.body)
    found: list[cst.CSTNode] = []
    for attr in _NESTED:
        child = getattr(node, attr, None)
        if child is None:
            continue
        if isinstance(child, Sequence):  # try: except handlers
            found.extend(child)
        elif isinstance(child, cst.IndentedBlock):
            found.extend(child.body)
        elif isinstance(child, cst.SimpleStatementSuite):
            continue
        elif isinstance(child, cst.CSTNode):  # an else / finally / elif clause
            found.append(child)
    return found
