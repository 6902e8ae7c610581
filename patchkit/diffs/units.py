"""A Python file cut into units of code, found with `ast`: a function, a method, a class header
(the class line, its docstring and attributes up to its first method), a top-level statement, a
block of consecutive imports. The units partition the file's lines: the blank lines and comments
before a unit belong to it, the lines after the last one form the unit `<end>`. Units are named
so that the same unit is found again in another release of the file, wherever its lines moved:
"Class.method", "function", "Class", "<imports>", an assignment by its targets, other
statements by their first line; a name seen twice gets "#2".
"""

from __future__ import annotations

import ast
from dataclasses import dataclass

END = "<end>"
IMPORTS = "<imports>"


@dataclass(frozen=True)
class Unit:
    name: str
    start: int  # first line (0-based), its leading blank lines and comments included
    end: int  # one past its last line


def split_lines(data: bytes) -> list[bytes]:
    """Lines split after b"\\n" only, endings kept (joining them gives `data` back)."""
    parts = data.split(b"\n")
    lines = [part + b"\n" for part in parts[:-1]]
    if parts[-1]:
        lines.append(parts[-1])
    return lines


def units(data: bytes) -> list[Unit]:
    """The file's units in order; a SyntaxError (or ValueError for NUL bytes) when `ast` cannot parse it."""
    module = ast.parse(data)
    total = len(split_lines(data))
    spans: list[tuple[str, int, int]] = []  # (name, first line of its code, one past its last line), 0-based

    def first_line(node: ast.stmt) -> int:
        decorators = getattr(node, "decorator_list", None) or []
        return min([node.lineno, *(d.lineno for d in decorators)]) - 1

    imports: list[ast.stmt] = []

    def flush_imports() -> None:
        if imports:
            spans.append((IMPORTS, first_line(imports[0]), imports[-1].end_lineno or imports[-1].lineno))
            imports.clear()

    for index, node in enumerate(module.body):
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            imports.append(node)
            continue
        flush_imports()
        if isinstance(node, ast.ClassDef):
            members = [child for child in node.body if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))]
            if not members:
                spans.append((node.name, first_line(node), node.end_lineno or node.lineno))
                continue
            header_end = first_line(members[0])
            spans.append((node.name, first_line(node), header_end))
            for child in node.body[node.body.index(members[0]):]:
                spans.append((f"{node.name}.{_name(child, None)}", first_line(child), child.end_lineno or child.lineno))
            continue
        spans.append((_name(node, index), first_line(node), node.end_lineno or node.lineno))
    flush_imports()

    found: list[Unit] = []
    seen: dict[str, int] = {}
    previous_end = 0
    for name, start, end in spans:
        if found and start < previous_end:  # two statements on one line ("a = 1; b = 2"): one unit
            last = found.pop()
            found.append(Unit(last.name, last.start, max(last.end, end)))
            previous_end = max(previous_end, end)
            continue
        seen[name] = seen.get(name, 0) + 1
        unique = name if seen[name] == 1 else f"{name}#{seen[name]}"
        found.append(Unit(unique, previous_end, end))
        previous_end = end
    if previous_end < total:
        found.append(Unit(END, previous_end, total))
    return found


def _name(node: ast.stmt, index: int | None) -> str:
    """The name a statement is found by in another release of the file."""
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return node.name
    if isinstance(node, ast.Assign):
        return ",".join(ast.unparse(target) for target in node.targets)
    if isinstance(node, (ast.AnnAssign, ast.AugAssign)):
        return ast.unparse(node.target)
    if index == 0 and isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str):
        return "<docstring>"
    if isinstance(node, (ast.If, ast.While)):
        return f"{type(node).__name__.lower()} {ast.unparse(node.test)}"
    if isinstance(node, (ast.Try, ast.With)) and node.body:
        return f"{type(node).__name__.lower()}: {_name(node.body[0], None)}"
    return ast.unparse(node).split("\n", 1)[0][:80]


def texts(data: bytes) -> dict[str, bytes]:
    """{unit name: its bytes}, in file order."""
    lines = split_lines(data)
    return {unit.name: b"".join(lines[unit.start:unit.end]) for unit in units(data)}


def containing(found: list[Unit], line: int) -> Unit | None:
    """The unit holding a line (0-based)."""
    return next((unit for unit in found if unit.start <= line < unit.end), None)


def parses(rel: str, data: bytes) -> bool:
    """Whether `data` splits into units (a file that is not Python always does)."""
    if not rel.endswith(".py"):
        return True
    try:
        units(data)
    except (SyntaxError, ValueError):
        return False
    return True
