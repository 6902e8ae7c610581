"""A patch's edits as transformer callbacks (`@edit`, libcst's `@m.leave` counted, gated with
`@m.call_if_inside`), run in one pass per file by the Patch base class; on small sources."""

from __future__ import annotations

import textwrap

import libcst as cst
import libcst.matchers as m
import pytest

from patchkit.authoring.edits import EditError, edit, prepend_to_block
from patchkit.base.errors import AnchorError
from patchkit.authoring.patch import Patch, SkipPatch
from patchkit.authoring.template import Snippet

PATH = "sglang/example.py"
OTHER = "sglang/other.py"
SOURCE = """
    class C:
        def f(self):
            a = 1
            if a:
                a = 1
            return a

    def g():
        a = 1
"""
ASSIGN = m.SimpleStatementLine(body=[m.Assign()])
MARK = Snippet("b = 2\n")


def parse(source: str) -> cst.Module:
    return cst.parse_module(textwrap.dedent(source))


class _Base(Patch):
    ID = "example"
    TITLE = RATIONALE = "example"
    APPLIES_TO = ">=0"
    TARGETS = (PATH, OTHER)
    SCOPE = {PATH: ("C",)}

    def is_fixed_upstream(self, path: str, tree: cst.Module) -> bool:
        return False


class EveryAssignInC(_Base):
    MARKS = {PATH: (("C", MARK),)}

    @m.call_if_inside(m.ClassDef(name=m.Name("C")))
    @edit(ASSIGN, "a = 1", times="at least once")
    def add_b(self, original_node: cst.SimpleStatementLine, updated_node: cst.SimpleStatementLine
              ) -> cst.FlattenSentinel[cst.BaseStatement]:
        return cst.FlattenSentinel([updated_node, *MARK.fill()])


def test_every_match_is_edited_in_one_pass_on_updated_nodes():
    # Two matches in one method, the second nested in the first's sibling: both edited (the
    # silent-splicing bug of node-identity edits dropped the second); g() is outside the class.
    patch = EveryAssignInC()
    new = patch.transform(PATH, parse(SOURCE))
    assert new.code.count("b = 2") == 2 and patch.fired == {"add_b": 2}
    assert "def g():\n    a = 1\n" in new.code
    assert patch.transform(PATH, new) is new  # applied: the base class returns the tree as it is


def test_the_base_class_skips_a_file_without_the_scope_class():
    with pytest.raises(SkipPatch, match="has no C"):
        EveryAssignInC().transform(PATH, parse("x = 1\n"))


class OnceInF(_Base):
    MARKS = {PATH: (("C", MARK),)}

    @m.call_if_inside(m.FunctionDef(name=m.Name("f")))
    @edit(ASSIGN, "a = 1 in f()")
    def add_b(self, original_node: cst.SimpleStatementLine, updated_node: cst.SimpleStatementLine
              ) -> cst.FlattenSentinel[cst.BaseStatement]:
        return cst.FlattenSentinel([updated_node, *MARK.fill()])


def test_an_edit_declared_once_refuses_missing_and_ambiguous_anchors_naming_itself():
    with pytest.raises(AnchorError, match=r"sglang/example.py: edit add_b: anchor is ambiguous \(2 matches\): a = 1 in f\(\)"):
        OnceInF().transform(PATH, parse(SOURCE))
    with pytest.raises(AnchorError, match=r"edit add_b: anchor not found: a = 1 in f\(\)"):
        OnceInF().transform(PATH, parse("class C:\n    def f(self):\n        return 1\n"))


class Declines(_Base):
    @m.call_if_inside(m.ClassDef(name=m.Name("C")))
    @edit(m.SimpleStatementLine(body=[m.Return()]), "return a")
    def keep(self, original_node: cst.SimpleStatementLine, updated_node: cst.SimpleStatementLine) -> cst.SimpleStatementLine:
        return updated_node  # declines: does not count as fired


class ChangesNothing(_Base):
    @m.call_if_inside(m.ClassDef(name=m.Name("C")))
    @edit(m.SimpleStatementLine(body=[m.Return()]), "return a")
    def same(self, original_node: cst.SimpleStatementLine, updated_node: cst.SimpleStatementLine) -> cst.SimpleStatementLine:
        return updated_node.deep_clone()


def test_an_edit_that_declines_or_changes_nothing_raises():
    with pytest.raises(AnchorError, match="edit keep: anchor not found: return a"):
        Declines().transform(PATH, parse(SOURCE))
    with pytest.raises(EditError, match="edit same: the edit at return a changed nothing"):
        ChangesNothing().transform(PATH, parse(SOURCE))


