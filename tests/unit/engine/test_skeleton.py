"""The skeleton the engine parses instead of a whole file: edits around the kept parts come out
byte-identical to the same edits on the whole file, wherever libcst puts the comments."""

from __future__ import annotations

import ast
import textwrap

import libcst as cst
import pytest

from patchkit.engine import skeleton

SOURCE = textwrap.dedent('''\
    """Module docstring."""
    # a comment at the top
    import os


    def helper():
        return 1
        # indented into helper's body


    # the class's own comment
    @decorator(
        arg=1,
    )
    class Target(
        Base,  # a base
    ):
        # leading comment of the docstring
        """Doc."""

        x = 1
            # deeper after a simple statement
        def first(self):
            a = 1
              # odd indent between first's body and the members
          # odd indent between the members and the class
            return a

        # comment between members

        @property
        def second(self):
            if a:
                b = 2
                    # deeper inside the if
            # back at second's body
        # member level, then deeper:
                # deeper again
        def third(self):
            pass  # trailing
          # odd indent after third, below its body
        y = [
            1,
        ]; z = 2
        def last(self):
            return 3
            # last's footer
        # class footer


    class Other:
        def first(self):
            pass


    x = 1
    # module footer
''')

NEW = cst.parse_statement("def added(self):\n    return 0\n")
TOP = cst.parse_statement("def top_added():\n    return 0\n")


def _members(cls: cst.ClassDef) -> list[cst.BaseStatement]:
    return list(cls.body.body)  # type: ignore[arg-type]


def _edits(keep: str):
    """Edits that insert next to the kept member `keep` of Target, at its class's end, and
    right above the class."""
    def before(tree: cst.Module) -> cst.Module:
        return _edit_target(tree, lambda body: [n for s in body for n in ([NEW, s] if _is(s, keep) else [s])])

    def after(tree: cst.Module) -> cst.Module:
        return _edit_target(tree, lambda body: [n for s in body for n in ([s, NEW] if _is(s, keep) else [s])])

    def append(tree: cst.Module) -> cst.Module:
        return _edit_target(tree, lambda body: [*body, NEW])

    def above_class(tree: cst.Module) -> cst.Module:
        body = [n for s in tree.body for n in ([TOP, s] if _is(s, "Target") else [s])]
        return tree.with_changes(body=body)

    def rename(tree: cst.Module) -> cst.Module:
        return _edit_target(tree, lambda body: [s.with_changes(name=cst.Name("renamed")) if _is(s, keep) else s for s in body])

    return [before, after, append, above_class, rename]


def _is(node: cst.CSTNode, name: str) -> bool:
    return isinstance(node, (cst.FunctionDef, cst.ClassDef)) and node.name.value == name


def _edit_target(tree: cst.Module, edit) -> cst.Module:
    body = []
    for stmt in tree.body:
        if _is(stmt, "Target"):
            stmt = stmt.with_changes(body=stmt.body.with_changes(body=edit(list(stmt.body.body))))
        body.append(stmt)
    return tree.with_changes(body=body)


def _via_skeleton(data: bytes, wants, edit) -> bytes:
    part = skeleton.build(data, ast.parse(data), wants)
    assert part is not None
    tree = cst.parse_module(part.source)
    tree = tree.with_changes(default_indent=part.default_indent)
    return part.restore(edit(tree).code.encode())


@pytest.mark.parametrize("keep", ["first", "second", "third", "last"])
def test_edits_on_the_skeleton_match_edits_on_the_whole_file(keep):
    data = SOURCE.encode()
    for edit in _edits(keep):
        whole = edit(cst.parse_module(data)).code.encode()
        assert _via_skeleton(data, {"Target": frozenset({keep})}, edit) == whole, (keep, edit.__name__)


def test_unchanged_skeleton_restores_the_file_and_leaves_out_the_rest():
    data = SOURCE.encode()
    part = skeleton.build(data, ast.parse(data), {"Target": frozenset({"second"})})
    assert part is not None
    assert part.restore(cst.parse_module(part.source).code.encode()) == data
    assert b"def first" not in part.source and b"class Other" not in part.source and b"def second" in part.source
    assert b"# class footer" in part.source  # the class's footer stays where libcst puts it


def test_members_by_text_and_top_level_names():
    data = SOURCE.encode()
    part = skeleton.build(data, ast.parse(data), {"Target": frozenset({":return 3"}), "helper": None})
    assert part is not None
    assert b"def last" in part.source and b"def helper" in part.source and b"def first" not in part.source


def test_default_indent_is_the_whole_files():
    data = b"if x:\n  y = 1\n\n\nclass A:\n    def f(self):\n        pass\n    def g(self):\n        pass\n"
    part = skeleton.build(data, ast.parse(data), {"A": frozenset({"g"})})
    assert part is not None and part.default_indent == "  "
    whole = cst.parse_module(data)
    assert whole.default_indent == "  "


@pytest.mark.parametrize("data", [
    b"class A:\r\n    def f(self):\r\n        pass\r\n",  # CRLF
    b"# coding: latin-1\nclass A:\n    def f(self):\n        pass\n",  # a cookie libcst must see
])
def test_unusual_files_are_parsed_whole(data):
    assert skeleton.build(data, ast.parse(data), {"A": frozenset({"g"})}) is None


def test_a_transform_that_drops_a_placeholder_is_refused():
    data = SOURCE.encode()
    part = skeleton.build(data, ast.parse(data), {"Target": frozenset({"second"})})
    assert part is not None
    with pytest.raises(skeleton.SkeletonError):
        part.restore(part.source.replace(b"__patchkit_elided_1__", b"pass"))


def test_every_patch_that_declares_parts_keeps_its_scope_classes_in_them():
    from patchkit.engine import registry
    from patchkit.engine.view import _part

    for patch in registry.load_all():
        assert set(patch.PARTS) <= set(patch.TARGETS), patch.ID
        for rel, parts in patch.PARTS.items():
            named = {_part(part)[0] for part in parts}
            assert set(patch.SCOPE.get(rel, ())) <= named, (patch.ID, rel)
