"""The patches under `patches/`: their ids (without importing them) and their classes."""

from __future__ import annotations

import importlib
import inspect
import pkgutil

from patchkit.errors import PatchkitError, UsageError

PATCHES_PACKAGE = "patchkit.patches"


def _module_names() -> list[str]:
    package = importlib.import_module(PATCHES_PACKAGE)
    return sorted(info.name for info in pkgutil.iter_modules(package.__path__) if not info.name.startswith("_"))


def patch_ids() -> list[str]:
    """Every patch id, derived from the module file names: cheap, imports no patch (no libcst)."""
    return [name.replace("_", "-") for name in _module_names()]


def load_all() -> list[type]:
    """Every Patch class, in id order (see `stack` for the order on a shared file)."""
    from patchkit.patch import Patch

    found = []
    for name in _module_names():
        module = importlib.import_module(f"{PATCHES_PACKAGE}.{name}")
        classes = [
            obj for obj in vars(module).values()
            if inspect.isclass(obj) and issubclass(obj, Patch) and obj is not Patch and obj.__module__ == module.__name__
        ]
        if len(classes) != 1:
            raise PatchkitError(f"patches/{name}.py must define exactly one Patch class, found {len(classes)}")
        patch_cls = classes[0]
        if patch_cls.ID != name.replace("_", "-"):
            raise PatchkitError(f"patches/{name}.py declares id {patch_cls.ID!r}; the file name says {name.replace('_', '-')!r}")
        found.append(patch_cls)
    return found


def select(ids: list[str], only: tuple[str, ...] = (), skip: tuple[str, ...] = ()) -> list[str]:
    """The ids chosen by --only / --skip, in registry order; an unknown id is a usage error."""
    for wanted in (*only, *skip):
        if wanted not in ids:
            raise UsageError(f"unknown patch id {wanted!r}; known: {', '.join(ids)} (see `patchkit list`)")
    chosen = [pid for pid in ids if not only or pid in only]
    return [pid for pid in chosen if pid not in skip]


def stack(ids: list[str], classes: dict[str, type]) -> list[str]:
    """`ids` (patches applied to one file) in their declared stacking order: a patch comes
    after every patch it names in `STACK_AFTER`. Patches sharing a file must declare their
    order (`unordered_pairs` finds those that do not); the id order only keeps the result
    stable for patches that never share a file."""
    pending = sorted(ids)
    ordered: list[str] = []
    while pending:
        ready = [pid for pid in pending if not any(dep in pending for dep in classes[pid].STACK_AFTER)]
        if not ready:
            raise PatchkitError(f"patches {', '.join(pending)} declare a cycle in STACK_AFTER")
        ordered.append(ready[0])
        pending.remove(ready[0])
    return ordered


def unordered_pairs(classes: list[type]) -> list[tuple[str, str, str]]:
    """(file, id, id) for each pair of patches that target the same file without a declared
    order between them (directly or through others)."""
    by_id = {cls.ID: cls for cls in classes}

    def before(a: str, b: str) -> bool:  # is a declared (transitively) before b?
        seen, todo = set(), list(by_id[b].STACK_AFTER)
        while todo:
            pid = todo.pop()
            if pid == a:
                return True
            if pid in by_id and pid not in seen:
                seen.add(pid)
                todo.extend(by_id[pid].STACK_AFTER)
        return False

    found = []
    files = sorted({rel for cls in classes for rel in cls.TARGETS})
    for rel in files:
        sharing = sorted(cls.ID for cls in classes if rel in cls.TARGETS)
        for i, a in enumerate(sharing):
            for b in sharing[i + 1:]:
                if not before(a, b) and not before(b, a):
                    found.append((rel, a, b))
    return found