class PerFile(_Base):
    @edit(m.ClassDef(name=m.Name("C")), "class C", files=(PATH,))
    def in_example(self, original_node: cst.ClassDef, updated_node: cst.ClassDef) -> cst.ClassDef:
        return updated_node.with_changes(name=cst.Name("D"))

    @edit(m.FunctionDef(name=m.Name("g")), "def g()", files=(OTHER,))
    def in_other(self, original_node: cst.FunctionDef, updated_node: cst.FunctionDef) -> cst.FunctionDef:
        return updated_node.with_changes(name=cst.Name("h"))


def test_an_edit_fires_and_is_counted_only_in_its_files():
    assert PerFile().transform(PATH, parse(SOURCE)).code.count("class D:\n") == 1  # g() left alone there
    other = PerFile().transform(OTHER, parse(SOURCE)).code
    assert "def h():" in other and "class C:" in other
    with pytest.raises(AnchorError, match="edit in_other: anchor not found: def g()"):
        PerFile().transform(OTHER, parse("class C:\n    pass\n"))


class RenamesA(_Base):
    @m.call_if_inside(m.ClassDef(name=m.Name("C")))
    @edit(m.Name("a"), "the name a", times="at least once")
    def rename(self, original_node: cst.Name, updated_node: cst.Name) -> cst.Name:
        return updated_node.with_changes(value="x")


def test_statement_matchers_skip_expressions_and_expression_matchers_see_them():
    assert EveryAssignInC()._statements_only and not RenamesA()._statements_only
    new = RenamesA().transform(PATH, parse(SOURCE)).code
    assert "x = 1\n        if x:\n            x = 1\n        return x" in new and "def g():\n    a = 1" in new


def test_a_patch_reused_for_another_file_starts_outside_every_gate():
    # An error in the middle of a pass (inside class C) leaves no call_if_inside state behind:
    # the next file's `return` outside C does not count as inside it.
    patch = ChangesNothing()
    with pytest.raises(EditError):
        patch.transform(PATH, parse(SOURCE))
    with pytest.raises(AnchorError, match="edit same: anchor not found"):
        patch.transform(PATH, parse("class C:\n    x = 1\n\ndef k():\n    return 1\n"))


def test_edits_are_collected_from_the_class():
    assert [(e.name, e.times, e.files) for e in PerFile.EDITS] == [("in_example", "once", (PATH,)), ("in_other", "once", (OTHER,))]


class OutsideF(_Base):
    @m.call_if_not_inside(m.FunctionDef(name=m.Name("f")))
    @edit(ASSIGN, "a = 1 outside f()")
    def add_b(self, original_node: cst.SimpleStatementLine, updated_node: cst.SimpleStatementLine
              ) -> cst.FlattenSentinel[cst.BaseStatement]:
        return cst.FlattenSentinel([updated_node, *MARK.fill()])


def test_call_if_not_inside_keeps_an_edit_out():
    assert OutsideF().transform(OTHER, parse(SOURCE)).code.endswith("def g():\n    a = 1\n    b = 2\n")


class WrongAnnotation(_Base):
    @edit(m.ClassDef(name=m.Name("C")), "class C")
    def rename(self, original_node: cst.FunctionDef, updated_node: cst.FunctionDef) -> cst.FunctionDef:
        return updated_node


def test_libcst_checks_the_annotations_against_the_matcher():
    with pytest.raises(m.MatchDecoratorMismatch, match="ClassDef"):
        WrongAnnotation()


def test_prepend_to_block_keeps_a_docstring_first():
    # Before the docstring the inserted code would turn it into a dead string (issue 34).
    new = [cst.parse_statement("x = 1\n")]

    def prepended(source: str) -> str:
        module = cst.parse_module(source)
        return module.with_changes(body=[prepend_to_block(module.body[0], new)]).code

    assert prepended('def f():\n    """Doc."""\n    return 1\n') == 'def f():\n    """Doc."""\n    x = 1\n    return 1\n'
    assert prepended("class C:\n    'Doc.'\n    y = 2\n") == "class C:\n    'Doc.'\n    x = 1\n    y = 2\n"
    assert prepended('def f():\n    """Only a docstring."""\n') == 'def f():\n    """Only a docstring."""\n    x = 1\n'
    assert prepended('def f():\n    "a" "b" r"c"\n') == 'def f():\n    "a" "b" r"c"\n    x = 1\n'
    # Not a docstring: no string first, an f-string or bytes (Python keeps no docstring of them),
    # the first statement of an `if` block.
    assert prepended("def f():\n    return 1\n") == "def f():\n    x = 1\n    return 1\n"
    assert prepended('def f():\n    f"{y}"\n') == 'def f():\n    x = 1\n    f"{y}"\n'
    assert prepended('def f():\n    b"raw"\n') == 'def f():\n    x = 1\n    b"raw"\n'
    assert prepended('if y:\n    "text"\n') == 'if y:\n    x = 1\n    "text"\n'
