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
from pathlib import Path

from patchkit.doctor.release_files import FolderFiles, ReleaseFiles

# Argument-parser actions that take no value on the command line.
_NO_VALUE_ACTIONS = ("store_true", "store_false", "store_const", "count", "help", "version")


@dataclass(frozen=True)
class Flag:
    """One command-line flag of a release."""

    names: tuple[str, ...]
    dest: str
    takes_value: bool = True
    nargs: str | None = None  # "+", "*", "?" or None (one value)
    kind: str = "str"  # str, int, float, bool, human_int or json (of each element, for a list)
    default: object = None
    choices: tuple[str, ...] | None = None
    deprecated_for: str | None = None  # the flag that replaces a deprecated spelling
    choices_extensible: bool = False  # choices from a module-level list that plugins may extend
    # What a flag that takes no value stores (store_true: True, store_false and BooleanOptionalAction's
    # `--no-X`: False; None: nothing, like SGLang's DeprecatedAction); with nargs "?", the value
    # given when the flag comes alone.
    const: object = True
    const_always: bool = False  # stores `const` whatever value is written (DeprecatedStoreConstAction)
    refusal: str | None = None  # the parser refuses the flag with this message (a retired flag)


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


def _action_name(action: ast.AST | None) -> str:
    """`"store_true"`, `argparse.BooleanOptionalAction` -> "booleanoptionalaction", or ""."""
    if action is None:
        return ""
    value = _literal(action)
    if isinstance(value, str):
        return value
    name = action.attr if isinstance(action, ast.Attribute) else getattr(action, "id", "")
    return str(name).lower()


@dataclass(frozen=True)
class _Behaviour:
    """What an argparse action does with its flag (see the `Flag` fields of the same names)."""

    takes_value: bool
    const: object
    const_always: bool = False
    refusal: str | None = None


def _message(node: ast.AST | None) -> str | None:
    """The text of a literal string, or the literal parts of an f-string or a concatenation."""
    if node is None:
        return None
    value = _literal(node)
    if isinstance(value, str):
        return value
    parts = [sub.value for sub in ast.walk(node) if isinstance(sub, ast.Constant) and isinstance(sub.value, str)]
    return "".join(parts) or None


def _behaviour(action: ast.AST | None, kw: dict[str, ast.AST], constants: dict[str, object]) -> _Behaviour:
    """Mirror argparse and SGLang's own actions (`argparse_actions.py`, the end of
    `server_args.py` before 0.5.20): store_true-like actions take no value unless registered with
    an explicit `nargs`; `DeprecatedStoreConstAction` writes its `const_value`; `DeprecatedAction`
    stores nothing and, given an `error_message`, makes the parser refuse the launch."""
    name = _action_name(action)
    no_value = name in _NO_VALUE_ACTIONS or any(
        word in name for word in ("storetrue", "storefalse", "storeconst", "booleanoptional", "deprecatedaction"))
    takes_value = not no_value
    if "nargs" in kw:  # e.g. DeprecatedStoreConstAction(nargs=None, choices=[...]): one value
        takes_value = _literal(kw["nargs"]) != 0
    const_node = kw.get("const_value", kw.get("const"))
    const = _literal(const_node)
    if isinstance(const_node, ast.Attribute) and const is None:  # `Backend.BREAKABLE`
        const = constants.get(ast.unparse(const_node))
    if name == "deprecatedaction":
        return _Behaviour(takes_value=takes_value, const=None,
                          refusal=_message(kw.get("error_message")) if "error_message" in kw else None)
    if "storeconst" in name or name == "store_const":
        return _Behaviour(takes_value=takes_value, const=const, const_always=takes_value)
    if not takes_value:
        return _Behaviour(takes_value=False, const=not ("storefalse" in name or name == "store_false"))
    return _Behaviour(takes_value=True, const=const)


def _negations(names: tuple[str, ...], action: ast.AST | None) -> tuple[str, ...]:
    """argparse.BooleanOptionalAction registers `--no-X` beside every `--X`."""
    if "booleanoptional" not in _action_name(action):
        return ()
    return tuple("--no-" + name[2:] for name in names if name.startswith("--"))


def _argparse_dest(names: list[str]) -> str:
    """argparse's own rule: the first long option, else the first option, without dashes."""
    longs = [n for n in names if n.startswith("--")]
    return (longs or names)[0].lstrip("-").replace("-", "_")


