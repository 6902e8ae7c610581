"""A patch's `precondition` over the files it consults (CONSULTS): a reason makes it not-applicable
(named in the detail), an AnchorError failed, anything else failed as a crash, None leaves the
per-file probes to decide; the consulted files key the verdict cache."""

from __future__ import annotations

import types
from pathlib import Path

import libcst as cst
import libcst.matchers as m
import pytest

from patchkit.edits import edit
from patchkit.engine import decide, identity
from patchkit.engine import view as view_mod
from patchkit.engine.verdicts import VerdictCache
from patchkit.errors import AnchorError
from patchkit.patch import Patch
from patchkit.template import Snippet

TARGET, RULE = "pkg/a.py", "pkg/rule.py"
MARK = Snippet("patched = True")


class Consulting(Patch):
    """Applies to pkg/a.py unless pkg/rule.py (read, never written) says `refuse = True`."""

    ID = "consulting"
    TITLE = RATIONALE = "a test patch"
    APPLIES_TO = ">=0"
    TARGETS = (TARGET,)
    CONSULTS = (RULE,)
    MARKS = {TARGET: ((None, MARK),)}

    def precondition(self, read):
        data = read(RULE)
        if data is None:
            raise AnchorError("anchor not found: the rule")
        tree = cst.parse_module(data)
        if m.findall(tree, m.Assign(targets=[m.AssignTarget(target=m.Name("crash"))])):
            raise ValueError("a bug in the probe")
        refused = m.findall(tree, m.Assign(targets=[m.AssignTarget(target=m.Name("refuse"))], value=m.Name("True")))
        return f"{RULE} refuses it" if refused else None

    def is_fixed_upstream(self, path, tree):
        return False

    @edit(m.SimpleStatementLine(body=[m.Expr(value=m.Name("anchor"))]), "anchor")
    def add_mark(self, original_node: cst.SimpleStatementLine, updated_node: cst.SimpleStatementLine
                 ) -> cst.FlattenSentinel[cst.BaseStatement]:
        return cst.FlattenSentinel([updated_node, *MARK.fill()])


def judge(rule: str | None):
    target = types.SimpleNamespace(site=Path("/nonexistent"), read=lambda path: None, version="0")
    view = view_mod.View(target=target, state=None, manifest=None)  # type: ignore[arg-type]
    view._patches = {Consulting.ID: Consulting()}
    files: dict[str, bytes | None] = {TARGET: b"anchor\n", RULE: None if rule is None else rule.encode()}
    return decide.evaluate(view, Consulting.ID, files)


@pytest.mark.parametrize(("rule", "state", "detail"), [
    ("refuse = False\n", "pending", ""),
    ("refuse = True\n", "not-applicable", f"{RULE} refuses it"),
    (None, "failed", "anchor not found: the rule"),
    ("crash = 1\n", "failed", "a bug in the probe"),
])
def test_precondition_decides_before_the_files(rule, state, detail):
    found = judge(rule)
    assert (found.state, found.files) == (state, (TARGET,))
    assert detail in found.detail
    assert found.crashed == (rule == "crash = 1\n")


def test_consulted_files_key_the_verdict_cache(monkeypatch):
    monkeypatch.setattr(identity, "digest", lambda pid: "a loaded patch's digest")  # a patch of this test only

    def source(rule: bytes):
        files = {TARGET: b"anchor\n", RULE: rule}
        return types.SimpleNamespace(read=files.get, listing_fingerprint=lambda: "listing")

    assert VerdictCache.key(Consulting, source(b"refuse = False\n")) != VerdictCache.key(Consulting, source(b"refuse = True\n"))
