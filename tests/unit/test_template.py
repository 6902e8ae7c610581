"""Snippets (templates with named holes, parsed once) and the edit helpers, on small sources."""

from __future__ import annotations

import textwrap

import libcst as cst
import libcst.matchers as m
import pytest

from patchkit import edits
from patchkit.edits import EditError
from patchkit.errors import AnchorError
from patchkit.template import Snippet, TemplateError, same_shape

GUARD = Snippet("""
    if {name} is None:
        return {value}  # a comment
""")


def parse(source: str) -> cst.Module:
    return cst.parse_module(textwrap.dedent(source))


def test_fill_substitutes_nodes_and_keeps_layout():
    (stmt,) = GUARD.fill(name="slot", value=cst.Integer("0"))
    assert cst.Module(body=[stmt]).code == "if slot is None:\n    return 0  # a comment\n"


def test_constants_are_text_and_braces_are_escaped():
    snippet = Snippet('x = {{"{key}": {value}}}\n', key="k")
    assert snippet.holes == ("value",)
    assert cst.Module(body=snippet.fill(value="1")).code == 'x = {"k": 1}\n'


def test_fill_refuses_missing_and_unknown_holes():
    with pytest.raises(TemplateError):
        GUARD.fill(name="slot")
    with pytest.raises(TemplateError):
        GUARD.fill(name="slot", value="0", other="1")


def test_bad_snippet_is_a_template_error():
    with pytest.raises(TemplateError):
        Snippet("if x\n")


def test_detection_is_the_same_snippet_by_shape():
    tree = parse("""
        def f(slot):
            for i in range(3):
                if (slot) is None:
                    return   0
            return 1
    """)
    found = GUARD.find(tree)
    assert len(found) == 1  # layout, parentheses and comments do not matter; holes match anything
    assert not Snippet("if {name} is not None:\n    return {value}\n").present_in(tree)


def test_string_literals_compare_by_value():
    assert same_shape(cst.parse_expression("'a'"), cst.parse_expression('"a"'))
    assert not same_shape(cst.parse_expression("'a'"), cst.parse_expression('"b"'))


SOURCE = """
    class C:
        def f(self):
            a = 1
            if a:
                a = 1
            return a
"""
ASSIGN = m.SimpleStatementLine(body=[m.Assign()])


def test_replace_every_match_builds_on_updated_nodes():
    # Two matches in one function: both are edited (the silent-splicing bug dropped the second).
    tree = parse(SOURCE)
    new = edits.replace(tree, ASSIGN, lambda stmt: [stmt, *Snippet("b = 2\n").fill()], "a = 1", every=True)
    assert new.code.count("b = 2") == 2


def test_replace_refuses_missing_and_ambiguous_anchors():
    tree = parse(SOURCE)
    with pytest.raises(AnchorError, match="ambiguous"):
        edits.replace(tree, ASSIGN, lambda stmt: stmt, "a = 1")
    with pytest.raises(AnchorError, match="not found"):
        edits.replace(tree, m.SimpleStatementLine(body=[m.Pass()]), lambda stmt: stmt, "pass")


def test_an_edit_that_changes_nothing_raises():
    tree = parse(SOURCE)
    with pytest.raises(EditError, match="changed nothing"):
        edits.replace(tree, m.SimpleStatementLine(body=[m.Return()]), lambda stmt: stmt, "return a")


def test_edit_class_and_method():
    tree = parse(SOURCE)
    new = edits.edit_class(tree, "C", lambda cls: edits.edit_method(
        cls, "f", lambda fn: edits.insert_before(fn, m.SimpleStatementLine(body=[m.Return()]), Snippet("a += 1\n").fill(), "return"),
    ))
    assert "a += 1\n        return a" in new.code
    with pytest.raises(AnchorError, match="class D"):
        edits.edit_class(tree, "D", lambda cls: cls)
