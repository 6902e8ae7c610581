"""A patch's identity: the digest the image labels carry, the manifests record and the state
file keeps per file, so that a tree patched by another patch (or another engine) reads `outdated`.

It follows what the patch does, not how its file is spelled (issue 22.2): for a patch module, the
sha256 of its normalised code (the parsed module with docstrings removed: comments and formatting
never reach the syntax tree) and of the normalised code of patchkit's modules that decide the bytes
a patch renders (`RENDERING`); for a diff patch, the sha256 of its diff file (the diff is its code).
Read without importing the patch (no libcst), so that `status` can tell an outdated tree from
digests alone; normalising costs a parse, so each file's result is kept in a small cache in
patchkit's home, keyed by the sha256 of the file's bytes, written once per command (`save`, which
`error_handler.run` calls after the command's work), not once per digest.
"""

from __future__ import annotations

import ast
import functools
import json
import re
from pathlib import Path

from patchkit.base.lean_typing import TYPE_CHECKING
from patchkit.engine import registry
from patchkit.base.home import home
from patchkit.base.errors import PatchkitError
from patchkit.base.util import atomic_write, read_regular, sha256

if TYPE_CHECKING:
    from patchkit.releases.manifest import Manifest

# The code of patchkit that decides the bytes a module patch renders, and so belongs to every such
# patch's identity (a change in it re-renders every tree: `outdated`), per module (its path in the
# package): the top-level definitions that do, or () for the whole module.
#   patch.py    the transform pass, its gating and the applied / skip decisions;
#   anchor.py   the classes a patch works in, and the SCOPE / PARTS / MARKS derived from them;
#   edits.py    the @edit callbacks and the block helpers that build the new nodes;
#   libcst_private.py the libcst names the pass reads its edits' matchers and gates through;
#   template.py snippets: the code a patch inserts, as filled in;
#   runtime_switch.py the SGLANG_PATCHKIT_DISABLE test a switchable patch's snippets hold;
#   matchers.py the shared matchers that decide where an edit lands;
#   skeleton.py the parsed part of a file and how the edited part is spliced back into its bytes;
#   view.py     the render path only: View (parse, skeleton, fold the stacked patches), render_file
#               and the helpers they call; not what opens a view, the state decision, planning or manifests.
# Not the rest: state, transaction, manifests, output and the commands decide what is written
# where and what is said, never the rendered bytes. libcst (whose code generation writes the
# bytes) is pinned to a tested range in pyproject.toml and not part of the digest: a libcst
# upgrade would otherwise make every tree and manifest out of date.
RENDERING: dict[str, tuple[str, ...]] = {
    "authoring/anchor.py": (),
    "authoring/edits.py": (),
    "authoring/libcst_private.py": (),
    "authoring/matchers.py": (),
    "authoring/patch.py": (),
    "authoring/runtime_switch.py": (),
    "engine/skeleton.py": (),
    "authoring/template.py": (),
    "engine/view.py": ("View", "Folded", "render_file", "transformed", "_with_default_indent", "_part"),
}
# The folders of the package (issue 34): where a module sits is not what it does, so a module's
# digest names it by its file name, and an import of `patchkit.<folder>.<module>` is normalised to
# `patchkit.<module>` (the module names are unique across these folders: tests/unit/engine/test_identity_normalised.py).
FOLDERS = ("authoring", "base", "cli", "diffs", "engine", "image", "releases", "runtime", "store")
_IN_FOLDER = re.compile(rf"^patchkit\.(?:{'|'.join(FOLDERS)})(?=\.|$)")
# Bumped when the normalisation changes (every digest changes with it).
_FORMAT = b"patchkit identity 2\n"
CACHE_FILE = "identity.json"
_CACHE_LIMIT = 1024 * 1024
_HEX = frozenset("0123456789abcdef")
_memo: dict[str, str] = {}
_unsaved: dict[Path, dict[str, str]] = {}  # the caches this process added digests to, by file


def digest(patch_id: str) -> str:
    """The identity of a patch, wherever its patch set lives (built-in, an entry point's
    package, a --patches folder)."""
    if patch_id not in registry.patch_ids():
        raise PatchkitError(f"patch {patch_id}: not a known patch (see `patchkit list`)")
    path = registry.source_file(patch_id)
    if path.suffix != ".py":
        return _raw_digest(path)  # a diff patch: its diff file as it is
    return sha256(_FORMAT + _code_digest(path).encode() + b"\n" + engine_digest().encode())


def digests(patch_ids: list[str] | tuple[str, ...]) -> dict[str, str]:
    return {pid: digest(pid) for pid in patch_ids}


