"""`rebase --continue` / `bump --continue` reading a resolved tree (patchkit.diffs.rebase_tree.finish)
on a hand-made tree and record: what the user left there decides the finished diff, and nothing
outside the tree gets into it. The same on the field's diff to 0.5.23: tests/integration/test_field_diffs.py."""

from __future__ import annotations

import base64
import json
import os

import pytest

from patchkit.base.errors import UsageError
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


def test_a_file_put_in_the_tree_outside_the_diff_is_named(tmp_path):
    """finding 11: an edit to a file the user copied into the tree was silently left out."""
    tree = _tree(tmp_path, {"sglang/kept.py": b"def f():\n    return 2\n", "sglang/other.py": b"Y = 1\n"},
                 {"sglang/kept.py": True})
    done = rebase_tree.finish(tree, RELEASE.get)
    assert done.ignored == ("sglang/other.py",) and b"other.py" not in done.data
    assert any(n.startswith("ignored: sglang/other.py") for n in done.notes)


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
