"""Real 0.5.17 target files reshaped the way a fork or a later release could: the skeleton the
engine parses (patchkit.engine.skeleton) must judge and write what parsing the whole file does."""

from __future__ import annotations

import ast
import types
from pathlib import Path

import pytest

from patchkit.engine import decide, patch_status, registry
from patchkit.engine import view as view_mod
from patchkit.base.errors import PatchkitError
from testing.releases import pristine

pytestmark = pytest.mark.integration

VERSION = "0.5.17"
# Small target files: each whole-file parse here costs what the check is worth.
CASES = {
    "autoround-packed-mapping": ("AutoRoundConfig", "from_config"),
    "fp8-kv-triton-sm89": ("TritonAttnBackend", "__init__"),
}


def _under_if(data: bytes, cls: str, method: str) -> bytes:
    """The method, still in its class, defined under `if True:` (a guarded def)."""
    lines = data.splitlines(keepends=True)
    node = next(n for n in ast.parse(data).body if isinstance(n, ast.ClassDef) and n.name == cls)
    fn = next(n for n in node.body if isinstance(n, ast.FunctionDef) and n.name == method)
    first = min([fn.lineno, *(d.lineno for d in fn.decorator_list)]) - 1
    body = [b"    " + line if line.strip() else line for line in lines[first:fn.end_lineno]]
    return b"".join([*lines[:first], b"    if True:\n", *body, *lines[fn.end_lineno:]])


def _tabs(data: bytes) -> bytes:
    """Every indent of four spaces as a tab."""
    out = []
    for line in data.split(b"\n"):
        stripped = line.lstrip(b" ")
        n = len(line) - len(stripped)
        out.append(b"\t" * (n // 4) + b" " * (n % 4) + stripped)
    return b"\n".join(out)


def _judge(pid: str, contents: dict[str, bytes | None], whole: bool) -> tuple[str, dict[str, bytes]]:
    view = view_mod.View(target=types.SimpleNamespace(site=Path("/nonexistent")), state=None, manifest=None)  # type: ignore[arg-type]
    if whole:
        view.skeleton = lambda rel, data: None  # type: ignore[method-assign]
    try:
        status = decide.evaluate(view, pid, contents)
    except PatchkitError as exc:
        return f"error: {exc}", {}
    written = {}
    if status.state == patch_status.PENDING:
        for rel in status.files:
            view.pristine = lambda rel, data=contents[rel]: data  # type: ignore[method-assign,misc]
            written[rel] = view_mod.render_file(view, rel, (pid,))  # type: ignore[assignment]
    return status.state, written


@pytest.mark.parametrize("shape", ["under-if", "tabs"])
@pytest.mark.parametrize("pid", sorted(CASES))
def test_reshaped_release_file_judged_as_the_whole_file(pid, shape):
    site = pristine(VERSION)
    patch = next(cls for cls in registry.load_all() if cls.ID == pid)
    (rel,) = patch.TARGETS
    data = (site / rel).read_bytes()
    data = _under_if(data, *CASES[pid]) if shape == "under-if" else _tabs(data)
    compile(data, rel, "exec")
    skeleton, whole = _judge(pid, {rel: data}, whole=False), _judge(pid, {rel: data}, whole=True)
    assert skeleton[0] == whole[0] == patch_status.PENDING  # the skeleton said failed / a tokenizer error
    assert skeleton[1] == whole[1]
