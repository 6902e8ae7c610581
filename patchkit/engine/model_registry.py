"""SGLang's model registry read from its files, never imported (issue 40 item 2): which modules it
imports, the model classes each one registers, and a class registered twice, which stops the
registry's import (every server) with "Duplicated model implementation for NAME".

What the registry does is read from V's own `sglang/srt/models/registry.py` (the same in every
release 0.5.10-0.5.23 in what matters here; `rule`): the packages it registers (the string given to
`register`/`import_model_classes`: `sglang.srt.models`), their modules as `pkgutil.iter_modules`
lists them (the folder's own `*.py` files but `__init__.py`, never a sub-package's; `walk_packages`
would take those too), each module's `EntryClass` (one class, or a list of them) keyed by the
class's `__name__`, and the check it raises on a name already taken (an `assert`/`raise` whose
message is read too). A registry that reads no `EntryClass`, or raises nothing on a duplicate,
gets no check. Modules SGLANG_DISABLED_MODEL_ARCHS skips at run time, and a module whose import
fails (the registry skips it with a warning), are taken as registering: a duplicate there is one
on the servers that import it.

Only the files a set changes are parsed whole; V's other model modules (over 200) are read for the
names the set newly registers, and parsed only where a name is in their bytes.
"""

from __future__ import annotations

import ast
import functools
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Optional

from patchkit.base.constants import PACKAGE

REGISTRY_FILE = f"{PACKAGE}/srt/models/registry.py"

Read = Callable[[str], Optional[bytes]]


@dataclass(frozen=True)
class Rule:
    """How a release's model registry collects its model classes."""

    packages: tuple[str, ...]  # the folders whose modules it imports ("sglang/srt/models")
    attribute: str  # what it reads of each module ("EntryClass")
    message: str  # the words of its error on a duplicate ("Duplicated model implementation for")
    nested: bool  # sub-packages' modules too (walk_packages), or only each folder's own (iter_modules)

    def imports(self, rel: str) -> bool:
        """Whether the registry imports the module at `rel` (a package path)."""
        if not rel.endswith(".py") or rel.rsplit("/", 1)[-1] == "__init__.py":
            return False
        for folder in self.packages:
            if rel.startswith(folder + "/"):
                inner = rel[len(folder) + 1:].removesuffix(".py").split("/")
                return all(part.isidentifier() for part in inner) and (self.nested or len(inner) == 1)
        return False


@dataclass(frozen=True)
class Duplicate:
    """A model class a changed file registers that another registration of the set applied on V
    takes too: the registry's import raises `message NAME`."""

    file: str
    line: int
    name: str
    other_file: str
    other_line: int
    message: str


@functools.lru_cache(maxsize=8)
def rule(source: bytes | None) -> Rule | None:
    """The registry's rule read from its source (None: no registry, or one that reads no model
    attribute or raises nothing on a name taken twice)."""
    if source is None:
        return None
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return None
    packages: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            for arg in node.args:
                if isinstance(arg, ast.Constant) and isinstance(arg.value, str) and \
                        arg.value.split(".")[0] == PACKAGE and all(p.isidentifier() for p in arg.value.split(".")):
                    packages.append(arg.value.replace(".", "/"))
    nested = any(isinstance(node, (ast.Attribute, ast.Name)) and "walk_packages" in (
        getattr(node, "attr", None), getattr(node, "id", None)) for node in ast.walk(tree))
    for function in ast.walk(tree):
        if not isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        read = _attribute_read(function)
        message = _duplicate_message(function)
        if read and message:
            return Rule(tuple(dict.fromkeys(packages)), read, message, nested) if packages else None
    return None


def _attribute_read(function: ast.AST) -> str | None:
    """The module attribute the registry's collecting function asks for (`hasattr(module,
    "EntryClass")`, or `getattr(module, "EntryClass", None)`)."""
    for node in ast.walk(function):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ("hasattr", "getattr") \
                and len(node.args) >= 2 and isinstance(node.args[1], ast.Constant) and isinstance(node.args[1].value, str):
            return node.args[1].value
    return None


def _duplicate_message(function: ast.AST) -> str | None:
    """The literal start of the message of an `assert NAME not in ...` (or a `raise` under an `if
    NAME in ...`) in the collecting function: what the registry says of a model class taken twice."""
    for node in ast.walk(function):
        test, message = None, None
        if isinstance(node, ast.Assert):
            test, message = node.test, node.msg
        elif isinstance(node, ast.If) and node.body and isinstance(node.body[0], ast.Raise):
            raised = node.body[0].exc
            test = node.test
            message = raised.args[0] if isinstance(raised, ast.Call) and raised.args else None
        if not isinstance(test, ast.Compare) or not any(isinstance(op, (ast.In, ast.NotIn)) for op in test.ops):
            continue
        words = _literal_start(message)
        if words:
            return words
    return None


def _literal_start(message: ast.expr | None) -> str:
    if isinstance(message, ast.Constant) and isinstance(message.value, str):
        return message.value.strip()
    if isinstance(message, ast.JoinedStr):
        head = []
        for part in message.values:
            if not (isinstance(part, ast.Constant) and isinstance(part.value, str)):
                break
            head.append(part.value)
        return "".join(head).strip()
    return ""


