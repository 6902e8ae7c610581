"""Whether a patch set re-made for release V works on V, beyond applying (issue 40): before `bump`
calls a diff `carries over` or `rebased`, and when `--continue` re-checks a resolution, each Python
file the set changes is

- compiled (a syntax error: `does not compile`, as `apply` refuses it);
- checked for names it uses that nothing defines: what pyflakes reports as an undefined name, an
  undefined local or an undefined name in `__all__` (module level and function bodies), each
  `import sglang.X` of a module V lacks, and each `from sglang... import NAME` whose module on V
  (the set applied) defines no NAME (itself or through its star imports of V's modules) and has no
  submodule of that name;
- where it is a model module, checked for a model class it registers that another module of V
  registers too, which stops SGLang's model registry (`model_registry`, read from V's files);
- and, where a Python that imports SGLang's modules is given (`bump --python PY`), imported on the
  CPU in that Python from a copy of V with the set applied: each changed module, and where the set
  changes a model module, SGLang's model registry (`sglang.srt.models.registry`, which imports
  every model module and stops at a model class two modules register).

Only what the set brings counts: each finding is compared with the same check on the files without
the change (V's own, or as the diffs under it leave them), so V's own warnings are never blamed on
a patch. A finding names the file and line (`breaks on V: ...`).

pyflakes does the name check: a well-kept checker that resolves Python's scopes (class bodies,
comprehensions, `global`, conditional imports, `__all__`) as the interpreter does; the standard
library's `symtable` gives scopes but not which names are bound before use, so it would mean
re-writing pyflakes' binding rules by hand.
"""

from __future__ import annotations

import ast
import functools
import json
import os
import shutil
import subprocess
import tempfile
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from patchkit.base.constants import PACKAGE

REGISTRY = "sglang.srt.models.registry"  # imports every model module; a duplicate EntryClass fails it
IMPORT_TIMEOUT = 600  # seconds for one Python's imports (the registry takes 25 s on 2 busy cores)
_UNDEFINED = ("UndefinedName", "UndefinedLocal", "UndefinedExport")  # pyflakes' message classes
_MARK = "patchkit-works-on "  # the import script's lines on stdout

Read = Callable[[str], Optional[bytes]]


@dataclass(frozen=True)
class Finding:
    file: str  # the package path of the changed file
    line: int
    detail: str  # "does not compile: ..." or "breaks on V: ..."


@dataclass(frozen=True)
class Imported:
    """The import check of a set: what broke, and what could not be checked (said, never hidden)."""

    findings: tuple[Finding, ...] = ()
    notes: tuple[str, ...] = ()


# --- static: compile, undefined names, imports of names a module does not define ----------------


def static(changed: Sequence[str], after: Read, before: Read, version: str,
           files: Callable[[], Sequence[str]]) -> list[Finding]:
    """The Python files of `changed` as `after` has them (the set applied), each against `before`
    (the same file without the change; None: a new file): compile errors first, else the names
    the change leaves undefined, the imports it adds of what V lacks, and the model classes it
    registers that another model module registers too (`model_registry`). `after` also answers for
    the modules an import names; `files`: V's package files and those the set adds (asked only for
    a module with no `.py` file, or where the change registers a model class anew)."""
    found: list[Finding] = []
    bound: dict[str, frozenset[str] | None] = {}  # a module's top-level names, read once per check
    trees: dict[str, tuple[ast.Module, ast.Module | None]] = {}
    for rel in changed:
        data = after(rel)
        if data is None or not rel.endswith(".py"):
            continue
        try:  # parsed once: the tree compiled (the compiler's own errors) and read by the checks below
            tree = ast.parse(data, rel)
            compile(tree, rel, "exec", dont_inherit=True)
        except SyntaxError as exc:
            found.append(Finding(rel, exc.lineno or 1, f"does not compile: {exc.msg}"))
            continue
        except ValueError as exc:  # a NUL byte
            found.append(Finding(rel, 1, f"does not compile: {exc}"))
            continue
        old = before(rel)
        try:
            old_tree = ast.parse(old, rel) if old is not None else None
        except (SyntaxError, ValueError):
            old_tree = None
        trees[rel] = (tree, old_tree)
        found += _new_undefined(rel, tree, old_tree, version)
        found += _new_missing_imports(rel, tree, old_tree, after, bound, version, files)
    found += _new_duplicates(trees, after, files, version)
    found += _removed_yet_imported(changed, after, before, bound, version, files)
    return found