def _with_negations(flag: Flag, action: ast.AST | None) -> list[Flag]:
    negated = _negations(flag.names, action)
    if not negated:
        return [flag]
    return [flag, Flag(names=negated, dest=flag.dest, takes_value=False, kind="bool", default=flag.default,
                       deprecated_for=flag.deprecated_for, const=False)]


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
        numbers = [v for v in values if v is not None]
        kind = "int" if numbers and all(isinstance(v, int) and not isinstance(v, bool) for v in numbers) else "str"
        return kind, False, tuple(str(v) for v in values)
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


def _field_flags(cls: ast.ClassDef, lists: dict[str, tuple[str, ...]], constants: dict[str, object]) -> list[Flag]:
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
        if meta.get("type_parser") is not None:  # the parser function decides what the value becomes
            kind = _value_kind(ast.unparse(meta["type_parser"]), "str")
        choices, extensible = _choices(meta.get("choices"), lists)
        action_kwargs = meta.get("action_kwargs")
        extra = ({_literal_str(k) or "": v for k, v in zip(action_kwargs.keys, action_kwargs.values)}
                 if isinstance(action_kwargs, ast.Dict) else {})
        nargs = _literal(extra.get("nargs", meta.get("nargs")))
        if "action" in meta:
            behaviour = _behaviour(meta["action"], {**meta, **extra}, constants)
        else:
            behaviour = _Behaviour(takes_value=kind != "bool", const=True if kind == "bool" else _literal(meta.get("const")))
        if is_list and meta.get("type_parser") is None and nargs is None and "action" not in meta:
            nargs = "+"
        found += _with_negations(Flag(
            names=(str(cli_name), *alias_names),
            dest=name,
            takes_value=behaviour.takes_value,
            nargs=nargs if isinstance(nargs, str) else None,
            kind=kind,
            # `Arg(fallback=...)` (0.5.20+): the value resolution falls back to when unset.
            default=_literal(stmt.value) if _literal(stmt.value) is not None else _literal(meta.get("fallback")),
            choices=choices if choices is not None else literal_choices,
            choices_extensible=extensible,
            const=behaviour.const,
            const_always=behaviour.const_always,
            refusal=behaviour.refusal,
        ), meta.get("action"))
    return found


def imported_constants(tree: ast.Module, files: ReleaseFiles) -> dict[str, object]:
    """`{"Backend.BREAKABLE": "breakable"}` for the classes a module imports from sglang
    (`from sglang.srt.model_executor.cuda_graph_config import Backend`): the values a flag's
    `const_value=Backend.BREAKABLE` stores."""
    found: dict[str, object] = {}
    for node in ast.walk(tree):
        if not (isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("sglang.")):
            continue
        wanted = {alias.asname or alias.name: alias.name for alias in node.names}
        rel = "/".join(node.module.split(".")[1:]) + ".py"
        module = _parse_bytes(files.read(rel), rel)
        for cls in module.body if module is not None else []:
            if not (isinstance(cls, ast.ClassDef) and cls.name in wanted.values()):
                continue
            local = next(name for name, real in wanted.items() if real == cls.name)
            for stmt in cls.body:
                if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name):
                    value = _literal(stmt.value)
                    if value is not None:
                        found[f"{local}.{stmt.targets[0].id}"] = value
    return found


def class_defaults(tree: ast.AST, name: str = "ServerArgs") -> dict[str, object]:
    """The literal defaults of class `name`'s fields (`tp_size: int = 1`), for the
    `default=ServerArgs.tp_size` of hand-registered flags (0.5.10-0.5.13)."""
    found: dict[str, object] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef) and node.name == name:
            for stmt in node.body:
                if isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name) and stmt.value is not None:
                    found[stmt.target.id] = _literal(stmt.value)
    return found


def _default(node: ast.AST | None, defaults: dict[str, object]) -> object:
    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "ServerArgs":
        return defaults.get(node.attr)
    return _literal(node)


def _manual_flags(tree: ast.AST, lists: dict[str, tuple[str, ...]], renames: dict[str, str],
                  defaults: dict[str, object], constants: dict[str, object]) -> list[Flag]:
    """Flags registered by hand: `parser.add_argument("--name", ...)` with literal names; `dest`
    follows argparse, then `from_cli_args`'s renames (`renames`)."""
    found = []
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Call) and _callee(node) == "add_argument"):
            continue
        names = [a.value for a in node.args if isinstance(a, ast.Constant) and isinstance(a.value, str)]
        names = [n for n in names if n.startswith("-")]
        if not names:
            continue
        kw = _keywords(node)
        dest = _literal_str(kw.get("dest")) or _argparse_dest(names)
        nargs = _literal(kw.get("nargs"))
        type_name = ast.unparse(kw["type"]) if "type" in kw else "str"
        choices, extensible = _choices(kw.get("choices"), lists)
        behaviour = _behaviour(kw.get("action"), kw, constants)
        found += _with_negations(Flag(
            names=tuple(names),
            dest=renames.get(dest, dest),
            takes_value=behaviour.takes_value,
            nargs=nargs if isinstance(nargs, str) else None,
            kind=_value_kind(type_name),
            default=_default(kw.get("default"), defaults),
            choices=choices,
            choices_extensible=extensible,
            deprecated_for=_literal_str(kw.get("new_flag")),
            const=behaviour.const,
            const_always=behaviour.const_always,
            refusal=behaviour.refusal,
        ), kw.get("action"))
    return found


