"""`rebase --continue` / `bump --continue` reading a resolved tree (patchkit.diffs.rebase_tree.finish)
on a hand-made tree and record: what the user left there decides the finished diff, and nothing
outside the tree gets into it. The same on the field's diff to 0.5.23: tests/integration/test_field_diffs.py."""

from __future__ import annotations

import base64
import json
import os

import pytest

from patchkit.base.errors import PlanError, UsageError
from patchkit.diffs import rebase_tree

RELEASE = {"sglang/kept.py": b"def f():\n    return 1\n"}


def _tree(folder, files: dict[str, bytes], record_files: dict[str, bool]):
    for rel, data in files.items():
        (folder / rel).parent.mkdir(parents=True, exist_ok=True)
        (folder / rel).write_bytes(data)
    record = {"schema": rebase_tree.SCHEMA, "id": "fix", "name": "fix.patch", "to": "0.5.23", "prefix": "a/",
              "header": base64.b64encode(b"").decode(), "files": record_files}
    (folder / rebase_tree.RECORD).write_text(json.dumps(record))
    return folder


def test_a_file_the_release_lacks_left_empty_is_not_created(tmp_path):
    """finding 3: its blocks deleted, a module 0.5.23 has not was written as `new file mode` with an
    empty blob, and apply created an empty module."""
    tree = _tree(tmp_path, {"sglang/kept.py": b"def f():\n    return 2\n", "sglang/gone.py": b"\n  \n"},
                 {"sglang/kept.py": True, "sglang/gone.py": False})
    done = rebase_tree.finish(tree, RELEASE.get)
    assert done.files == ("sglang/kept.py",) and done.not_created == ("sglang/gone.py",)
    assert b"gone.py" not in done.data and b"new file mode" not in done.data
    assert "sglang/gone.py" in done.dropped and any(n.startswith("not created: sglang/gone.py") for n in done.notes)


def test_a_file_the_release_lacks_with_code_is_created(tmp_path):
    tree = _tree(tmp_path, {"sglang/new.py": b"X = 1\n"}, {"sglang/new.py": False})
    done = rebase_tree.finish(tree, RELEASE.get)
    assert done.files == ("sglang/new.py",) and not done.not_created
    assert b"new file mode 100644" in done.data and b"+X = 1" in done.data


def test_a_file_of_the_release_edited_in_the_tree_is_taken_into_the_diff(tmp_path):
    """issue 40.8: a resolution may move the change to another file of V (the user puts it in the
    tree at its path and edits it there): it was left out with only an 'ignored' note."""
    release = {**RELEASE, "sglang/other.py": b"Y = 1\n", "sglang/same.py": b"Z = 1\n"}
    tree = _tree(tmp_path, {"sglang/kept.py": b"def f():\n    return 2\n", "sglang/other.py": b"Y = 2\n",
                            "sglang/same.py": b"Z = 1\n", "sglang/__pycache__/other.cpython-311.pyc": b"\0"},
                 {"sglang/kept.py": True})
    done = rebase_tree.finish(tree, release.get)
    assert done.files == ("sglang/kept.py", "sglang/other.py") and done.taken == ("sglang/other.py",)
    assert b"-Y = 1\n+Y = 2" in done.data and b"same.py" not in done.data and b"pycache" not in done.data
    assert any(n.startswith("taken: sglang/other.py") for n in done.notes)


@pytest.mark.parametrize("rel", ["sglang/new_module.py", "notes.txt", "python/sglang/kept.py"])
def test_a_file_in_the_tree_that_is_not_the_releases_is_an_error_naming_it(tmp_path, rel):
    tree = _tree(tmp_path, {"sglang/kept.py": b"def f():\n    return 2\n", rel: b"X = 1\n"}, {"sglang/kept.py": True})
    with pytest.raises(PlanError, match=f"{tree / rel}: not a file of SGLang 0.5.23's package"):
        rebase_tree.finish(tree, RELEASE.get)


@pytest.mark.parametrize("kind", ["symlink", "symlinked folder", "fifo"])
def test_a_symlink_or_fifo_in_the_tree_is_refused_not_followed(tmp_path, kind):
    """finding: a symlink's target (a file outside the tree) was written into the finished diff."""
    outside = tmp_path / "secret.txt"
    outside.write_bytes(b"SECRET\n")
    tree = _tree(tmp_path / "tree", {"sglang/kept.py": b"def f():\n    return 2\n"}, {"sglang/kept.py": True})
    if kind == "symlink":
        (tree / "sglang/kept.py").unlink()
        os.symlink(outside, tree / "sglang/kept.py")
        named = tree / "sglang/kept.py"
    elif kind == "symlinked folder":
        os.symlink(tmp_path, tree / "sglang/more")
        named = tree / "sglang/more"
    else:
        os.mkfifo(tree / "sglang/pipe.py")
        named = tree / "sglang/pipe.py"
    with pytest.raises(UsageError, match=f"{named} is "):
        rebase_tree.finish(tree, RELEASE.get)