def _removed_yet_imported(changed: Sequence[str], after: Read, before: Read, bound: dict[str, frozenset[str] | None],
                          version: str, files: Callable[[], Sequence[str]]) -> list[Finding]:
    """The names a change takes from its module's top level (`from M import NAME` no longer finds
    them) that another module of V, as the set leaves it, imports by name outside a guard: an
    ImportError when that module is imported (a helper renamed on V0 that a module new in V imports).
    Each at the changed file's first line (the name is gone from it)."""
    gone: dict[str, tuple[str, frozenset[str]]] = {}  # module -> (its file, the names it no longer binds)
    for rel in changed:
        module, data, old = module_of(rel), after(rel), before(rel)
        if module is None or data is None or old is None:
            continue
        new_top, old_top = _top_level(data), _top_level(old)
        if new_top is None or old_top is None or new_top.hook:
            continue
        names = _defined(module, after, bound, files) if new_top.stars else new_top.names
        if names is None or names == _MISSING:
            continue
        taken = old_top.names - names - {name for name in old_top.names if name.startswith("__")}
        if taken:
            gone[module] = (rel, frozenset(taken))
    if not gone:
        return []
    found = []
    tails = {module.rsplit(".", 1)[-1].encode() for module in gone}
    for name in files():
        if not name.endswith(".py"):
            continue
        data = after(name)
        if data is None or not any(tail in data for tail in tails):
            continue
        try:
            tree = ast.parse(data, name)
        except (SyntaxError, ValueError):
            continue
        for module, imported, line in _imports(name, tree):
            rel, taken = gone.get(module, ("", frozenset()))
            if imported in taken and name != rel:
                found.append(Finding(rel, 1, f"breaks on {version}: takes {imported} from {module}, which {name}:{line} "
                                             f"imports there (an ImportError when it is imported)"))
    return found


def _new_duplicates(trees: dict[str, tuple[ast.Module, ast.Module | None]], after: Read,
                    files: Callable[[], Sequence[str]], version: str) -> list[Finding]:
    """A model class a changed model module registers that another module of V (the set applied)
    registers too: the model registry's import raises (every server), found without importing."""
    from patchkit.engine import model_registry

    return [Finding(d.file, d.line, f"breaks on {version}: registers the model class {d.name}, which "
                                    f"{d.other_file}:{d.other_line} registers too: SGLang's model registry "
                                    f"raises \"{d.message} {d.name}\" when it is imported (every server)")
            for d in model_registry.duplicates(trees, after, files)]


def undefined(rel: str, tree: ast.Module) -> list[tuple[str, str, int]]:
    """(pyflakes' message class, the name, line) of each undefined name of a module."""
    from pyflakes import checker

    found = checker.Checker(tree, filename=rel).messages
    return [(type(m).__name__, str(m.message_args[0]), int(m.lineno)) for m in found
            if type(m).__name__ in _UNDEFINED]


_WORDS = {"UndefinedName": "undefined name", "UndefinedLocal": "local variable used before it is assigned",
          "UndefinedExport": "undefined name in __all__"}


def _new_undefined(rel: str, tree: ast.Module, old: ast.Module | None, version: str) -> list[Finding]:
    now = undefined(rel, tree)
    if not now:
        return []
    then = Counter((kind, name) for kind, name, _ in undefined(rel, old)) if old is not None else Counter()
    seen: Counter[tuple[str, str]] = Counter()
    found = []
    for kind, name, line in now:
        seen[(kind, name)] += 1
        if seen[(kind, name)] > then[(kind, name)]:  # more of them than without the change: new ones
            found.append(Finding(rel, line, f"breaks on {version}: {_WORDS[kind]} '{name}' (a NameError when it "
                                            "runs)"))
    return found


def _imports(rel: str, tree: ast.Module) -> list[tuple[str, str | None, int]]:
    """(module, name, line) of each `from sglang.X import NAME` of a module (relative ones made
    absolute; NAME "*" for a star import), and (module, None, line) of each `import sglang.X`."""
    found: list[tuple[str, str | None, int]] = []
    todo: list[ast.AST] = [tree]
    while todo:  # statements only (an import is one): expressions, most of a tree, are never visited
        node = todo.pop()
        if isinstance(node, ast.ImportFrom):
            module = _absolute(rel, node.module, node.level)
            if module is not None and module.split(".")[0] == PACKAGE:
                found += [(module, alias.name, node.lineno) for alias in node.names]
            continue
        if isinstance(node, ast.Import):
            found += [(alias.name, None, node.lineno) for alias in node.names if alias.name.split(".")[0] == PACKAGE]
            continue
        for block in ("body", "orelse", "finalbody", "handlers", "cases"):
            if block == "body" and _guarded(node):
                continue  # a missing module there is the code's own case, never an ImportError raised
            todo.extend(getattr(node, block, ()))
    return sorted(found, key=lambda item: item[2])


