"""libcst matcher helpers shared by the patches (and `track`): match by shape, not spelling.

Edits live in `patchkit.authoring.edits`, snippets (and the "applied" detector derived from them) in
`patchkit.authoring.template`.
"""

from __future__ import annotations

import ast

import libcst as cst
import libcst.matchers as m

from patchkit.base.errors import AnchorError


def string(value: str) -> m.SimpleString:
    """Match a string literal by its value, whatever quotes it is written with."""
    return m.SimpleString(value=m.MatchIfTrue(lambda raw: _literal(raw) == value))


def _literal(raw: str) -> object:
    try:
        return ast.literal_eval(raw)
    except (ValueError, SyntaxError):
        return None


def self_attr(first: str, *names: str) -> m.Attribute:
    """Match `self.a.b...`."""
    node = m.Attribute(value=m.Name("self"), attr=m.Name(first))
    for name in names:
        node = m.Attribute(value=node, attr=m.Name(name))
    return node


def capture(node: cst.CSTNode, matcher: m.BaseMatcherNode, key: str) -> cst.CSTNode:
    """The node `matcher` saved under `key` (`m.SaveMatchedNode`) when matching `node`."""
    captured = m.extract(node, matcher)
    value = None if captured is None else captured.get(key)
    if not isinstance(value, cst.CSTNode):
        raise AnchorError(f"internal: {key} not captured")
    return value


def methods(cls: cst.ClassDef, name: str) -> list[cst.FunctionDef]:
    """The methods of that name defined directly in a class body."""
    return [fn for fn in functions(cls) if fn.name.value == name]


def classes(module: cst.Module, name: str) -> list[cst.ClassDef]:
    """The top-level classes of that name."""
    return [node for node in module.body if isinstance(node, cst.ClassDef) and node.name.value == name]


def functions(cls: cst.ClassDef) -> list[cst.FunctionDef]:
    """The methods defined directly in a class body."""
    body = cls.body
    return [node for node in body.body if isinstance(node, cst.FunctionDef)] if isinstance(body, cst.IndentedBlock) else []
