"""`python -m testing.module_map`: lines and imports per module, cycles, upward imports (22.4), on
a small git repository made here, and the tree itself: no import cycle, no upward import."""

from __future__ import annotations

import subprocess
from pathlib import Path

from testing import module_map


def _repo(root: Path, files: dict[str, str]) -> str:
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    git = ["git", "-C", str(root), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run([*git, "init", "-q"], check=True)
    subprocess.run([*git, "add", "."], check=True)
    subprocess.run([*git, "commit", "-q", "-m", "t"], check=True)
    return subprocess.run([*git, "rev-parse", "HEAD"], check=True, capture_output=True, text=True).stdout.strip()


def test_imports_cycles_and_upward_imports_at_a_revision(tmp_path):
    rev = _repo(tmp_path, {
        "patchkit/__init__.py": "",
        "patchkit/engine/__init__.py": "",
        "patchkit/engine/a.py": "from patchkit.engine import b\n\n\ndef f():\n    from patchkit.base.util import x  # deferred: still an edge\n",
        "patchkit/engine/b.py": "import patchkit.engine.a\nfrom typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from patchkit.commands import c\n",
        "patchkit/base/__init__.py": "",
        "patchkit/base/util.py": "from patchkit.commands.c import run\nx = 1\n",
        "patchkit/commands/__init__.py": "",
        "patchkit/commands/c.py": "from patchkit.engine import a\nfrom patchkit.base import util\n\n\ndef run():\n    pass\n",
        "patchkit/patch.py": "from patchkit.engine.a import *\n",
        "patches/p.py": "from patchkit.patch import f\n",
    })
    (tmp_path / "patchkit" / "engine" / "a.py").write_text("")  # the working tree is not what is read
    modules = module_map.read(tmp_path, rev)
    a, b, c, util = "patchkit.engine.a", "patchkit.engine.b", "patchkit.commands.c", "patchkit.base.util"
    assert modules[a].imports == {b, util} and modules[a].lines == 5
    assert modules[b].imports == {a} and modules[b].typing == {c}
    assert modules["patchkit.patches.p"].imports == {"patchkit.patch"}
    # The layers follow the folders; a module at the top of patchkit/ is the public API.
    assert [module_map.layer(n) for n in (util, a, "patchkit.patch", "patchkit.patches.p", c)] == \
        ["base", "engine", "api", "patches", "commands"]
    # a -> util -> commands.c -> a, and a <-> b: one strongly connected component.
    assert module_map.cycles(modules) == [[util, c, a, b]]
    assert module_map.upward(modules) == [(util, c, False), (b, c, True)]
    text = module_map.render(modules, rev)
    assert "| engine.a | engine | 5 | base.util, engine.b |" in text and "Upward imports: 2" in text


def test_the_tree_has_no_import_cycle_and_no_upward_import():
    modules = module_map.read(Path(__file__).resolve().parents[3])
    assert "patchkit.engine.planning" in modules and "patchkit.planning" not in modules
    assert module_map.cycles(modules) == []
    assert module_map.upward(modules) == []
    typed = sorted((m.name, other) for m in modules.values() for other in m.typing
                   if m.name in modules[other].imports | modules[other].typing)
    assert typed == TYPE_ONLY_CYCLES_LEFT


# Type-only cycles left (each a type read back from a module that imports the reader at run time): none.
# doctor.advice -> doctor is gone (`Run` sits in doctor/run.py), and so is non_static -> budget (budget puts
# non_static's estimate into itself: `budget.fill_non_static`).
TYPE_ONLY_CYCLES_LEFT: list[tuple[str, str]] = []
