"""libcst matcher helpers shared by the patches: scoped lookups class -> function -> statement.

Lookups walk only the bodies on the way down (never the whole module), so probing a large
file costs little beside parsing it. A missing or ambiguous anchor is an AnchorError.
"""

from __future__ import annotations

import ast
from typing import Sequence, TypeVar

import libcst as cst
import libcst.matchers as m

from patchkit.errors import AnchorError

N = TypeVar("N", bound=cst.CSTNode)


def string(value: str) -> m.SimpleString:
    """Match a string literal by its value, whatever quotes it is written with."""
    return m.SimpleString(value=m.MatchIfTrue(lambda raw: _literal(raw) == value))


def _literal(raw: str) -> object:
    try:
        return ast.literal_eval(raw)
    except (ValueError, SyntaxError):
        return None


def self_attr(*names: str) -> m.BaseExpression:
    """Match `self.a.b...`."""
    node: m.BaseExpression = m.Name("self")
    for name in names:
        node = m.Attribute(value=node, attr=m.Name(name))
    return node


def _members(body: cst.BaseSuite | Sequence[cst.CSTNode]) -> Sequence[cst.CSTNode]:
    if isinstance(body, cst.IndentedBlock):
        return body.body
    if isinstance(body, cst.SimpleStatementSuite):
        return ()
    return body  # a Module's body list


def exactly_one(found: Sequence[N], what: str, path: str) -> N:
    if not found:
        raise AnchorError(f"{path}: anchor not found: {what}")
    if len(found) > 1:
        raise AnchorError(f"{path}: anchor is ambiguous ({len(found)} matches): {what}")
    return found[0]


def classes(module: cst.Module, name: str) -> list[cst.ClassDef]:
    return [node for node in module.body if m.matches(node, m.ClassDef(name=m.Name(name)))]


def methods(cls: cst.ClassDef, name: str) -> list[cst.FunctionDef]:
    return [node for node in _members(cls.body) if m.matches(node, m.FunctionDef(name=m.Name(name)))]


def functions(cls: cst.ClassDef) -> list[cst.FunctionDef]:
    return [node for node in _members(cls.body) if m.matches(node, m.FunctionDef())]


def find_class(module: cst.Module, name: str, path: str) -> cst.ClassDef:
    return exactly_one(classes(module, name), f"class {name}", path)


def find_method(cls: cst.ClassDef, name: str, path: str) -> cst.FunctionDef:
    return exactly_one(methods(cls, name), f"{cls.name.value}.{name}()", path)


# Where compound statements keep nested statements (if/elif/else, loops, try, with).
_NESTED_SUITES = ("body", "orelse", "handlers", "finalbody")
_BLOCKS = (cst.IndentedBlock, cst.SimpleStatementSuite)


def _children(node: cst.CSTNode):
    """(attr, index, child) for each statement-level child of a compound node."""
    for attr in _NESTED_SUITES:
        child = getattr(node, attr, None)
        if child is None:
            continue
        if isinstance(child, (tuple, list)):  # try: except handlers
            for index, handler in enumerate(child):
                yield attr, index, handler
        elif isinstance(child, _BLOCKS):
            for index, stmt in enumerate(child.body):
                yield attr, index, stmt
        else:  # an else / finally / elif clause
            yield attr, None, child


def statements(scope: cst.CSTNode, matcher: m.BaseMatcherNode) -> list[cst.CSTNode]:
    """Statements matching `matcher` anywhere inside `scope` (a class or function), in order.

    Walks statements only, never into expressions: a fraction of what `m.findall` costs.
    """
    found: list[cst.CSTNode] = []
    pending: list[cst.CSTNode] = [child for _, _, child in _children(scope)][::-1]
    while pending:
        node = pending.pop()
        if m.matches(node, matcher):
            found.append(node)
        if not isinstance(node, cst.SimpleStatementLine):
            pending.extend([child for _, _, child in _children(node)][::-1])
    return found


def _spliced(node: N, anchor: cst.CSTNode, replacement: Sequence[cst.CSTNode]) -> N | None:
    """`node` rebuilt with the `anchor` statement replaced by `replacement`, or None when the
    anchor is not inside it. Only nodes on the path down to the anchor are rebuilt, so every
    other statement keeps its identity (later lookups by identity still work)."""
    for attr, index, child in _children(node):
        holder = getattr(node, attr)
        if child is anchor:
            body = list(holder.body)
            return node.with_changes(**{attr: holder.with_changes(body=[*body[:index], *replacement, *body[index + 1 :]])})
        if isinstance(child, cst.SimpleStatementLine):
            continue
        updated = _spliced(child, anchor, replacement)
        if updated is None:
            continue
        if index is None:
            return node.with_changes(**{attr: updated})
        if isinstance(holder, (tuple, list)):
            return node.with_changes(**{attr: [*holder[:index], updated, *holder[index + 1 :]]})
        body = list(holder.body)
        return node.with_changes(**{attr: holder.with_changes(body=[*body[:index], updated, *body[index + 1 :]])})
    return None


def replace_statement(scope: N, anchor: cst.CSTNode, replacement: Sequence[cst.CSTNode]) -> N:
    """`scope` with the `anchor` statement replaced by `replacement` (empty: removed)."""
    updated = _spliced(scope, anchor, replacement)
    if updated is None:
        raise AnchorError("internal: statement to replace not found inside its scope")
    return updated


def insert_after(scope: N, anchor: cst.CSTNode, new: Sequence[cst.BaseStatement]) -> N:
    """`scope` with `new` statements inserted right after the `anchor` statement."""
    return replace_statement(scope, anchor, [anchor, *new])


def replace_member(parent: N, old: cst.CSTNode, new: cst.CSTNode) -> N:
    """`parent` (a Module or ClassDef) with one direct member replaced, by identity."""
    if isinstance(parent, cst.Module):
        body = [new if node is old else node for node in parent.body]
        return parent.with_changes(body=body)  # type: ignore[return-value]
    block = parent.body  # type: ignore[attr-defined]
    body = [new if node is old else node for node in block.body]
    return parent.with_changes(body=block.with_changes(body=body))  # type: ignore[return-value]


def replace_method(module: cst.Module, cls: cst.ClassDef, old: cst.FunctionDef, new: cst.FunctionDef) -> cst.Module:
    return replace_member(module, cls, replace_member(cls, old, new))


def parse_statements(source: str, blank_lines_before: int = 0) -> list[cst.BaseStatement]:
    """Statements to insert, parsed from source written at column 0.

    Blank lines inside are written without indentation (no trailing whitespace once the
    statements are indented), and `blank_lines_before` separates them from what precedes.
    """
    body = list(cst.parse_module(source).body)
    unindented = [
        stmt.with_changes(leading_lines=[
            line.with_changes(indent=False) if line.comment is None else line for line in stmt.leading_lines
        ])
        for stmt in body
    ]
    if unindented and blank_lines_before:
        first = unindented[0]
        unindented[0] = first.with_changes(leading_lines=[cst.EmptyLine(indent=False)] * blank_lines_before + list(first.leading_lines))
    return unindented