_CATCHES_IMPORT_ERROR = {"ImportError", "ModuleNotFoundError", "Exception", "BaseException"}


def _guarded(node: ast.AST) -> bool:
    """Whether an import in `node`'s body raises nothing when its module is missing: a `try:`
    whose handler catches ImportError (or a bare `except:`), an `if TYPE_CHECKING:` (never run)."""
    if isinstance(node, ast.Try) or type(node).__name__ == "TryStar":
        def names(caught: ast.expr | None) -> set[str]:
            if caught is None:
                return {"BaseException"}
            if isinstance(caught, ast.Tuple):
                return {name for item in caught.elts for name in names(item)}
            return {caught.attr if isinstance(caught, ast.Attribute) else getattr(caught, "id", "")}

        return any(names(handler.type) & _CATCHES_IMPORT_ERROR for handler in getattr(node, "handlers", ()))
    if isinstance(node, ast.If):
        test = node.test
        return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
            isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")
    return False


def _new_missing_imports(rel: str, tree: ast.Module, old: ast.Module | None, read: Read,
                         bound: dict[str, frozenset[str] | None], version: str,
                         files: Callable[[], Sequence[str]]) -> list[Finding]:
    """The imports the change adds (an import the file without it has too fares the same on V) of a
    module V does not have (`import sglang.X`, `from sglang.X import ...`), or of a name a module on
    V neither defines (itself, or through its star imports of V's modules) nor has as a submodule.
    A submodule makes its folder a package, `__init__.py` or not (a namespace package:
    sglang/srt/weight_sync/)."""
    then = {(module, name) for module, name, _ in _imports(rel, old)} if old is not None else set()
    found = []
    for module, name, line in _imports(rel, tree):
        if (module, name) in then:
            continue
        path = module.replace(".", "/")
        if name is None:  # `import sglang.X.Y`: each package on the way is one if the module is there
            if read(path + ".py") is None and read(path + "/__init__.py") is None and not _elsewhere(path, files):
                found.append(Finding(rel, line, f"breaks on {version}: `import {module}`: {version} has no module "
                                                 f"{module} (an ImportError)"))
            continue
        if name != "*" and (read(f"{path}/{name}.py") is not None or read(f"{path}/{name}/__init__.py") is not None):
            continue
        names = _defined(module, read, bound, files)
        if names == _MISSING:
            found.append(Finding(rel, line, f"breaks on {version}: `from {module} import {name}`: {version} has no "
                                             f"module {module} (an ImportError)"))
        elif names is not None and name != "*" and name not in names:
            found.append(Finding(rel, line, f"breaks on {version}: `from {module} import {name}`: {module} defines "
                                             f"no {name} on {version} (an ImportError)"))
    return found


_MISSING = frozenset({"\0missing"})  # `_defined` of a module V does not have


def _defined(module: str, read: Read, bound: dict[str, frozenset[str] | None],
             files: Callable[[], Sequence[str]]) -> frozenset[str] | None:
    """The names module `module` of V binds at its top level, its star imports of V's modules
    followed (their `__all__`, else their names without a leading underscore); none for a folder
    without `__init__.py` (a namespace package: only its submodules); _MISSING where V has no such
    module; None where it cannot be told (a compiled module, a module `__getattr__`, a star import from
    outside the package, an `__all__` not written as a list of strings, a module that does not parse,
    a cycle of star imports)."""
    if module in bound:
        return bound[module]
    path = module.replace(".", "/")
    source, file = read(path + ".py"), path + ".py"
    if source is None:
        source, file = read(path + "/__init__.py"), path + "/__init__.py"
    if source is None:
        kind = _elsewhere(path, files)
        bound[module] = frozenset() if kind == "namespace" else None if kind == "extension" else _MISSING
        return bound[module]
    bound[module] = None  # while its star imports are followed: a cycle is "cannot be told"
    top = _top_level(source)
    names: frozenset[str] | None = None
    if top is not None and not top.hook:
        names = top.names
        for star, level in top.stars:
            other = _absolute(file, star, level)
            inner = _defined(other, read, bound, files) if other is not None and other.split(".")[0] == PACKAGE else None
            public = _public(other, read) if inner not in (None, _MISSING) and other is not None else None
            if inner is None or inner == _MISSING or public is None:
                names = None
                break
            names = names | (public if public is not _ALL_PUBLIC else frozenset(n for n in inner if n[:1] != "_"))
    bound[module] = names
    return names


