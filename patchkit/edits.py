"""Edit helpers for patches: each finds its anchor by shape, rebuilds the tree on the updated
nodes (a transformer pass over the scope, never identity splicing), and raises when the
anchor is missing or ambiguous, or when the edit changed nothing.

    new_fn = edits.insert_after(fn, READS_NEXTN, FALLBACK.fill(), "self.num_nextn_predict_layers = ...")

`what` names the anchor in the error; the patch base class prefixes the file.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TypeVar, Union

import libcst as cst
import libcst.matchers as m

from patchkit.errors import AnchorError
from patchkit.template import Snippet

N = TypeVar("N", bound=cst.CSTNode)
Anchor = Union[m.BaseMatcherNode, Snippet, Callable[[cst.CSTNode], bool]]
Replacement = Union[cst.CSTNode, Sequence[cst.CSTNode]]


class EditError(AnchorError):
    """An edit that found its anchor but changed nothing, or a patch that did not leave its own
    marks behind: the patch would silently do less than it says."""


def _test(anchor: Anchor) -> Callable[[cst.CSTNode], bool]:
    if isinstance(anchor, Snippet):
        return anchor.matches
    if isinstance(anchor, m.BaseMatcherNode):
        return lambda node: m.matches(node, anchor)
    return anchor


class _StatementEdit(cst.CSTTransformer):
    """Replace every statement (at any block depth) that passes `test`, on updated nodes."""

    def __init__(self, test: Callable[[cst.CSTNode], bool], edit: Callable[[cst.CSTNode], Replacement]) -> None:
        super().__init__()
        self.test = test
        self.edit = edit
        self.root: cst.CSTNode | None = None
        self.count = 0

    def on_visit(self, node: cst.CSTNode) -> bool:
        if self.root is None:
            self.root = node
            return True
        # Statements only: expressions and small statements hold no nested blocks.
        return not isinstance(node, (cst.BaseExpression, cst.SimpleStatementLine, cst.Decorator, cst.Parameters))

    def on_leave(  # type: ignore[override]
        self, original_node: cst.CSTNode, updated_node: cst.CSTNode
    ) -> cst.CSTNode | cst.RemovalSentinel | cst.FlattenSentinel[cst.CSTNode]:
        if original_node is self.root or not isinstance(updated_node, cst.BaseStatement):
            return updated_node
        if not self.test(updated_node):
            return updated_node
        self.count += 1
        new = self.edit(updated_node)
        if isinstance(new, cst.CSTNode):
            return new
        new = list(new)
        return cst.FlattenSentinel(new) if new else cst.RemovalSentinel.REMOVE


def _unchanged(before: cst.CSTNode, after: cst.CSTNode, what: str) -> None:
    if after.deep_equals(before):
        raise EditError(f"the edit at {what} changed nothing")


def replace(scope: N, anchor: Anchor, edit: Callable[[cst.CSTNode], Replacement], what: str, *, every: bool = False) -> N:
    """`scope` with the statement matching `anchor` replaced by `edit(statement)` (one
    statement, a list, or an empty list to remove it). Exactly one match unless `every`,
    then at least one; every match is edited."""
    transformer = _StatementEdit(_test(anchor), edit)
    new = scope.visit(transformer)
    if transformer.count == 0:
        raise AnchorError(f"anchor not found: {what}")
    if transformer.count > 1 and not every:
        raise AnchorError(f"anchor is ambiguous ({transformer.count} matches): {what}")
    assert isinstance(new, type(scope))
    _unchanged(scope, new, what)
    return new


def insert_after(scope: N, anchor: Anchor, new: Sequence[cst.BaseStatement], what: str) -> N:
    """`scope` with `new` statements right after the one statement matching `anchor`."""
    return replace(scope, anchor, lambda stmt: [stmt, *new], what)


def insert_before(scope: N, anchor: Anchor, new: Sequence[cst.BaseStatement], what: str) -> N:
    return replace(scope, anchor, lambda stmt: [*new, stmt], what)


def prepend_to_block(node: N, new: Sequence[cst.BaseStatement], what: str) -> N:
    """A compound statement (if/for/def/class) with `new` first in its body."""
    body = getattr(node, "body", None)
    if not isinstance(body, cst.IndentedBlock):
        raise AnchorError(f"{what} has no indented block")
    result = node.with_changes(body=body.with_changes(body=[*new, *body.body]))
    _unchanged(node, result, what)
    return result


def append_to_block(node: N, new: Sequence[cst.BaseStatement], what: str) -> N:
    """A class or function with `new` statements at the end of its body."""
    body = getattr(node, "body", None)
    if not isinstance(body, cst.IndentedBlock):
        raise AnchorError(f"{what} has no indented block")
    result = node.with_changes(body=body.with_changes(body=[*body.body, *new]))
    _unchanged(node, result, what)
    return result


def _members(parent: cst.CSTNode) -> Sequence[cst.CSTNode]:
    if isinstance(parent, cst.Module):
        return parent.body
    body = getattr(parent, "body", None)
    return body.body if isinstance(body, cst.IndentedBlock) else ()


def edit_member(parent: N, anchor: Anchor, edit: Callable[[cst.CSTNode], Replacement], what: str, *, every: bool = False) -> N:
    """`parent` (a module or class) with its direct member matching `anchor` replaced by
    `edit(member)`; exactly one unless `every` (then at least one, each edited)."""
    test = _test(anchor)
    members = list(_members(parent))
    hits = [i for i, node in enumerate(members) if test(node)]
    if not hits:
        raise AnchorError(f"anchor not found: {what}")
    if len(hits) > 1 and not every:
        raise AnchorError(f"anchor is ambiguous ({len(hits)} matches): {what}")
    rebuilt: list[cst.CSTNode] = []
    for i, node in enumerate(members):
        if i not in hits:
            rebuilt.append(node)
            continue
        new = edit(node)
        rebuilt.extend([new] if isinstance(new, cst.CSTNode) else new)
    block = parent if isinstance(parent, cst.Module) else getattr(parent, "body")
    new_block = block.with_changes(body=rebuilt)
    result = parent.with_changes(body=new_block.body) if isinstance(parent, cst.Module) else parent.with_changes(body=new_block)
    _unchanged(parent, result, what)
    return result


def edit_class(tree: cst.Module, name: str, edit: Callable[[cst.ClassDef], cst.ClassDef]) -> cst.Module:
    """`tree` with its one top-level `class name` replaced by `edit(cls)`."""
    def call(node: cst.CSTNode) -> cst.CSTNode:
        assert isinstance(node, cst.ClassDef)
        return edit(node)

    return edit_member(tree, m.ClassDef(name=m.Name(name)), call, f"class {name}")


def edit_method(cls: cst.ClassDef, name: str, edit: Callable[[cst.FunctionDef], Replacement]) -> cst.ClassDef:
    """`cls` with its one method `name` replaced by `edit(fn)` (a list adds methods after it)."""
    def call(node: cst.CSTNode) -> Replacement:
        assert isinstance(node, cst.FunctionDef)
        return edit(node)

    return edit_member(cls, m.FunctionDef(name=m.Name(name)), call, f"{cls.name.value}.{name}()")
