"""The private names patchkit/authoring/libcst_private.py builds on still mean what it takes them to
mean (issues 22.5, 34): the decorator attributes `@m.leave` / `@m.visit` / `@m.call_if_inside` /
`@m.call_if_not_inside` write, `_check_types`, the parent transformer's `_extra_visit_funcs`,
`_extra_leave_funcs` and `_matchers` (the expression pass, where libcst's own `on_visit` gates the
edits), and `dataclasses.inspect` during the first import of libcst.matchers. On a tiny synthetic
patch, in both passes: a renamed or re-meant name fails here, loudly, instead of mis-gating the
built-in patches' edits. tests/integration/test_libcst_releases.py runs this module on every libcst
release pyproject.toml allows."""

from __future__ import annotations

import textwrap

import subprocess
import sys

import libcst as cst
import libcst.matchers as m
import pytest

from patchkit.authoring import libcst_private
from patchkit.authoring.edits import edit
from patchkit.authoring.patch import Patch

PATH = "sglang/example.py"
SOURCE = textwrap.dedent("""
    class A:
        def keep(self):
            x = 1
            return x

        def skip(self):
            x = 1

    class B:
        def keep(self):
            x = 1
""")
IN_A = m.ClassDef(name=m.Name("A"))
IN_SKIP = m.FunctionDef(name=m.Name("skip"))
ONE = m.Integer("1")
ANY_DEF = m.FunctionDef()  # matchers compare by identity: the same objects throughout
ASSIGN_X = m.SimpleStatementLine(body=[m.Assign(targets=[m.AssignTarget(m.Name("x"))])])


class _Base(Patch):
    ID = "contract"
    TITLE = RATIONALE = "libcst contract"
    APPLIES_TO = ">=0"
    TARGETS = (PATH,)

    def is_fixed_upstream(self, path: str, tree: cst.Module) -> bool:
        return False


class StatementPass(_Base):
    """Statement matchers only: patchkit's own statement walk, reading the gates it gathered."""

    def __init__(self) -> None:
        super().__init__()
        self.visited: list[str] = []

    @m.visit(ANY_DEF)
    def seen(self, node: cst.FunctionDef) -> None:
        self.visited.append(node.name.value)

    @m.call_if_inside(IN_A)
    @m.call_if_not_inside(IN_SKIP)
    @edit(ASSIGN_X, "x = 1 in A, outside skip()")
    def to_two(self, original_node: cst.SimpleStatementLine, updated_node: cst.SimpleStatementLine) -> cst.SimpleStatementLine:
        return cst.parse_statement("x = 2\n")  # type: ignore[return-value]


class ExpressionPass(_Base):
    """An expression matcher: libcst's own `on_visit`/`on_leave`, reading `_matchers` and
    `_extra_leave_funcs` that Patch.__init__ set up in place of MatcherDecoratableTransformer's."""

    @m.call_if_inside(IN_A)
    @m.call_if_not_inside(IN_SKIP)
    @edit(ONE, "1 in A, outside skip()")
    def to_three(self, original_node: cst.Integer, updated_node: cst.Integer) -> cst.Integer:
        return updated_node.with_changes(value="3")


def test_the_decorator_attributes_hold_the_matchers_the_hooks_gather():
    assert libcst_private.decorations(vars(StatementPass)["to_two"]) == ((), (ASSIGN_X,), (IN_A,), (IN_SKIP,))
    assert libcst_private.decorations(vars(StatementPass)["seen"]) == ((ANY_DEF,), (), (), ())
    assert libcst_private.decorations(vars(_Base)["is_fixed_upstream"]) == ((), (), (), ())
    hooks = StatementPass._HOOKS
    assert hooks.leave == {ASSIGN_X: ("to_two",)} and hooks.visit == {ANY_DEF: ("seen",)}
    assert set(hooks.gates) == {IN_A, IN_SKIP} and hooks.statements_only
    assert not ExpressionPass._HOOKS.statements_only


@pytest.mark.parametrize("cls, expected", [
    (StatementPass, "x = 2"),
    (ExpressionPass, "x = 3"),
])
def test_an_edit_fires_only_where_its_gates_allow(cls: type[Patch], expected: str):
    patch = cls()
    new = patch.transform(PATH, cst.parse_module(SOURCE))
    a_keep, a_skip, b_keep = new.code.split("def ")[1:]
    assert expected in a_keep  # inside A, not inside skip(): edited
    assert "x = 1" in a_skip and expected not in a_skip  # call_if_not_inside held it back
    assert "x = 1" in b_keep and expected not in b_keep  # call_if_inside held it back
    assert sum(patch.fired.values()) == 1
    if isinstance(patch, StatementPass):
        assert patch.visited == ["keep", "skip", "keep"]  # the @m.visit hook ran on every def


def test_the_parent_transformer_reads_the_hooks_patch_sets_up():
    # libcst's own pass (ExpressionPass) must read these attributes by these names and shapes.
    patch = ExpressionPass()
    assert set(patch._matchers) == {IN_A, IN_SKIP} and all(v is None for v in patch._matchers.values())
    assert list(patch._extra_leave_funcs) == [ONE]
    assert patch._extra_leave_funcs[ONE][0].__name__ == "to_three"
    assert patch._extra_visit_funcs == {}


def test_check_types_still_refuses_a_callback_whose_annotation_cannot_match():
    # The check Patch.__init__ runs once per class: an edit annotated for a node its matcher can
    # never give is refused when the patch is first built, as MatcherDecoratableTransformer does.
    class Mismatched(_Base):
        @edit(ASSIGN_X, "x = 1")
        def wrong(self, original_node: cst.ClassDef, updated_node: cst.ClassDef) -> cst.ClassDef:
            return updated_node

    with pytest.raises(Exception, match="wrong"):
        Mismatched()


def test_matchers_are_imported_with_short_docstrings_and_dataclasses_is_left_as_it_was():
    # In a fresh interpreter, as a command imports it: the swap lasts for the import only.
    probe = ("import dataclasses, inspect\n"
             "import patchkit.authoring.libcst_private\n"
             "import libcst as cst, libcst.matchers as m\n"
             "print(dataclasses.inspect is inspect, m.matches(cst.Name('x'), m.Name('x')), m.Name.__doc__)\n")
    proc = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    restored, matches, doc = proc.stdout.strip().split(" ", 2)
    assert restored == "True" and matches == "True"
    if sys.version_info < (3, 13):  # from 3.13 dataclasses writes the docstring lazily: nothing to swap
        assert doc == "Name(...)", doc