def _elsewhere(path: str, files: Callable[[], Sequence[str]]) -> str | None:
    """A module of V with no `.py` file: "namespace" (a folder of modules without `__init__.py`),
    "extension" (a compiled module: sglang/srt/server/_core.cpython-311-x86_64-linux-gnu.so, whose
    names cannot be read), else None (no such module)."""
    for name in files():
        if name.startswith(path + "/"):
            return "namespace"
        if name.startswith(path + ".") and name.endswith((".so", ".pyd")) and "/" not in name[len(path):]:
            return "extension"
    return None


_ALL_PUBLIC = frozenset({"\0public"})  # `_public` of a module without `__all__`: its names without "_"


def _public(module: str, read: Read) -> frozenset[str] | None:
    """What `from module import *` binds: its literal `__all__`, or _ALL_PUBLIC where it has none."""
    path = module.replace(".", "/")
    source = read(path + ".py")
    if source is None:
        source = read(path + "/__init__.py")
    top = _top_level(source) if source is not None else None
    if top is None or top.all_unknown:
        return None
    return _ALL_PUBLIC if top.exported is None else top.exported


@dataclass(frozen=True)
class _Top:
    names: frozenset[str]  # bound at the module's top level (in `if`/`try`/`with`/`for` blocks too)
    stars: tuple[tuple[str | None, int], ...]  # (module, level) of each `from M import *`
    exported: frozenset[str] | None  # a literal `__all__` (with its `+=`), None where there is none
    hook: bool  # a module `__getattr__`: any name may be there
    all_unknown: bool  # an `__all__` that is not a literal list of strings


@functools.lru_cache(maxsize=256)
def _top_level(data: bytes) -> _Top | None:
    """What a module binds at its top level (None: it does not parse). Cached by the bytes: V's
    modules (utils/common.py, 4,000 lines) are parsed once per process, not once per diff."""
    try:
        tree = ast.parse(data)
    except (SyntaxError, ValueError):
        return None
    names: set[str] = set()
    stars: list[tuple[str | None, int]] = []
    exported: set[str] | None = None
    hook = all_unknown = False
    todo: list[ast.stmt] = list(tree.body)
    while todo:  # in source order (an `__all__ +=` after its `__all__ =`), blocks where they stand
        stmt = todo.pop(0)
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            hook = hook or stmt.name == "__getattr__"
            names.add(stmt.name)
            continue
        if isinstance(stmt, ast.ImportFrom) and any(alias.name == "*" for alias in stmt.names):
            stars.append((stmt.module, stmt.level))
            continue
        if isinstance(stmt, (ast.Import, ast.ImportFrom)):
            names.update((alias.asname or alias.name).split(".")[0] for alias in stmt.names)
            continue
        targets: list[ast.AST] = []
        if isinstance(stmt, ast.Assign):
            targets = list(stmt.targets)
        elif isinstance(stmt, (ast.AnnAssign, ast.AugAssign, ast.For, ast.AsyncFor)):
            targets = [stmt.target]
        elif isinstance(stmt, (ast.With, ast.AsyncWith)):
            targets = [item.optional_vars for item in stmt.items if item.optional_vars is not None]
        elif isinstance(stmt, (ast.If, ast.While)):
            targets = [node for node in ast.walk(stmt.test) if isinstance(node, ast.NamedExpr)]
        if any(isinstance(target, ast.Name) and target.id == "__all__" for target in targets):
            value = getattr(stmt, "value", None)
            strings = _strings(value) if value is not None else None
            if strings is None:
                all_unknown = True
            else:
                exported = (exported or set()) | strings if isinstance(stmt, ast.AugAssign) else set(strings)
        for target in targets:
            names.update(node.id for node in ast.walk(target) if isinstance(node, ast.Name))
        inner: list[ast.stmt] = []
        for block in ("body", "orelse", "finalbody", "handlers"):
            for child in getattr(stmt, block, ()):
                if isinstance(child, ast.ExceptHandler):
                    names.update([child.name] if child.name else [])
                    inner.extend(child.body)
                else:
                    inner.append(child)
        todo[:0] = inner
    return _Top(frozenset(names), tuple(stars), None if exported is None else frozenset(exported), hook, all_unknown)


