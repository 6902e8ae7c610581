"""A third kind of patch is one module plus its registration (issue 44 item 1): a toy kind, a
whole-file replacement kept in `<id>.whole` files, is defined here, registered in
`registry.FILE_KINDS`, and run through plan / apply / status / revert on the synthetic tree by the
real CLI, with no change to the engine. And the engine never asks a patch which kind it is."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from patchkit.authoring.patch import Patch
from patchkit.base.errors import UsageError
from patchkit.engine import registry
from testing import synthetic as syn
from testing.synthetic import Synthetic

PACKAGE = Path(__file__).resolve().parents[3] / "patchkit"
EPSILON = "sglang/epsilon.py"
BEFORE, AFTER = "LIMIT = 1\n", "LIMIT = 2  # replaced whole\n"


class WholeFile(Patch):
    """The toy kind: one target file whose every byte the patch replaces."""

    NEW: bytes

    def parsed_parts(self, path: str) -> tuple[str, ...] | None:
        return ()  # it reads the bytes

    def code(self, path: str, data: bytes, files: Any) -> Any:
        return data

    def render(self, path: str, rendered: Any, below: tuple[str, ...], files: Any) -> Any:
        return files.transform_bytes(path, rendered, self, below)

    def is_applied(self, path: str, tree: Any) -> bool:
        return bool(tree == self.NEW)

    def is_fixed_upstream(self, path: str, tree: Any) -> bool:
        return False

    def notes(self, path: str, tree: Any) -> list[str]:
        return []

    def transform(self, path: str, tree: Any) -> Any:
        return self.NEW


def _read(path: Path) -> tuple[str, tuple[str, bytes]]:
    """`<id>.whole`: a first line `target: PATH`, then the file's new bytes."""
    head, _, body = path.read_bytes().partition(b"\n")
    if not head.startswith(b"target: "):
        raise UsageError(f"{path}: no `target:` line")
    return path.name.removesuffix(".whole"), (head.removeprefix(b"target: ").decode(), body)


def _make(files: list[tuple[Path, str, tuple[str, bytes]]]) -> list[type[Patch]]:
    made: list[type[Patch]] = []
    for path, _origin, (target, body) in files:
        attrs = {"ID": path.name.removesuffix(".whole"), "TITLE": f"{target} replaced whole",
                 "RATIONALE": "a toy kind", "APPLIES_TO": ">=0.9", "TARGETS": (target,), "NEW": body,
                 "__module__": __name__}
        made.append(type("Whole_" + attrs["ID"].replace("-", "_"), (WholeFile,), attrs))
    return made


@pytest.fixture
def whole(monkeypatch, scratch) -> Synthetic:
    monkeypatch.setitem(registry.FILE_KINDS, "whole", registry.FileKind((".whole",), _read, _make))
    patches = syn.write_patches(scratch / "patches")
    (patches / "syn-whole.whole").write_text(f"target: {EPSILON}\n{AFTER}")
    return Synthetic(syn.make_tree(scratch / "site", overrides={EPSILON: BEFORE}), patches)


def test_a_third_kind_is_planned_applied_judged_and_reverted(whole):
    assert whole.states()["syn-whole"] == "pending"
    planned = whole.run("apply", "--dry-run", "--only", "syn-whole")
    assert planned.exit_code == 0, planned.stderr
    assert whole.text(EPSILON) == BEFORE  # a plan writes nothing
    applied = whole.run("apply")
    assert applied.exit_code == 0, applied.stderr
    assert whole.text(EPSILON) == AFTER
    assert whole.states()["syn-whole"] == "applied"
    assert "syn-whole" in (whole.recorded() or [])
    reverted = whole.run("revert")
    assert reverted.exit_code == 0, reverted.stderr
    assert whole.text(EPSILON) == BEFORE and whole.states()["syn-whole"] == "pending"
    assert whole.text(syn.GAMMA) == syn.SOURCES[syn.GAMMA]  # the module patches went too


def test_a_kind_not_registered_is_not_loaded(scratch):
    patches = syn.write_patches(scratch / "patches")
    (patches / "syn-whole.whole").write_text(f"target: {EPSILON}\n{AFTER}")
    tree = Synthetic(syn.make_tree(scratch / "site", overrides={EPSILON: BEFORE}), patches)
    assert "syn-whole" not in tree.states()


# The engine asks a patch the PatchKind protocol, never which kind it is: View's render path
# (engine/view.py) too, where each kind reads (`code`) and renders (`render`) a file through it.
KIND_QUESTION = re.compile(r"works_on_bytes\(|isinstance\([^)]*DiffPatch|getattr\([^)]*\"(NOTES|STACKED_ON)\"")
KINDS_OWN = {"authoring/kind.py", "authoring/patch.py", "diffs/diffpatch.py"}


def test_nothing_outside_the_kinds_asks_a_patch_its_kind():
    found = [f"{path.relative_to(PACKAGE)}:{n}: {line.strip()}" for path in sorted(PACKAGE.rglob("*.py"))
             if path.relative_to(PACKAGE).as_posix() not in KINDS_OWN
             for n, line in enumerate(path.read_text().splitlines(), 1) if KIND_QUESTION.search(line)]
    assert not found, found
