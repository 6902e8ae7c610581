"""The public import paths patch sets use (docs/modules.md, "Public import paths") stay thin
re-exports of the folders' modules (issue 34): the same objects, nothing of their own."""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "patchkit"
REAL_MODULES = {"__init__", "__main__", "testing"}


def _reexports() -> dict[str, str]:
    """{public module: the module it re-exports}, read from the top of patchkit/."""
    found = {}
    for path in sorted(PACKAGE.glob("*.py")):
        if path.stem in REAL_MODULES:
            continue
        body = ast.parse(path.read_text()).body
        code = [node for node in body if not (isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant))]
        assert len(code) == 1 and isinstance(code[0], ast.ImportFrom) and [a.name for a in code[0].names] == ["*"], \
            f"patchkit/{path.name}: a public path is one star import of its folder's module"
        found[f"patchkit.{path.stem}"] = str(code[0].module)
    return found


def test_each_public_path_is_its_folders_module():
    found = _reexports()
    assert {"patchkit.patch", "patchkit.anchor", "patchkit.edits", "patchkit.template", "patchkit.matchers",
            "patchkit.errors", "patchkit.runtime_switch", "patchkit.launch_trigger"} <= set(found)
    for public, real in found.items():
        assert real.rsplit(".", 1)[1] == public.rsplit(".", 1)[1] and real.count(".") == 2, (public, real)
        shim, module = importlib.import_module(public), importlib.import_module(real)
        names = [name for name in vars(module) if not name.startswith("_")]
        assert names and all(getattr(shim, name) is getattr(module, name) for name in names), public


def test_what_the_patches_and_templates_import_resolves():
    from patchkit.anchor import Anchor
    from patchkit.authoring.patch import Patch as RealPatch
    from patchkit.constants import ENV_DISABLE
    from patchkit.edits import append_to_block, edit, prepend_to_block
    from patchkit.errors import AnchorError
    from patchkit.launch_trigger import Trigger
    from patchkit.matchers import capture, functions, methods, self_attr, string
    from patchkit.patch import Patch, SkipPatch
    from patchkit.runtime_switch import declared, on
    from patchkit.template import Snippet, walk_statements
    from patchkit.testing import PatchTest

    assert Patch is RealPatch and issubclass(SkipPatch, Exception) and ENV_DISABLE == "SGLANG_PATCHKIT_DISABLE"
    assert all(callable(f) for f in (append_to_block, edit, prepend_to_block, capture, functions, methods,
                                     self_attr, string, declared, on, walk_statements))
    assert all(isinstance(c, type) for c in (Anchor, AnchorError, Trigger, Snippet, PatchTest))
