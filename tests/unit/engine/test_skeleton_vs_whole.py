"""Odd file shapes where parsing a skeleton (patchkit.engine.skeleton) could answer differently from
parsing the whole file: for each, the bytes a patch writes and the probes' verdict must be the
same both ways (the whole-file run is the engine with its skeleton turned off)."""

from __future__ import annotations

import types
from pathlib import Path

import libcst as cst
import libcst.matchers as m
import pytest

from patchkit.engine import decide
from patchkit.engine import view as view_mod
from patchkit.authoring.edits import append_to_block, edit, prepend_to_block
from patchkit.base.errors import PatchkitError
from patchkit.authoring.patch import Patch, top_classes
from patchkit.authoring.template import Snippet

REL = "sglang/mod.py"
FIX = Snippet("""
    x = abs(x)  # patchkit t-guard
""")
UPSTREAM = Snippet("""
    x = upstream_abs(x)
""")
ADDED = Snippet("""
    def added(self):
        if True:
            return 0
""")


class TGuard(Patch):
    """Prepends a statement to A.f (the anchor must be there exactly once)."""

    ID = "t-guard"
    TITLE = RATIONALE = "test"
    APPLIES_TO = ">=0"
    TARGETS = (REL,)
    SCOPE = {REL: ("A",)}
    PARTS = {REL: ("A.f",)}
    MARKS = {REL: (("A", FIX),)}

    def is_fixed_upstream(self, path: str, tree: cst.Module) -> bool:
        # Probes read only what PARTS declares (A.f): the rest of A is not parsed.
        return any(UPSTREAM.present_in(fn) for cls in top_classes(tree, "A") for fn in cls.body.body
                   if m.matches(fn, m.FunctionDef(name=m.Name("f"))))

    @m.call_if_inside(m.ClassDef(name=m.Name("A")))
    @edit(m.FunctionDef(name=m.Name("f")), "A.f()")
    def fix(self, original_node: cst.FunctionDef, updated_node: cst.FunctionDef) -> cst.FunctionDef:
        return prepend_to_block(updated_node, FIX.fill())


class TAdd(Patch):
    """Appends a method to A (reads only A.f)."""

    ID = "t-add"
    TITLE = RATIONALE = "test"
    APPLIES_TO = ">=0"
    TARGETS = (REL,)
    SCOPE = {REL: ("A",)}
    PARTS = {REL: ("A.f", "A.added")}  # its MARK is found in A.added
    MARKS = {REL: (("A", ADDED),)}

    def is_fixed_upstream(self, path: str, tree: cst.Module) -> bool:
        return False

    @edit(m.ClassDef(name=m.Name("A")), "class A")
    def add(self, original_node: cst.ClassDef, updated_node: cst.ClassDef) -> cst.ClassDef:
        return append_to_block(updated_node, ADDED.fill())


PATCHES = (TGuard, TAdd)


def _view(whole: bool) -> view_mod.View:
    target = types.SimpleNamespace(site=Path("/nonexistent"), read=lambda rel: None)
    view = view_mod.View(target=target, state=None, manifest=None)  # type: ignore[arg-type]
    view._patches = {cls.ID: cls() for cls in PATCHES}
    if whole:
        view.skeleton = lambda rel, data: None  # type: ignore[method-assign]
    return view


def run(pid: str, data: bytes, whole: bool) -> tuple[str, bytes | str | None]:
    """(verdict, bytes written or the error) of patch `pid` on `data`."""
    view = _view(whole)
    try:
        verdict = decide.evaluate(view, pid, {REL: data}).state
    except PatchkitError as exc:
        return "error", str(exc)
    if verdict != "pending":
        return verdict, None
    view.pristine = lambda rel: data  # type: ignore[method-assign]
    try:
        return verdict, view_mod.render_file(view, REL, (pid,))
    except PatchkitError as exc:
        return "render-error", str(exc)


def both(pid: str, data: bytes) -> tuple[str, bytes | str | None]:
    skeleton, whole = run(pid, data, whole=False), run(pid, data, whole=True)
    assert skeleton == whole
    return skeleton


def uses_skeleton(data: bytes) -> bool:
    return _view(False).skeleton(REL, data) is not None


CLASS = b"""\
class A:
    def e(self):
        return 1

    def f(self, x):
        return x

    def g(self):
        return 2
"""

