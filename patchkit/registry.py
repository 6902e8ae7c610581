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
    """Every Patch class, in id order (the order in which patches stack on a shared file)."""
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
