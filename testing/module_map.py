"""The module map of patchkit at a git revision: per module its lines and the patchkit modules it
imports, the import edges between layers, the cycles and the upward imports (issue 22.4).

    python -m testing.module_map [REV]     (read with `git show`, nothing checked out; without
                                            REV: the working tree)

Every import statement counts, at module level or inside a function (a deferred import is still a
dependency); one under `if TYPE_CHECKING:` is a type-only edge, shown as `name (t)` and left out of
the cycles. The layers, lowest first, are the folders of patchkit/ (issue 34): `base`, `releases`,
`store`, `authoring`, `diffs`, `engine`, `image`, `runtime`, then `api` (the modules at the top of
patchkit/: the public paths patch sets import, `PatchTest`), `patches` (patches/, shipped as
patchkit.patches), `doctor`, `commands`, `cli` (with `__main__`). The package itself (its version)
is `base`. An upward import is an edge from a module to a higher layer.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

LAYERS = ("base", "releases", "store", "authoring", "diffs", "engine", "image", "runtime", "api", "patches", "doctor",
          "commands", "cli")
FOLDERS = set(LAYERS) - {"api"}

@dataclass
class Module:
    name: str
    lines: int
    imports: set[str] = field(default_factory=set)  # run-time (module level or deferred)
    typing: set[str] = field(default_factory=set)  # only under TYPE_CHECKING


def layer(name: str) -> str:
    if name == "patchkit":
        return "base"
    if name == "patchkit.__main__":
        return "cli"
    folder = name.split(".")[1]
    return folder if folder in FOLDERS else "api"


def _git(root: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(root), *args], check=True, capture_output=True, text=True).stdout


def _module_name(path: str) -> str:
    if path.startswith("patches/"):  # shipped as patchkit.patches
        path = "patchkit/" + path
    name = path[:-3].replace("/", ".")
    return name[: -len(".__init__")] if name.endswith(".__init__") else name


def _targets(node: ast.Import | ast.ImportFrom, current: str, known: set[str]) -> set[str]:
    """The patchkit modules an import statement names (`from patchkit import x`: x when it is a module)."""
    if isinstance(node, ast.Import):
        names = [alias.name for alias in node.names]
    else:
        base = node.module or ""  # patchkit has no relative imports
        names = [f"{base}.{alias.name}" if f"{base}.{alias.name}" in known else base for alias in node.names]
    found = set()
    for name in names:
        while name and name not in known:
            name = name.rpartition(".")[0]
        if name.startswith("patchkit") and name != current:
            found.add(name)
    return found


def _type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def read(root: Path, rev: str | None = None) -> dict[str, Module]:
    """The modules of patchkit/ and patches/ at `rev`, or in the working tree when None."""
    if rev is None:
        paths = sorted(p.relative_to(root).as_posix() for folder in ("patchkit", "patches")
                       for p in (root / folder).rglob("*.py"))
        sources = {_module_name(p): (root / p).read_text(encoding="utf-8") for p in paths}
    else:
        paths = [p for p in _git(root, "ls-tree", "-r", "--name-only", rev, "patchkit", "patches").splitlines()
                 if p.endswith(".py")]
        sources = {_module_name(p): _git(root, "show", f"{rev}:{p}") for p in paths}
    known = set(sources)
    modules: dict[str, Module] = {}
    for name, text in sorted(sources.items()):
        module = modules[name] = Module(name, len(text.splitlines()))
        tree = ast.parse(text)
        typed: set[int] = set()
        for node in ast.walk(tree):
            if isinstance(node, ast.If) and _type_checking(node):
                typed |= {id(inner) for stmt in node.body for inner in ast.walk(stmt)}
        for node in ast.walk(tree):
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                (module.typing if id(node) in typed else module.imports).update(_targets(node, name, known))
        module.typing -= module.imports
    return modules


def cycles(modules: dict[str, Module]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan), run-time edges only."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(name: str) -> None:
        index[name] = low[name] = len(index)
        stack.append(name)
        for other in sorted(modules[name].imports):
            if other not in index:
                visit(other)
                low[name] = min(low[name], low[other])
            elif other in stack:
                low[name] = min(low[name], index[other])
        if low[name] == index[name]:
            component = []
            while True:
                top = stack.pop()
                component.append(top)
                if top == name:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    sys.setrecursionlimit(10000)
    for name in sorted(modules):
        if name not in index:
            visit(name)
    return sorted(found)


def upward(modules: dict[str, Module]) -> list[tuple[str, str, bool]]:
    """(module, imported, type-only) for each import of a higher layer."""
    rank = {name: LAYERS.index(layer(name)) for name in modules}
    return [(m.name, other, typed) for m in modules.values()
            for typed, names in ((False, m.imports), (True, m.typing)) for other in sorted(names)
            if rank[other] > rank[m.name]]


def _short(name: str) -> str:
    return name.removeprefix("patchkit.")


def render(modules: dict[str, Module], rev: str) -> str:
    out = [f"Module map at {rev}: {len(modules)} modules, {sum(m.lines for m in modules.values())} lines.", ""]
    out += ["| module | layer | lines | imports (patchkit modules) |", "| --- | --- | ---: | --- |"]
    for m in sorted(modules.values(), key=lambda m: m.name):
        names = [_short(n) for n in sorted(m.imports)] + [f"{_short(n)} (t)" for n in sorted(m.typing)]
        # The name without backticks: docs/modules.md's own table of jobs is the one with them.
        out.append(f"| {_short(m.name)} | {layer(m.name)} | {m.lines} | {', '.join(names) or '-'} |")
    edges: dict[tuple[str, str], int] = defaultdict(int)
    for m in modules.values():
        for other in m.imports | m.typing:
            edges[(layer(m.name), layer(other))] += 1
    out += ["", "| from layer | to layer | imports |", "| --- | --- | ---: |"]
    for (a, b), count in sorted(edges.items(), key=lambda item: (LAYERS.index(item[0][0]), LAYERS.index(item[0][1]))):
        out.append(f"| {a} | {b} | {count} |")
    largest = sorted(modules.values(), key=lambda m: -m.lines)[:5]
    out += ["", "Largest: " + ", ".join(f"`{_short(m.name)}` {m.lines}" for m in largest) + "."]
    found = cycles(modules)
    out.append("Cycles (run-time imports): " + ("; ".join(" <-> ".join(_short(n) for n in c) for c in found) or "none") + ".")
    typed_cycles = [(m.name, o) for m in modules.values() for o in m.typing if m.name in modules[o].imports | modules[o].typing]
    if typed_cycles:
        out.append("Type-only cycles: " + "; ".join(f"{_short(a)} -> {_short(b)} (t)" for a, b in sorted(typed_cycles)) + ".")
    up = upward(modules)
    out.append(f"Upward imports: {len(up)}" + (": " + ", ".join(
        f"{_short(a)} -> {_short(b)}{' (t)' if t else ''}" for a, b, t in up) if up else "") + ".")
    return "\n".join(out) + "\n"


def main(argv: list[str]) -> int:
    rev = argv[0] if argv else None
    root = Path(__file__).resolve().parents[1]
    sys.stdout.write(render(read(root, rev), rev or "the working tree"))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