# SGLang's own `type=` functions whose results the budget reads, by the kind of value they return.
_TYPE_FUNCTION_KINDS = {"human_readable_int": "human_int", "json.loads": "json", "json_list_type": "json"}


def _value_kind(type_name: str, fallback: str = "str") -> str:
    """int, float, human_int (`human_readable_int`: "128k"), json or `fallback`, from a `type=`."""
    if type_name in ("int", "float"):
        return type_name
    return _TYPE_FUNCTION_KINDS.get(type_name, fallback)


def cli_renames(tree: ast.AST) -> dict[str, str]:
    """`ServerArgs.from_cli_args`'s `args.tp_size = args.tensor_parallel_size` lines (0.5.10-0.5.13):
    the parser's dest -> the field the value lands in."""
    found: dict[str, str] = {}
    for node in ast.walk(tree):
        if not (isinstance(node, ast.FunctionDef) and node.name == "from_cli_args"):
            continue
        for stmt in ast.walk(node):
            if (isinstance(stmt, ast.Assign) and len(stmt.targets) == 1
                    and isinstance(stmt.targets[0], ast.Attribute) and isinstance(stmt.value, ast.Attribute)
                    and isinstance(stmt.targets[0].value, ast.Name) and isinstance(stmt.value.value, ast.Name)):
                found[stmt.value.attr] = stmt.targets[0].attr
    return found


def flag_table(source: "Path | ReleaseFiles") -> FlagTable:
    """The flags of a release: its `sglang/` folder, or any `ReleaseFiles` (a wheel)."""
    files = FolderFiles(source) if isinstance(source, Path) else source
    rels = ["srt/server_args.py", *files.python_files("srt/arg_groups", recursive=True)]
    stamp = tuple((rel, files.identity(rel)) for rel in rels)
    return _flag_table(files, stamp)


_TABLES: dict[tuple[tuple[str, str], ...], FlagTable] = {}


def _flag_table(files: ReleaseFiles, stamp: tuple[tuple[str, str], ...]) -> FlagTable:
    """Kept per the sources' identities (a release does not change under one process)."""
    if stamp not in _TABLES:
        if len(_TABLES) >= 16:
            _TABLES.pop(next(iter(_TABLES)))
        _TABLES[stamp] = _build_table(files, [rel for rel, identity in stamp if identity != "absent"])
    return _TABLES[stamp]


def _parse_bytes(data: bytes | None, name: str) -> ast.Module | None:
    if data is None:
        return None
    try:
        return ast.parse(data, filename=name)
    except (SyntaxError, ValueError):
        return None


def _build_table(files: ReleaseFiles, rels: list[str]) -> FlagTable:
    table = FlagTable()
    parsed = []
    lists: dict[str, tuple[str, ...]] = {}
    for rel in rels:
        data = files.read(rel)
        if data is None:
            continue
        has_fields, has_manual = b"A[" in data or b"Annotated[" in data, b"add_argument(" in data
        has_lists = b"CHOICES" in data
        if not (has_fields or has_manual or has_lists):
            continue  # cheap pre-filter; the parse below decides
        tree = _parse_bytes(data, rel)
        if tree is None:
            continue
        if has_lists:
            lists.update(_literal_lists(tree))
        parsed.append((tree, has_fields, has_manual))
    renames: dict[str, str] = {}
    defaults: dict[str, object] = {}
    constants: dict[str, object] = {}
    for tree, _fields, _manual in parsed:
        constants.update(imported_constants(tree, files))
    for tree, _fields, has_manual_flags in parsed:
        if has_manual_flags:
            renames.update(cli_renames(tree))
            defaults.update(class_defaults(tree))
    manual: list[Flag] = []
    for tree, has_fields, has_manual in parsed:
        if has_fields:
            for node in tree.body:
                if isinstance(node, ast.ClassDef):
                    for flag in _field_flags(node, lists, constants):
                        table.add(flag)
        if has_manual:
            manual += _manual_flags(tree, lists, renames, defaults, constants)
    for flag in manual:
        table.add(flag)
    return table
