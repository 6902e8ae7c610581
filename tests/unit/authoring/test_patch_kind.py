"""One declared interface for every kind of patch (issue 34): what the engine asks of a patch is
`kind.PatchKind`, a module patch (`Patch`) answers with its defaults and a diff patch
(`DiffPatch`) with its own, and the engine asks nothing else of a patch's kind."""

from __future__ import annotations

import re
from pathlib import Path

from patchkit.authoring.kind import CREATED, DELETED, PatchKind
from patchkit.authoring.patch import Patch
from patchkit.diffs import diffpatch, unidiff

ENGINE = Path(__file__).resolve().parents[3] / "patchkit" / "engine"
MEMBERS = sorted(name for name in vars(PatchKind) if not name.startswith("_"))

DIFF = b"""\
diff --git a/sglang/a.py b/sglang/a.py
--- a/sglang/a.py
+++ b/sglang/a.py
@@ -1,2 +1,2 @@
 def f():
-    return 1
+    return 2
diff --git a/sglang/new.py b/sglang/new.py
new file mode 100644
--- /dev/null
+++ b/sglang/new.py
@@ -0,0 +1 @@
+x = 1
"""


class ModulePatch(Patch):
    ID = "module-patch"
    TARGETS = ("sglang/a.py", "sglang/b.py")


def _diff_patch() -> diffpatch.DiffPatch:
    return diffpatch.patch_class(Path("fix.patch"), "test", unidiff.load(DIFF, "fix.patch"))()


def test_both_kinds_answer_every_member():
    assert len(MEMBERS) >= 10
    for kind in (Patch, diffpatch.DiffPatch):
        missing = [name for name in MEMBERS if not callable(getattr(kind, name, None))]
        assert not missing, (kind.__name__, missing)


def test_a_module_patch_answers_with_the_defaults():
    patch, tree = ModulePatch(), {"sglang/a.py": b"x = 1\n"}
    patch.bind_package(lambda: ["sglang/c.py"], tree.get)  # nothing to bind: no error, no effect
    assert patch.targets_for(tree.get) == ("sglang/a.py", "sglang/b.py")  # its TARGETS, whatever the tree
    assert [patch.file_change(rel) for rel in patch.TARGETS] == [None, None]
    assert patch.creatable("sglang/a.py") is None and patch.before_change("sglang/a.py", b"x = 1\n") is None
    assert patch.upstream_remedy("0.5.20") is None and patch.made_for() is None and patch.verdict_inputs() == []
    assert not (ModulePatch.works_on_bytes() or ModulePatch.all_targets_required() or ModulePatch.reads_package())


def test_a_diff_patch_answers_for_itself():
    patch = _diff_patch()
    cls = type(patch)
    assert cls.works_on_bytes() and cls.all_targets_required() and cls.reads_package()
    assert (patch.file_change("sglang/a.py"), patch.file_change("sglang/new.py")) == (None, CREATED)
    assert DELETED == "deleted" and patch.file_change("sglang/other.py") is None
    # Its change undone exactly: how a diff applied by hand is recognised.
    assert patch.before_change("sglang/a.py", b"def f():\n    return 2\n") == b"def f():\n    return 1\n"
    assert patch.before_change("sglang/a.py", b"def f():\n    return 3\n") is None
    assert patch.before_change("sglang/other.py", b"") is None
    assert patch.upstream_remedy("0.5.20") == "`patchkit rebase fix.patch --to 0.5.20` re-makes the diff"


def test_the_engine_never_asks_a_patch_what_kind_it_is():
    # No duck typing on a patch, no kind flag: a renamed member fails mypy, not silently here.
    asked = re.compile(r"(getattr|hasattr)\((patch|p|cls|view\.patches\[[^]]+\])\b|WORKS_ON_BYTES|ALL_TARGETS_REQUIRED"
                       r"|\b\w+_mod\._[a-z]\w*\(")
    found = [f"{path.name}:{n}: {line.strip()}" for path in sorted(ENGINE.glob("*.py"))
             for n, line in enumerate(path.read_text().splitlines(), 1) if asked.search(line)]
    assert not found, found