def _strings(value: ast.expr) -> set[str] | None:
    """The strings of a literal list or tuple of them (None: anything else)."""
    if isinstance(value, (ast.List, ast.Tuple)) and all(
            isinstance(item, ast.Constant) and isinstance(item.value, str) for item in value.elts):
        return {str(item.value) for item in value.elts if isinstance(item, ast.Constant)}
    return None


def _absolute(rel: str, module: str | None, level: int) -> str | None:
    if not level:
        return module
    parts = rel.removesuffix(".py").split("/")[:-1]  # the file's package (a package's __init__: itself)
    if level - 1 > len(parts):
        return None
    base = parts[:len(parts) - (level - 1)]
    return ".".join([*base, *([module] if module else [])])


# --- import: the set applied to a copy of V, imported in the given Python ------------------------

# Run by the given Python: imports each module named, one line per start and per outcome, so that a
# Python that dies in the middle still says which module it was importing.
_SCRIPT = """
import importlib, json, sys, traceback
for name in json.loads(sys.argv[1]):
    print(%(mark)r + json.dumps({"module": name}), flush=True)
    try:
        importlib.import_module(name)
    except BaseException as exc:
        frames = [[f.filename, f.lineno] for f in traceback.extract_tb(exc.__traceback__)]
        text = (type(exc).__name__ + ": " + str(exc)).strip()
        print(%(mark)r + json.dumps({"module": name, "error": text.splitlines()[0] if text else "", "frames": frames}),
              flush=True)
    else:
        print(%(mark)r + json.dumps({"module": name, "ok": True}), flush=True)
""" % {"mark": _MARK}


def module_of(rel: str) -> str | None:
    """The module a package file is imported as (`sglang/srt/x/__init__.py` -> `sglang.srt.x`)."""
    if not rel.endswith(".py") or rel.split("/")[0] != PACKAGE:
        return None
    parts = rel.removesuffix(".py").split("/")
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts) if all(part.isidentifier() for part in parts) else None


def interpreter(python: str) -> str:
    """`--python` as a path that works from any folder (a name on PATH, a relative path)."""
    if "/" not in python:
        return shutil.which(python) or python
    return str(Path(python).absolute())


def imports(python: str, version: str, files: Sequence[str], read: Read, changed: Mapping[str, bytes | None],
            progress: Callable[[str], None], timeout: float = IMPORT_TIMEOUT) -> Imported:
    """Each changed module of the set (and the model registry, where it changes a model module)
    imported by `python` on the CPU from a copy of V (`files`, `read`) with `changed` written over
    it (None: deleted); a module that fails is imported from V's own copy too, and only a failure
    V's own files do not have is a finding (on the changed file the traceback passes through, else
    where the error's names were added)."""
    modules = list(dict.fromkeys(m for rel, data in changed.items() if data is not None
                                 for m in [module_of(rel)] if m is not None))
    models = REGISTRY.rsplit(".", 1)[0].replace(".", "/") + "/"
    if any(rel.startswith(models) for rel in changed) and read(REGISTRY.replace(".", "/") + ".py") is not None \
            and REGISTRY not in modules:  # a model module's EntryClass: a duplicate stops the registry
        modules.append(REGISTRY)
    if not modules:
        return Imported()
    with tempfile.TemporaryDirectory(prefix="patchkit-works-on-") as tmp:
        own, patched = Path(tmp) / "v", Path(tmp) / "set"
        for rel in files:
            data = read(rel)
            if data is not None:
                (own / rel).parent.mkdir(parents=True, exist_ok=True)
                (own / rel).write_bytes(data)
        shutil.copytree(own, patched, copy_function=_link)
        for rel, data in changed.items():
            (patched / rel).unlink(missing_ok=True)  # a link to V's copy: replaced, never written into
            if data is not None:
                (patched / rel).parent.mkdir(parents=True, exist_ok=True)
                (patched / rel).write_bytes(data)
        progress(f"importing {len(modules)} module(s) of the set on SGLang {version} with {python} (on the CPU)")
        failed = _run(python, patched, modules, timeout)
        if not failed:
            return Imported()
        progress(f"importing {len(failed)} of them from SGLang {version}'s own files, to compare")
        theirs = _run(python, own, list(failed), timeout)
        findings: list[Finding] = []
        notes = []
        for module, (error, frames) in failed.items():
            error = error.replace(str(patched) + "/", "")
            own_error = theirs.get(module, ("", []))[0].replace(str(own) + "/", "")
            if module in theirs and own_error == error:
                notes.append(f"not checked by importing {module} on {version}: it fails on {version}'s own files "
                             f"too in {python} ({error})")
                continue
            detail = f"breaks on {version}: importing {module} raises {error}"
            findings += [Finding(rel, line, detail) for rel, line in _where(frames, own, patched, changed, error)]
    return Imported(tuple(findings), tuple(notes))


