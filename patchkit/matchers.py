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


def statements(scope: cst.CSTNode, matcher: m.BaseMatcherNode) -> list[cst.CSTNode]:
    """Statements matching `matcher` anywhere inside `scope` (one function, typically)."""
    return list(m.findall(scope, matcher))


class _InsertAfter(cst.CSTTransformer):
    def __init__(self, anchor: cst.CSTNode, new: Sequence[cst.BaseStatement]) -> None:
        self.anchor = anchor
        self.new = list(new)
        self.inserted = 0

    def _splice(self, body: Sequence[cst.CSTNode]) -> list[cst.CSTNode] | None:
        for index, stmt in enumerate(body):
            if stmt is self.anchor:
                self.inserted += 1
                return [*body[: index + 1], *self.new, *body[index + 1 :]]
        return None

    def leave_IndentedBlock(self, original: cst.IndentedBlock, updated: cst.IndentedBlock) -> cst.IndentedBlock:
        spliced = self._splice(original.body)
        if spliced is None:
            return updated
        # Rebuild from the original children: the anchor is identified by identity.
        return updated.with_changes(body=spliced)


def insert_after(scope: N, anchor: cst.CSTNode, new: Sequence[cst.BaseStatement]) -> N:
    """`scope` with `new` statements inserted right after the `anchor` statement."""
    inserter = _InsertAfter(anchor, new)
    updated = scope.visit(inserter)
    if inserter.inserted != 1:
        raise AnchorError("internal: insertion point not found exactly once")
    return updated  # type: ignore[return-value]


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


def parse_statements(source: str) -> list[cst.BaseStatement]:
    return list(cst.parse_module(source).body)