def registrations(tree: ast.Module, attribute: str) -> list[tuple[str, int]]:
    """(the class's `__name__`, line) of each model class a module registers: its top-level
    `EntryClass = X` or `= [X, Y]` (the last one, with any `+=`/`.append`/`.extend` after it); a
    name is the class's own where the module defines it, the imported one where it imports it
    under another name (`from m import A as B`), followed through a plain `B = A`."""
    classes: set[str] = set()
    aliases: dict[str, str] = {}
    found: list[tuple[str, int]] = []
    items: list[ast.expr] = []
    todo: list[ast.stmt] = list(tree.body)
    order: list[ast.stmt] = []
    while todo:  # the module's top level in source order, `if`/`try` blocks included
        stmt = todo.pop(0)
        order.append(stmt)
        inner: list[ast.stmt] = []
        if isinstance(stmt, (ast.If, ast.Try)) or type(stmt).__name__ == "TryStar":
            inner = [*getattr(stmt, "body", ()), *[s for h in getattr(stmt, "handlers", ()) for s in h.body],
                     *getattr(stmt, "orelse", ()), *getattr(stmt, "finalbody", ())]
        todo[:0] = inner
    for stmt in order:
        if isinstance(stmt, ast.ClassDef):
            classes.add(stmt.name)
        elif isinstance(stmt, ast.ImportFrom):
            aliases.update({alias.asname: alias.name for alias in stmt.names if alias.asname})
        elif isinstance(stmt, ast.Assign):
            if any(isinstance(t, ast.Name) and t.id == attribute for t in stmt.targets):
                items = _elements(stmt.value)
            elif isinstance(stmt.value, ast.Name):
                aliases.update({t.id: stmt.value.id for t in stmt.targets if isinstance(t, ast.Name)})
        elif isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name) and stmt.target.id == attribute \
                and stmt.value is not None:
            items = _elements(stmt.value)
        elif isinstance(stmt, ast.AugAssign) and isinstance(stmt.target, ast.Name) and stmt.target.id == attribute:
            items = items + _elements(stmt.value)
        elif isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call):
            call = stmt.value.func
            if isinstance(call, ast.Attribute) and isinstance(call.value, ast.Name) and call.value.id == attribute:
                if call.attr == "append":
                    items = items + list(stmt.value.args[:1])
                elif call.attr == "extend" and stmt.value.args:
                    items = items + _elements(stmt.value.args[0])
    for item in items:
        if isinstance(item, ast.Attribute):
            found.append((item.attr, item.lineno))
        elif isinstance(item, ast.Name):
            name, seen = item.id, set()
            while name not in classes and name in aliases and name not in seen:
                seen.add(name)
                name = aliases[name]
            found.append((name, item.lineno))
    return found


def _elements(value: ast.expr) -> list[ast.expr]:
    return list(value.elts) if isinstance(value, (ast.List, ast.Tuple)) else [value]


def duplicates(changed: Mapping[str, tuple[ast.Module, ast.Module | None]], after: Read,
               files: Callable[[], Sequence[str]]) -> list[Duplicate]:
    """The model classes the changed modules (`changed`: each one's tree with the set applied and
    without it, None for a new file) register anew that some other registration of the set applied
    on V (`after`; `files`: V's package files and the set's, asked only then) takes too, where V without the change
    does not already register that name as often: the registry's import would stop at them."""
    registry = rule(after(REGISTRY_FILE))
    if registry is None:
        return []
    ours = {rel: trees for rel, trees in changed.items() if registry.imports(rel)}
    new: list[tuple[str, str, int]] = []
    before: Counter[str] = Counter()  # the names the changed modules register without the change
    for rel, (tree, old) in ours.items():
        then = Counter(name for name, _ in registrations(old, registry.attribute)) if old is not None else Counter()
        before.update(then)
        seen: Counter[str] = Counter()
        for name, line in registrations(tree, registry.attribute):
            seen[name] += 1
            if seen[name] > then[name]:
                new.append((rel, name, line))
    if not new:
        return []
    names = {name for _, name, _ in new}
    taken: dict[str, list[tuple[str, int]]] = {name: [] for name in names}  # with the set applied
    for rel in sorted({*files(), *ours}):
        if not registry.imports(rel):
            continue
        if rel in ours:
            found = registrations(ours[rel][0], registry.attribute)
        else:
            data = after(rel)
            if data is None or not any(name.encode() in data for name in names):
                continue  # a module that does not hold the name: parsed never (over 200 of them)
            found = _parsed_registrations(data, registry.attribute)
            before.update(name for name, _ in found)  # unchanged: the same without the change
        for name, line in found:
            if name in taken:
                taken[name].append((rel, line))
    out = []
    for rel, name, line in new:
        places = taken[name]
        if len(places) < 2 or len(places) <= before[name]:
            continue
        others = sorted((place for place in places if place != (rel, line)),
                        key=lambda place: (place[0] in ours, place))  # V's own registration first
        out.append(Duplicate(rel, line, name, others[0][0], others[0][1], registry.message))
    return out


@functools.lru_cache(maxsize=64)
def _parsed_registrations(data: bytes, attribute: str) -> list[tuple[str, int]]:
    """`registrations` of a module's bytes (V's own files: parsed once per process)."""
    try:
        return registrations(ast.parse(data), attribute)
    except (SyntaxError, ValueError):
        return []
