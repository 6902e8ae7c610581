"""A patch's edits: transformer callbacks in the manner of libcst's `@m.leave`, each declaring
how many times it must fire, so that an edit which did not change what it was asked to change
is an error naming the edit, never a silent partial patch.

    class MtpLayerDetection(Patch):
        @m.call_if_inside(m.ClassDef(name=m.Name("ModelConfig")))
        @edit(READS_NEXTN, "self.num_nextn_predict_layers = getattr(...)")
        def add_fallback(self, original_node: cst.SimpleStatementLine, updated_node: cst.SimpleStatementLine
                         ) -> cst.FlattenSentinel[cst.BaseStatement]:
            return cst.FlattenSentinel([updated_node, *FALLBACK.fill()])

`edit(matcher, ...)` is `m.leave(matcher)` plus a count: the callback gets the original and the
updated node (build on `updated_node`), returns the new node (or a `FlattenSentinel`, or
`RemovalSentinel.REMOVE`), or `updated_node` itself to decline (then it did not fire). Gate it
with libcst's own `@m.call_if_inside` / `@m.call_if_not_inside`. The patch base class runs every
edit of a patch in one transformer pass over a file, then checks each edit's count.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable
from typing import Any, Literal, Protocol, TypeVar, cast

import libcst as cst
import libcst.matchers as m

from patchkit.base.errors import AnchorError


class _Pass(Protocol):
    """What an edit's callback reads of the patch running it (a `patchkit.authoring.patch.Patch`, which
    imports this module: named here by what it offers, not imported back)."""

    path: str  # the file of the current pass
    fired: dict[str, int]  # how often each edit fired there


F = TypeVar("F", bound=Callable[..., Any])
N = TypeVar("N", bound=cst.CSTNode)
# How often an edit must fire in a file it applies to: exactly once, at least once, or any number
# of times (a part of the patch that only some releases need).
Times = Literal["once", "at least once", "any"]
_SPEC = "_patchkit_edit"


class EditError(AnchorError):
    """An edit that found its anchor but changed nothing, or a patch that did not leave its own
    marks behind: the patch would silently do less than it says."""


@dataclasses.dataclass(frozen=True)
class Edit:
    """What one decorated callback promises: where (`what`, for messages), how often, in which files."""

    name: str
    what: str
    times: Times
    files: tuple[str, ...]

    def applies_to(self, path: str) -> bool:
        return not self.files or path in self.files

    def verify(self, fired: int) -> None:
        """Raise when the edit fired a wrong number of times."""
        if fired == 0 and self.times != "any":
            raise AnchorError(f"edit {self.name}: anchor not found: {self.what}")
        if fired > 1 and self.times == "once":
            raise AnchorError(f"edit {self.name}: anchor is ambiguous ({fired} matches): {self.what}")


def edit(matcher: m.BaseMatcherNode, what: str, *, times: Times = "once", files: tuple[str, ...] = ()) -> Callable[[F], F]:
    """Declare a method of a `Patch` as an edit: `m.leave(matcher)`, counted (see the module
    docstring). `what` names the anchor in errors; `files` limits the edit (and its count) to
    those target files (default: every file of the patch)."""

    def decorate(fn: F) -> F:
        spec = Edit(fn.__name__, what, times, files)

        @functools.wraps(fn)
        def callback(self: _Pass, original_node: cst.CSTNode, updated_node: cst.CSTNode) -> Any:
            if not spec.applies_to(self.path):
                return updated_node
            result = fn(self, original_node, updated_node)
            if result is updated_node:
                return result  # declined
            if isinstance(result, cst.CSTNode) and result.deep_equals(updated_node):
                raise EditError(f"edit {spec.name}: the edit at {what} changed nothing")
            self.fired[spec.name] = self.fired.get(spec.name, 0) + 1
            return result

        # libcst checks the parameter annotations against the matcher; it cannot check a return
        # annotation of `FlattenSentinel[...]` (a generic alias), so that one is left to mypy.
        callback.__annotations__ = {key: value for key, value in fn.__annotations__.items() if key != "return"}
        setattr(callback, _SPEC, spec)
        return cast(F, m.leave(matcher)(callback))

    return decorate


def declared(cls: type) -> tuple[Edit, ...]:
    """The edits a patch class declares (its own and inherited), in name order."""
    found = {
        spec.name: spec for klass in reversed(cls.__mro__) for value in vars(klass).values()
        if isinstance(spec := getattr(value, _SPEC, None), Edit)
    }
    return tuple(found[name] for name in sorted(found))


def prepend_to_block(node: N, new: list[cst.BaseStatement]) -> N:
    """A compound statement (if/for/def/class) with `new` first in its body; after the docstring
    of a def or class (before it, the docstring would be a dead string)."""
    body = getattr(node, "body", None)
    if not isinstance(body, cst.IndentedBlock):
        raise AnchorError(f"{type(node).__name__} has no indented block")
    keep = 1 if isinstance(node, (cst.FunctionDef, cst.ClassDef)) and body.body and _is_docstring(body.body[0]) else 0
    return node.with_changes(body=body.with_changes(body=[*body.body[:keep], *new, *body.body[keep:]]))


def _is_docstring(statement: cst.BaseStatement) -> bool:
    """A first statement Python keeps as the docstring: one plain string (no f-, no b-prefix)."""
    if not (isinstance(statement, cst.SimpleStatementLine) and len(statement.body) == 1
            and isinstance(statement.body[0], cst.Expr)):
        return False
    return _plain_string(statement.body[0].value)


def _plain_string(value: cst.BaseExpression) -> bool:
    if isinstance(value, cst.ConcatenatedString):
        return _plain_string(value.left) and _plain_string(value.right)
    return isinstance(value, cst.SimpleString) and not set(value.prefix.lower()) & {"b", "f"}


def append_to_block(node: N, new: list[cst.BaseStatement]) -> N:
    """A class or function with `new` statements at the end of its body."""
    body = getattr(node, "body", None)
    if not isinstance(body, cst.IndentedBlock):
        raise AnchorError(f"{type(node).__name__} has no indented block")
    return node.with_changes(body=body.with_changes(body=[*body.body, *new]))