def for_release(version: str, release: Manifest | None = None) -> dict[str, str]:
    """{patch id: digest} of the patches SGLang `version` gets patched with: the built-in ones its
    manifest (`release`, else the committed one) needs, and every patch of the other sets loaded
    now whose range holds the release. What a patched image's labels record (image/dockerfile) and
    what `verify --url` expects of a server on that release (runtime/server_report)."""
    from packaging.version import Version

    from patchkit.releases import manifest

    needed = {pid for pid, entry in (release or manifest.load(version)).patches.items() if entry.verdict == "applies"}
    wanted = Version(version)
    return {cls.ID: digest(cls.ID) for cls in registry.load_all()
            if (cls.ID in needed if registry.origin(cls.ID) == registry.BUILT_IN
                else cls.specifier().contains(wanted, prereleases=True))}


@functools.lru_cache(maxsize=None)
def engine_digest(package: Path = Path(__file__).parents[1]) -> str:
    """The normalised code of the `RENDERING` modules of this patchkit (or of the copy in `package`)."""
    return sha256("\n".join(f"{Path(path).name}={_code_digest(package / path, names)}"
                            for path, names in RENDERING.items()).encode())


def normalised(source: bytes, names: tuple[str, ...] = ()) -> str:
    """The code of a Python module with what never changes behaviour left out: comments and
    formatting (not in the syntax tree), docstrings, and the positions of nodes. Written field by
    field, leaving out empty and None fields, so that it reads the same on every Python version
    this patchkit supports (ast.dump's text differs between them)."""
    tree = _unfoldered(_without_docstrings(ast.parse(source)))
    if names:  # only these top-level definitions, in this order; one missing is a bug of RENDERING
        found = {node.name: node for node in tree.body if isinstance(node, (ast.ClassDef, ast.FunctionDef))}
        missing = [name for name in names if name not in found]
        if missing:
            raise ValueError(f"no top-level {', '.join(missing)}")
        return _dump([found[name] for name in names])
    return _dump(tree)


def _without_docstrings(tree: ast.Module) -> ast.Module:
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) \
                    and isinstance(body[0].value.value, str):
                node.body = body[1:]
    return tree


def _unfoldered(tree: ast.Module) -> ast.Module:
    """Imports of patchkit's modules as if the package had no folders (`FOLDERS`)."""
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            node.module = _IN_FOLDER.sub("patchkit", node.module)
        elif isinstance(node, ast.Import):
            for alias in node.names:
                alias.name = _IN_FOLDER.sub("patchkit", alias.name)
    return tree


def _dump(node: object) -> str:
    if isinstance(node, ast.AST):
        fields = [f"{name}={_dump(value)}" for name, value in ast.iter_fields(node) if value is not None and value != []]
        return f"{type(node).__name__}({','.join(fields)})"
    if isinstance(node, list):
        return f"[{','.join(_dump(item) for item in node)}]"
    return repr(node)


# --- the cache: sha256 of a file's bytes -> sha256 of its normalised code -------------------------

def _code_digest(path: Path, names: tuple[str, ...] = ()) -> str:
    data = _read(path)
    key = sha256(_FORMAT + " ".join(names).encode() + b"\n" + data)
    found = _memo.get(key)  # this process computed it already (whichever home it had then)
    if found is not None:
        return found
    cache = _cache()
    found = cache.get(key)
    if found is None:
        try:
            found = sha256(normalised(data, names).encode())
        except (SyntaxError, ValueError, RecursionError):
            if names:
                raise  # patchkit's own module: RENDERING names a definition it does not have
            found = sha256(data)  # not Python this interpreter parses: loading it says why, exit 2
        cache[key] = found
        _unsaved[_cache_path()] = cache
    _memo[key] = found
    return found


def _raw_digest(path: Path) -> str:
    return sha256(_read(path))


def _read(path: Path) -> bytes:
    try:
        return read_regular(path)
    except OSError as exc:
        raise PatchkitError(f"cannot read {path}: {exc.strerror}") from None


def _cache_path() -> Path:
    return home() / CACHE_FILE


@functools.lru_cache(maxsize=None)
def _loaded(path: Path) -> dict[str, str]:
    try:
        data = json.loads(read_regular(path, _CACHE_LIMIT))
    except (OSError, ValueError, RecursionError, PatchkitError):
        return {}  # absent, unreadable, damaged: it is only a cache
    if not isinstance(data, dict):
        return {}
    return {k: v for k, v in data.items() if _is_sha(k) and _is_sha(v)}


def _cache() -> dict[str, str]:
    return _loaded(_cache_path())


def save() -> None:
    """Write each cache this process added digests to: one atomic write per home, after the
    command's work (its own writes, a transaction's included, come first)."""
    while _unsaved:
        _save(*_unsaved.popitem())


def _save(path: Path, cache: dict[str, str]) -> None:
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write(path, json.dumps(cache, sort_keys=True).encode(), 0o644)
    except (OSError, PatchkitError):
        pass  # a cache that cannot be written costs time, never a result


def _is_sha(value: object) -> bool:
    return isinstance(value, str) and len(value) == 64 and set(value) <= _HEX