SHAPES = {
    "plain": b"import os\n\n\n" + CLASS + b"\n\nz = 1\n",
    "bom, first statement left out": b"\xef\xbb\xbfimport os\n\n\n" + CLASS,
    "bom, first statement kept": b"\xef\xbb\xbf" + CLASS + b"\n\nz = 1\n",
    "tab-indented class": b"import os\n\n\n" + CLASS.replace(b"    ", b"\t") + b"\n\nz = 1\n",
    "no final newline, last member left out": b"import os\n\n\n" + CLASS.rstrip(b"\n"),
    "no final newline, last member kept": b"import os\n\n\n" + CLASS.replace(b"def f", b"def h").replace(b"def g", b"def f").rstrip(b"\n"),
    "future import": b'"""Doc."""\nfrom __future__ import annotations\n\nimport os\n\n\n' + CLASS,
    "decorators and comments between members": b"import os\n\n\nclass A:\n    @property\n    # c1\n    def e(self):\n        return 1\n    # between\n\n    @staticmethod\n    # c2\n    def f(x):\n        return x\n        # deeper\n    # after f\n    def g(self):\n        '''Doc only.'''\n",
    "one-line class body elsewhere": b"class B: pass\n\n\n" + CLASS + b"class C: x = 1\n",
    "docstring-only members": b"import os\n\n\nclass A:\n    def e(self):\n        '''Doc.'''\n\n    def f(self, x):\n        '''Doc.'''\n\n    def g(self):\n        '''Doc.'''\n",
    "fmt off": b"# fmt: off\nimport os\n\n\n" + CLASS + b"# fmt: on\n",
    "backslash continuation": b"import os, \\\n    sys\n\n\n" + CLASS + b"y = 1 + \\\n    2\n",
    "backslash before a blank line, left out": b"import os\n\n\nclass A:\n    def f(self, x):\n        return x\n\n    def g(self):\n        return 2 \\\n\n\nz = 1 + \\\n    2 \\\n\n\ndef top():\n    pass\n",
    "first block is a match statement": b"match os:\n  case 1:\n      pass\n\n\n" + CLASS,
    "2-space block before a 4-space class": b"if os:\n  y = 1\n\n\n" + CLASS,
    "first block is an else": b"if os: y = 1\nelse:\n  y = 2\n\n\n" + CLASS,
    "overloads": b"import os\n\n\nclass A:\n    @overload\n    def f(self, x: int) -> int: ...\n    @overload\n    def f(self, x: str) -> str: ...\n    def e(self):\n        pass\n",
    "if-guarded def": b"import os\n\n\nclass A:\n    def e(self):\n        pass\n    if os:\n        def f(self, x):\n            return x\n    else:\n        def f(self, x):\n            return -x\n",
    "nested class with the same method": b"import os\n\n\nclass A:\n    class Inner:\n        def f(self, x):\n            return x\n\n    def f(self, x):\n        return x\n",
    "f only in a nested class": b"import os\n\n\nclass A:\n    class Inner:\n        def f(self, x):\n            return x\n\n    def e(self):\n        pass\n",
    "method moved to a base class": b"class Base:\n    def f(self, x):\n        return x\n\n\nclass A(Base):\n    def e(self):\n        pass\n",
    "method missing": b"import os\n\n\nclass A:\n    def e(self):\n        pass\n",
    "already fixed upstream": b"import os\n\n\nclass A:\n    def e(self):\n        pass\n\n    def f(self, x):\n        x = upstream_abs(x)\n        return x\n",
    "fixed upstream in another method": b"import os\n\n\nclass A:\n    def e(self, x):\n        x = upstream_abs(x)\n\n    def f(self, x):\n        return x\n",
    "added method already there in an elided member": b"import os\n\n\nclass A:\n    def added(self):\n        if True:\n            return 0\n\n    def f(self, x):\n        return x\n",
    "class defined twice": b"import os\n\n\nclass A:\n    def f(self, x):\n        return x\n\n\nclass A:\n    def f(self, x):\n        return -x\n",
}


@pytest.mark.parametrize("pid", [cls.ID for cls in PATCHES])
@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_skeleton_and_whole_file_agree(shape, pid):
    both(pid, SHAPES[shape])


def test_the_shapes_take_the_skeleton_path():
    """The cases above test something only where a skeleton is built."""
    parsed_whole = {shape for shape, data in SHAPES.items() if not uses_skeleton(data)}
    assert parsed_whole == {"no final newline, last member left out", "no final newline, last member kept",
                            "backslash before a blank line, left out"}


@pytest.mark.parametrize("data", [
    # A latin-1 coding line over bytes that are valid UTF-8 too (the engine refuses other bytes):
    # libcst decodes them as latin-1; encoded back as UTF-8, every non-ASCII byte doubled.
    b"# -*- coding: latin-1 -*-\nclass A:\n    def f(self, x):\n        return 'caf\xc3\xa9'\n",
    b"\xef\xbb\xbfclass A:\n    def f(self, x):\n        return 1\n",  # a BOM, its statement kept
    b"\xef\xbb\xbfimport os\n\n\nclass A:\n    def f(self, x):\n        return 1\n",  # a BOM, its statement left out
])
def test_the_bytes_around_an_edit_keep_the_files_encoding(data):
    """libcst's `.code` is text, without the BOM: encoded as UTF-8 it dropped the BOM (in the whole
    file, or in a skeleton whose first statement is kept) and re-encoded a latin-1 file."""
    verdict, written = both("t-guard", data)
    assert verdict == "pending" and isinstance(written, bytes)
    head, tail = data.split(b"    def f(self, x):\n")
    assert written == head + b"    def f(self, x):\n        x = abs(x)  # patchkit t-guard\n" + tail


def test_no_final_newline_writes_valid_python():
    """A skeleton's last placeholder line ends with a newline the file does not have: a method
    appended after it was glued to the file's last line (`return 2    def added(self):`)."""
    data = SHAPES["no final newline, last member left out"]
    verdict, written = both("t-add", data)
    assert verdict == "pending" and isinstance(written, bytes)
    compile(written, REL, "exec")
    assert written.startswith(data + b"\n    def added(self):")


def test_a_splice_that_breaks_the_file_around_the_parsed_part_is_refused(monkeypatch):
    """What is written is compiled whole, not only the regenerated skeleton: a restore that
    joins lines around a part left out (the kind of bug a missing final newline caused) must
    stop the render, never reach the disk."""
    from patchkit.engine import skeleton

    data = SHAPES["no final newline, last member left out"] + b"\n"
    assert uses_skeleton(data)
    assert run("t-add", data, whole=False)[0] == "pending"  # and valid, without the broken splice
    real = skeleton.Skeleton.restore
    monkeypatch.setattr(skeleton.Skeleton, "restore",
                        lambda self, code: real(self, code).replace(b"2\n    def added", b"2    def added", 1))
    verdict, written = run("t-add", data, whole=False)
    assert verdict == "render-error" and "invalid Python" in str(written)
