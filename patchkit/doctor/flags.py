"""The launch flags a release accepts, read from its own argument-parser source with `ast`.

SGLang builds its parser in `ServerArgs.add_cli_args` (`sglang/srt/server_args.py`): every field
annotated `A[T, "help"]` or `A[T, Arg(...)]` becomes a flag through `add_cli_args_from_dataclass`
(`sglang/srt/arg_groups/arg_utils.py`), and a few flags (deprecated spellings, dynamic choices)
are registered by hand with `parser.add_argument`. From 0.5.20 the fields live in
`sglang/srt/arg_groups/fields/*.py`. Nothing here imports SGLang: the source is parsed, not run.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

# Argument-parser actions that take no value on the command line.
_NO_VALUE_ACTIONS = ("store_true", "store_false", "store_const", "count", "help", "version")


@dataclass(frozen=True)
class Flag:
    """One command-line flag of a release."""

    names: tuple[str, ...]
    dest: str
    takes_value: bool = True
    nargs: str | None = None  # "+", "*", "?" or None (one value)
    kind: str = "str"  # str, int, float or bool (of each element, for a list)
    default: object = None
    choices: tuple[str, ...] | None = None
    deprecated_for: str | None = None  # the flag that replaces a deprecated spelling
    choices_extensible: bool = False  # choices from a module-level list that plugins may extend


@dataclass
class FlagTable:
    """Every flag of one release, by each of its names."""

    by_name: dict[str, Flag] = field(default_factory=dict)

    def add(self, flag: Flag) -> None:
        for name in flag.names:
            # A field registered first wins, as in argparse (a second registration would raise there).
            self.by_name.setdefault(name, flag)

    def get(self, name: str) -> Flag | None:
        return self.by_name.get(name)

    def dests(self) -> set[str]:
        return {flag.dest for flag in self.by_name.values()}

    def names_for(self, dest: str) -> list[str]:
        return [name for name, flag in self.by_name.items() if flag.dest == dest]

    def default(self, dest: str) -> object:
        for flag in self.by_name.values():
            if flag.dest == dest and flag.deprecated_for is None:
                return flag.default
        return None

    def has(self, name: str) -> bool:
        return name in self.by_name


def _literal(node: ast.AST | None) -> object:
    if node is None:
        return None
    try:
        return ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return None


def _literal_str(node: ast.AST | None) -> str | None:
    """A literal string argument, or None (absent, or not a literal string)."""
    value = _literal(node)
    return value if isinstance(value, str) else None


def _keywords(call: ast.Call) -> dict[str, ast.AST]:
    return {kw.arg: kw.value for kw in call.keywords if kw.arg}


def _callee(call: ast.Call) -> str:
    func = call.func
    if isinstance(func, ast.Attribute):
        return func.attr
    if isinstance(func, ast.Name):
        return func.id
    return ""


def _action_takes_value(action: ast.AST | None) -> bool:
    """Mirror argparse: store_true-like actions take no value (SGLang's Deprecated*Action names
    say which argparse action they extend)."""
    if action is None:
        return True
    value = _literal(action)
    if isinstance(value, str):
        return value not in _NO_VALUE_ACTIONS
    name = action.attr if isinstance(action, ast.Attribute) else getattr(action, "id", "")
    lowered = name.lower()
    return not any(word in lowered for word in ("storetrue", "storefalse", "storeconst", "booleanoptional"))


def _annotation_kind(node: ast.AST) -> tuple[str, bool, tuple[str, ...] | None]:
    """(kind, is_list, literal choices) of the type inside `A[...]` (Optional unwrapped)."""
    text = ast.unparse(node)
    inner = node
    # Optional[X] / X | None
    if isinstance(inner, ast.Subscript) and ast.unparse(inner.value) in ("Optional", "typing.Optional"):
        inner = inner.slice
    elif isinstance(inner, ast.BinOp) and isinstance(inner.op, ast.BitOr):
        inner = inner.left if ast.unparse(inner.right) == "None" else inner.right
    head = ast.unparse(inner.value) if isinstance(inner, ast.Subscript) else ast.unparse(inner)
    if head in ("List", "list", "typing.List"):
        elem = ast.unparse(inner.slice) if isinstance(inner, ast.Subscript) else "str"
        return (elem if elem in ("int", "float") else "str"), True, None
    if head in ("Literal", "typing.Literal") and isinstance(inner, ast.Subscript):
        values = _literal(inner.slice)
        values = values if isinstance(values, tuple) else (values,)
        return "str", False, tuple(str(v) for v in values)
    for kind in ("bool", "int", "float", "str"):
        if head == kind:
            return kind, False, None
    return ("str" if "str" in text else "other"), False, None


def _choices(node: ast.AST | None, lists: dict[str, tuple[str, ...]]) -> tuple[tuple[str, ...] | None, bool]:
    """(choices, extensible): a literal list, or a module-level list named by the argument."""
    value = _literal(node)
    if isinstance(value, (list, tuple, set)):
        return tuple(str(c) for c in value), False
    if isinstance(node, ast.Name) and node.id in lists:
        return lists[node.id], True
    return None, False


def _literal_lists(tree: ast.Module) -> dict[str, tuple[str, ...]]:
    """Module-level `NAME = [...]` string lists (the `*_CHOICES` of `arg_groups/choices.py`)."""
    found = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            value = _literal(node.value)
            if isinstance(value, (list, tuple, set)) and value and all(isinstance(v, str) for v in value):
                found[node.targets[0].id] = tuple(sorted(value)) if isinstance(value, set) else tuple(value)
    return found


def _field_flags(cls: ast.ClassDef, lists: dict[str, tuple[str, ...]]) -> list[Flag]:
    """Flags derived from `A[T, ...]` fields, the way `add_cli_args_from_dataclass` derives them."""
    found = []
    for stmt in cls.body:
        if not (isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name)):
            continue
        ann = stmt.annotation
        if not (isinstance(ann, ast.Subscript) and ast.unparse(ann.value) in ("A", "Annotated", "typing.Annotated")):
            continue
        parts = ann.slice.elts if isinstance(ann.slice, ast.Tuple) else [ann.slice]
        if len(parts) < 2:
            continue
        meta: dict[str, ast.AST] = {}
        has_meta = False
        for part in parts[1:]:
            if isinstance(part, ast.Constant) and isinstance(part.value, str):
                has_meta = True
                break
            if isinstance(part, ast.Call) and _callee(part) == "Arg":
                meta = _keywords(part)
                has_meta = True
                break
        if not has_meta or _literal(meta.get("no_cli")) is True:
            continue
        name = stmt.target.id
        cli_name = _literal(meta.get("cli_name")) or "--" + name.replace("_", "-")
        aliases = _literal(meta.get("aliases"))
        alias_names = tuple(str(a) for a in aliases) if isinstance(aliases, (list, tuple)) else ()
        kind, is_list, literal_choices = _annotation_kind(parts[0])
        choices, extensible = _choices(meta.get("choices"), lists)
        nargs = _literal(meta.get("nargs"))
        if "action" in meta:
            takes_value = _action_takes_value(meta["action"])
        elif kind == "bool":
            takes_value = False
        else:
            takes_value = True
        if is_list and meta.get("type_parser") is None and nargs is None:
            nargs = "+"
        found.append(Flag(
            names=(str(cli_name), *alias_names),
            dest=name,
            takes_value=takes_value,
            nargs=nargs if isinstance(nargs, str) else None,
            kind=kind,
            # `Arg(fallback=...)` (0.5.20+): the value resolution falls back to when unset.
            default=_literal(stmt.value) if _literal(stmt.value) is not None else _literal(meta.get("fallback")),
            choices=choices if choices is not None else literal_choices,
            choices_extensible=extensible,
        ))
    return found


def _manual_flags(tree: ast.AST, lists: dict[str, tuple[str, ...]]) -> list[Flag]:
    """Flags registered by hand: `parser.add_argument("--name", ...)` with literal names."""
    found = []
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Call) and _callee(node) == "add_argument"):
            continue
        names = [a.value for a in node.args if isinstance(a, ast.Constant) and isinstance(a.value, str)]
        names = [n for n in names if n.startswith("-")]
        if not names:
            continue
        kw = _keywords(node)
        dest = _literal(kw.get("dest")) or names[0].lstrip("-").replace("-", "_")
        nargs = _literal(kw.get("nargs"))
        type_name = ast.unparse(kw["type"]) if "type" in kw else "str"
        choices, extensible = _choices(kw.get("choices"), lists)
        found.append(Flag(
            names=tuple(names),
            dest=str(dest),
            takes_value=_action_takes_value(kw.get("action")),
            nargs=nargs if isinstance(nargs, str) else None,
            kind=type_name if type_name in ("int", "float") else "str",
            default=_literal(kw.get("default")),
            choices=choices,
            choices_extensible=extensible,
            deprecated_for=_literal_str(kw.get("new_flag")),
        ))
    return found


def _parse(path: Path) -> ast.Module | None:
    try:
        return ast.parse(path.read_bytes(), filename=str(path))
    except (OSError, SyntaxError, ValueError):
        return None


def flag_table(package_dir: Path) -> FlagTable:
    """The flags of the release whose `sglang/` folder is `package_dir`."""
    srt = package_dir / "srt"
    sources = [srt / "server_args.py"]
    sources += sorted((srt / "arg_groups").rglob("*.py")) if (srt / "arg_groups").is_dir() else []
    stamp = tuple((str(p), p.stat().st_mtime_ns) for p in sources if p.is_file())
    return _flag_table(stamp)


@lru_cache(maxsize=16)
def _flag_table(sources: tuple[tuple[str, int], ...]) -> FlagTable:
    table = FlagTable()
    parsed = []
    lists: dict[str, tuple[str, ...]] = {}
    for name, _mtime in sources:
        path = Path(name)
        try:
            data = path.read_bytes()
        except OSError:
            continue
        has_fields, has_manual = b"A[" in data or b"Annotated[" in data, b"add_argument(" in data
        has_lists = b"CHOICES" in data
        if not (has_fields or has_manual or has_lists):
            continue  # cheap pre-filter; the parse below decides
        tree = _parse(path)
        if tree is None:
            continue
        if has_lists:
            lists.update(_literal_lists(tree))
        parsed.append((tree, has_fields, has_manual))
    manual: list[Flag] = []
    for tree, has_fields, has_manual in parsed:
        if has_fields:
            for node in tree.body:
                if isinstance(node, ast.ClassDef):
                    for flag in _field_flags(node, lists):
                        table.add(flag)
        if has_manual:
            manual += _manual_flags(tree, lists)
    for flag in manual:
        table.add(flag)
    return table
