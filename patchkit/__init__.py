"""patchkit: versioned, idempotent, transactional AST patches for an installed SGLang."""

import os as _os
import sys as _sys

__version__ = "0.1.0"


def _mount_checkout_folders() -> None:
    """`patches/` and `manifests/` sit at the top of a checkout; an installed patchkit carries
    them as `patchkit/patches` and `patchkit/manifests`. Run from a checkout (`python -m
    patchkit`, no install), they are mounted here as those same two packages, so every patch
    module has exactly one module name (`patchkit.patches.<module>`) wherever patchkit runs."""
    import importlib.util

    here = _os.path.dirname(_os.path.abspath(__file__))
    root = _os.path.dirname(here)
    if not _os.path.isfile(_os.path.join(root, "pyproject.toml")):
        return  # not a checkout: the installed package holds both folders
    for name in ("patches", "manifests"):
        full = f"{__name__}.{name}"
        folder = _os.path.join(root, name)
        init = _os.path.join(folder, "__init__.py")
        if full in _sys.modules or _os.path.isdir(_os.path.join(here, name)) or not _os.path.isfile(init):
            continue
        spec = importlib.util.spec_from_file_location(full, init, submodule_search_locations=[folder])
        if spec is None or spec.loader is None:
            continue
        module = importlib.util.module_from_spec(spec)
        _sys.modules[full] = module
        spec.loader.exec_module(module)


_mount_checkout_folders()
