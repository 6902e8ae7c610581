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
        "patchkit/a.py": "from patchkit import b\n\n\ndef f():\n    from patchkit.util import x  # deferred: still an edge\n",
        "patchkit/b.py": "import patchkit.a\nfrom typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from patchkit.commands import c\n",
        "patchkit/util.py": "from patchkit.commands.c import run\nx = 1\n",
        "patchkit/commands/__init__.py": "",
        "patchkit/commands/c.py": "from patchkit import a, util\n\n\ndef run():\n    pass\n",
        "patches/p.py": "from patchkit.a import f\n",
    })
    (tmp_path / "patchkit" / "a.py").write_text("")  # the working tree is not what is read
    modules = module_map.read(tmp_path, rev)
    assert modules["patchkit.a"].imports == {"patchkit.b", "patchkit.util"} and modules["patchkit.a"].lines == 5
    assert modules["patchkit.b"].imports == {"patchkit.a"} and modules["patchkit.b"].typing == {"patchkit.commands.c"}
    assert modules["patchkit.patches.p"].imports == {"patchkit.a"}
    # a -> util -> commands.c -> a, and a <-> b: one strongly connected component.
    assert module_map.cycles(modules) == [["patchkit.a", "patchkit.b", "patchkit.commands.c", "patchkit.util"]]
    assert module_map.upward(modules) == [("patchkit.b", "patchkit.commands.c", True),
                                         ("patchkit.util", "patchkit.commands.c", False)]
    text = module_map.render(modules, rev)
    assert "| a | library | 5 | b, util |" in text and "Upward imports: 2" in text


def test_the_tree_has_no_import_cycle_and_no_upward_import():
    modules = module_map.read(Path(__file__).resolve().parents[2])
    assert "patchkit.planning" in modules and "patchkit.engine" not in modules
    assert module_map.cycles(modules) == []
    assert module_map.upward(modules) == []