def _link(src: str, dst: str) -> None:
    try:
        os.link(src, dst)
    except OSError:
        shutil.copy2(src, dst)


def _run(python: str, root: Path, modules: list[str], timeout: float) -> dict[str, tuple[str, list[list[object]]]]:
    """{module: (error, traceback frames)} of the modules that did not import from `root`."""
    env = {key: value for key, value in os.environ.items() if key not in ("PYTHONPATH", "PYTHONHOME")}
    env.update(PYTHONPATH=str(root), CUDA_VISIBLE_DEVICES="", PYTHONDONTWRITEBYTECODE="1", PYTHONWARNINGS="ignore")
    ended = ""
    try:
        done = subprocess.run([python, "-c", _SCRIPT, json.dumps(modules)], capture_output=True, env=env,
                              cwd=root.parent, timeout=timeout, stdin=subprocess.DEVNULL)
        out = done.stdout.decode(errors="replace")
        if done.returncode:
            tail = done.stderr.decode(errors="replace").strip().splitlines()
            ended = f"the Python ended with status {done.returncode}" + (f": {tail[-1]}" if tail else "")
    except subprocess.TimeoutExpired as exc:
        raw = exc.stdout or b""
        out = raw.decode(errors="replace") if isinstance(raw, bytes) else raw
        ended = f"not finished in {timeout:g} s"
    except OSError as exc:
        return {module: (f"{python} cannot be run ({exc.strerror or exc})", []) for module in modules}
    failed: dict[str, tuple[str, list[list[object]]]] = {}
    done_ok: set[str] = set()
    for line in out.splitlines():
        if not line.startswith(_MARK):
            continue
        item = json.loads(line[len(_MARK):])
        if "error" in item:
            failed[item["module"]] = (item["error"], item["frames"])
        elif item.get("ok"):
            done_ok.add(item["module"])
    for module in modules:
        if module not in failed and module not in done_ok:  # the one it died in, and those never reached
            failed[module] = (ended or "the Python ended before importing it", [])
    return failed


def _where(frames: list[list[object]], own: Path, root: Path, changed: Mapping[str, bytes | None],
           error: str) -> list[tuple[str, int]]:
    """The changed file and line a failure is on: the deepest frame of the traceback in a changed
    file; else the first line the set added that holds a name the error's message names (a model
    class two modules register), a name shaped as code (`Qwen3_5MoeForCausalLM`: an underscore, a
    digit or an inner capital) sought in every changed file before a plain word ("model", which
    any added comment may hold); else the first changed Python file."""
    for filename, line in reversed(frames):
        try:
            rel = Path(str(filename)).relative_to(root).as_posix()
        except ValueError:
            continue
        if rel in changed:
            return [(rel, int(str(line)))]
    import re

    words = re.findall(r"[A-Za-z_][A-Za-z0-9_]{3,}", error.split(": ", 1)[-1])
    named = [w for w in words if re.search(r"[_0-9]|[a-z][A-Z]", w)]
    added: list[tuple[str, int, bytes]] = []
    for rel, data in changed.items():
        if data is None or not rel.endswith(".py"):
            continue
        old = set((own / rel).read_bytes().splitlines()) if (own / rel).is_file() else set()
        added += [(rel, number, text) for number, text in enumerate(data.splitlines(), 1) if text not in old]
    for chosen in (named, [w for w in words if w not in named]):
        for rel, number, text in added:
            if any(re.search(rb"\b" + w.encode() + rb"\b", text) for w in chosen):
                return [(rel, number)]
    first = next((rel for rel, data in changed.items() if data is not None and rel.endswith(".py")), None)
    return [(first, 1)] if first else []
