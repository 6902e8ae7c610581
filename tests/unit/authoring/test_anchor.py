"""A patch names each class it works in once, in ANCHORS (issue 22.4): SCOPE, PARTS, MARKS,
ANCHOR_SYMBOLS and WATCH are derived from it, merged with the module-level entries it declares."""

from __future__ import annotations

import ast
from pathlib import Path

import libcst as cst
import libcst.matchers as m
import pytest

from patchkit.engine import registry
from patchkit.authoring.anchor import Anchor
from patchkit.authoring.edits import edit
from patchkit.authoring.patch import Patch
from patchkit.authoring.template import Snippet

FILE, OTHER = "sglang/a.py", "sglang/b.py"
HELPER = Snippet("def _helper():\n    return 1\n")
FIX = Snippet("self.fixed = True\n")
RUNNER = Anchor("Runner", parts=("__init__", ":budget"), marks=(FIX,), watch=("__init__",))
WORKER = Anchor("Worker", watch=("step",))


class _Declared(Patch):
    ID = "declared"
    TITLE = RATIONALE = "test"
    APPLIES_TO = ">=0"
    TARGETS = (FILE, OTHER)
    ANCHORS = {FILE: (RUNNER, WORKER), OTHER: (Anchor("Runner", marks=(FIX,), watch=("__init__",)),)}
    PARTS = {FILE: ("_helper",)}
    MARKS = {FILE: ((None, HELPER),)}
    WATCH = ("_helper",)

    def is_fixed_upstream(self, path: str, tree: cst.Module) -> bool:
        return False

    @m.call_if_inside(RUNNER.matcher)
    @edit(m.FunctionDef(name=m.Name("__init__")), f"{RUNNER.member('__init__')}()")
    def fix(self, original_node: cst.FunctionDef, updated_node: cst.FunctionDef) -> cst.FunctionDef:
        return updated_node


def test_the_declarations_the_engine_and_track_read_are_derived_from_anchors():
    assert _Declared.SCOPE == {FILE: ("Runner", "Worker"), OTHER: ("Runner",)}
    # The anchors' parts first (a class without parts: whole), then the module-level ones; a file
    # whose classes are parsed whole and has no module-level parts keeps the engine's default.
    assert _Declared.PARTS == {FILE: ("Runner.__init__", "Runner:budget", "Worker", "_helper")}
    assert _Declared.MARKS == {FILE: ((None, HELPER), ("Runner", FIX)), OTHER: (("Runner", FIX),)}
    assert _Declared.ANCHOR_SYMBOLS == ("Runner", "Worker")
    assert _Declared.WATCH == ("Runner.__init__", "Worker.step", "_helper")  # each once
    assert m.matches(cst.parse_statement("class Runner:\n    pass\n"), RUNNER.matcher)


def test_the_anchor_gates_the_edit_and_finds_the_class():
    tree = cst.parse_module("class Runner:\n    def __init__(self):\n        pass\n\n\nclass Other:\n    pass\n")
    assert [cls.name.value for cls in RUNNER.find(tree)] == ["Runner"]
    assert WORKER.find(tree) == []
    assert _Declared()._HOOKS.gates == (RUNNER.matcher,)  # one gate, however many edits it gates


def test_a_subclass_that_overrides_parts_keeps_what_it_says():
    narrowed = type("Narrowed", (_Declared,), {"PARTS": {FILE: ("Runner",)}})
    assert narrowed.PARTS == {FILE: ("Runner",)} and narrowed.SCOPE == _Declared.SCOPE


def test_scope_beside_anchors_is_refused():
    with pytest.raises(TypeError, match="SCOPE is derived from ANCHORS"):
        type("Both", (Patch,), {"ANCHORS": {FILE: (RUNNER,)}, "SCOPE": {FILE: ("Runner",)}})


def test_the_built_in_patches_name_their_classes_only_in_anchors():
    for cls in registry.load_all():
        if cls.works_on_bytes():
            continue
        tree = ast.parse(Path(registry.source_file(cls.ID)).read_bytes())
        body = next(node for node in tree.body if isinstance(node, ast.ClassDef) and node.name == cls.__name__).body
        declared = {target.id for node in body if isinstance(node, ast.Assign) for target in node.targets
                    if isinstance(target, ast.Name)}
        assert "SCOPE" not in declared, cls.ID
        # Every class a mark or a part names is an anchor of that file.
        for rel, marks in cls.MARKS.items():
            assert {name for name, _ in marks if name} <= set(cls.SCOPE.get(rel, ())), (cls.ID, rel)
