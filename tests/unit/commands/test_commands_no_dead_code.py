"""Every top-level function of patchkit/commands/ has a caller in patchkit/ (a command module's
functions are the CLI's entry points and their helpers: one nobody calls is dead weight the
next engineer reads and keeps in step, like `locate.release_target` was)."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import patchkit

PACKAGE = Path(patchkit.__file__).parent


def _uncalled() -> list[str]:
    sources = {path: path.read_text() for path in PACKAGE.rglob("*.py")}
    dead = []
    for path in sorted((PACKAGE / "commands").glob("*.py")):
        for node in ast.parse(sources[path]).body:
            if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            word = re.compile(rf"\b{re.escape(node.name)}\b")
            # Its own `def` line is one mention; any other, anywhere in patchkit/, is a use.
            uses = sum(len(word.findall(text)) for text in sources.values()) - 1
            if uses == 0:
                dead.append(f"{path.relative_to(PACKAGE)}:{node.lineno} {node.name}")
    return dead


def test_every_command_function_has_a_caller():
    assert _uncalled() == []
