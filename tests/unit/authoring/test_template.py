"""Snippets (templates with named holes, parsed once), on small sources."""

from __future__ import annotations

import textwrap

import libcst as cst
import pytest

from patchkit.authoring.template import Snippet, TemplateError, same_shape

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


def test_code_is_the_filled_text_at_its_depth():
    snippet = Snippet("""
        if {name}:
            pass

        x = 1
    """, blank_lines_before=1)
    assert snippet.code(indent=4, name="ok") == "\n    if ok:\n        pass\n\n    x = 1\n"
