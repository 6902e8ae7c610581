"""A patch's identity follows what it does (issue 22.2): a comment, a docstring or a change of
formatting in a built-in patch keeps its digest, a change of its code (or of a snippet) changes
it, and so does a change of the code of patchkit's modules that decide the rendered bytes."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from patchkit.engine import identity, registry

PATCH_ID = "mtp-layer-detection"
# A statement of the snippet the patch inserts: its operands swapped is a change of what it writes.
OLD_LINE = "        self.num_nextn_predict_layers is None\n        and self.is_draft_model\n"
NEW_LINE = "        self.is_draft_model\n        and self.num_nextn_predict_layers is None\n"
PACKAGE = Path(identity.__file__).parents[1]


@pytest.fixture
def edited(tmp_path, monkeypatch):
    """Edit a copy of the patch's module; its digest is read from the copy."""
    original = registry.source_file
    copy = tmp_path / original(PATCH_ID).name
    shutil.copy(original(PATCH_ID), copy)
    monkeypatch.setattr(registry, "source_file", lambda pid: copy if pid == PATCH_ID else original(pid))

    def edit(change) -> str:
        copy.write_text(change(copy.read_text()))
        return identity.digest(PATCH_ID)

    return edit


def test_a_comment_or_formatting_edit_keeps_the_digest(edited):
    before = identity.digest(PATCH_ID)
    assert edited(lambda s: "# a comment at the top\n" + s.replace("\n\n", "\n\n# and one between\n\n", 3)) == before
    assert edited(lambda s: s.replace("(self,", "(  self ,")) == before  # formatting inside a call


def test_a_docstring_edit_keeps_the_digest(edited):
    before = identity.digest(PATCH_ID)
    source = registry.source_file(PATCH_ID).read_text()
    first = source.index('"""')
    assert edited(lambda s: s[:first + 3] + "Reworded: " + s[first + 3:]) == before  # the module's docstring
    assert 'def ' in source
    assert edited(lambda s: s.replace("    def is_fixed_upstream(self, path: str, tree: cst.Module) -> bool:\n",
                                      "    def is_fixed_upstream(self, path: str, tree: cst.Module) -> bool:\n"
                                      '        """A docstring added."""\n', 1)) == before


def test_a_code_edit_changes_the_digest(edited):
    before = identity.digest(PATCH_ID)
    assert registry.source_file(PATCH_ID).read_text().count(OLD_LINE) == 1, "the patch changed: update this test"
    assert edited(lambda s: s.replace(OLD_LINE, NEW_LINE)) != before


def test_the_digest_is_not_the_file_hash_and_reads_the_same_on_every_python():
    # What patchkit before issue 22.2 recorded: a state holding it reads `outdated` (see
    # tests/integration/test_identity.py); and ast.dump's text, which differs between Pythons, is not used.
    path = registry.source_file(PATCH_ID)
    assert identity.digest(PATCH_ID) != identity.sha256(path.read_bytes())
    assert identity.normalised(b"def f(x=1):\n    'doc'\n    return [x]  # why\n") == (
        "Module(body=[FunctionDef(name='f',args=arguments(args=[arg(arg='x')],defaults=[Constant(value=1)]),"
        "body=[Return(value=List(elts=[Name(id='x',ctx=Load())],ctx=Load()))])])"
    )


def test_the_rendering_code_of_patchkit_is_part_of_the_identity(tmp_path):
    copy = tmp_path / "patchkit"
    shutil.copytree(PACKAGE, copy, ignore=shutil.ignore_patterns("__pycache__"))
    base = identity.engine_digest(PACKAGE)
    assert identity.engine_digest(copy) == base

    def digest_after(name: str, change) -> str:
        path = copy / name
        original = path.read_text()
        path.write_text(change(original))
        try:
            return identity.engine_digest.__wrapped__(copy)
        finally:
            path.write_text(original)

    for name, names in identity.RENDERING.items():
        assert digest_after(name, lambda s: "# a comment\n" + s) == base, name
        if names:  # only those definitions: code in them counts, code beside them does not
            for definition in names:
                head = next(line for line in (copy / name).read_text().splitlines(keepends=True)
                            if line.startswith((f"class {definition}", f"def {definition}(")))
                assert digest_after(name, lambda s: s.replace(head, head + "    _CHANGED = 1\n", 1)) != base, definition
            assert digest_after(name, lambda s: s + "\n_CHANGED = 1\n") == base, name
        else:
            assert digest_after(name, lambda s: s + "\n_CHANGED = 1\n") != base, name
    # A module that decides nothing about the bytes is not part of it.
    assert digest_after("commands/output.py", lambda s: s + "\n_CHANGED = 1\n") == base


def test_the_folder_a_module_sits_in_is_not_part_of_the_identity():
    # The house move (issue 34) put the modules into folders and changed no digest: an import of
    # patchkit.<folder>.<module> reads as patchkit.<module>, as the flat package spelled it.
    flat = identity.normalised(b"from patchkit.errors import AnchorError\nfrom patchkit import matcher_import\n"
                               b"import patchkit.anchor\n")
    assert identity.normalised(b"from patchkit.base.errors import AnchorError\n"
                               b"from patchkit.authoring import matcher_import\nimport patchkit.authoring.anchor\n") == flat
    # Not any patchkit path: another name is another import.
    assert identity.normalised(b"from patchkit.doctor.errors import AnchorError\nfrom patchkit import matcher_import\n"
                               b"import patchkit.anchor\n") != flat
    # So two modules of those folders must never share a name (they would read as one import).
    names = [path.stem for folder in identity.FOLDERS for path in (PACKAGE / folder).glob("*.py")
             if path.stem != "__init__"]
    assert len(names) == len(set(names)), sorted(n for n in set(names) if names.count(n) > 1)
    assert set(identity.FOLDERS) == {p.name for p in PACKAGE.iterdir() if (p / "__init__.py").is_file()} - {
        "commands", "doctor"}  # the two folders the flat package already had: their imports were spelled so
