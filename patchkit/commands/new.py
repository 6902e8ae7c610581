"""`patchkit new ID --target FILE`: a patch module and its before/after test, from templates."""

from __future__ import annotations

import re
from importlib import resources
from pathlib import Path
from string import Template

from patchkit.commands import output
from patchkit.engine import registry
from patchkit.base.constants import EXIT_OK
from patchkit.base.errors import UsageError
from patchkit.releases.manifest import checkout_folder
from patchkit.base.util import atomic_write

_ID = re.compile(r"[a-z][a-z0-9]*(-[a-z0-9]+)*")


def _render(name: str, values: dict[str, str]) -> bytes:
    text = (resources.files("patchkit") / "templates" / name).read_text(encoding="utf-8")
    return Template(text).substitute(values).encode("utf-8")


def new(pid: str, target: str, cls: str, method: str, out: str | None, tests: str | None,
        as_json: bool = False) -> int:
    if not _ID.fullmatch(pid):
        raise UsageError(f"patch id {pid!r}: lowercase words separated by dashes (e.g. scheduler-leak)")
    if not target.startswith("sglang/") or not target.endswith(".py"):
        raise UsageError(f"--target {target!r}: a file relative to site-packages, e.g. sglang/srt/managers/scheduler.py")
    for name, value in (("--class", cls), ("--method", method)):
        if not value.isidentifier():
            raise UsageError(f"{name} {value!r} is not a Python name")
    if pid in registry.patch_ids():
        raise UsageError(f"patch id {pid!r} exists already ({registry.origin(pid)})")
    checkout = checkout_folder()
    if out is not None:
        folder = Path(out)
        test_folder = Path(tests) if tests else folder / "tests"
    elif checkout is not None:
        folder = checkout.parent / "patches"
        test_folder = Path(tests) if tests else checkout.parent / "tests" / "patches"
    else:
        raise UsageError("patchkit is not running from a checkout: pass --out DIR (a folder of patch modules)")
    module = pid.replace("-", "_")
    package = "patchkit.patches" if not out else module_package(folder)
    values = {
        "ID": pid, "MODULE": module, "TARGET": target, "CLASS": cls, "METHOD": method,
        "CLASS_NAME": "".join(word.capitalize() for word in pid.split("-")), "PACKAGE": package,
    }
    files = {folder / f"{module}.py": _render("patch.py.txt", values),
             test_folder / f"test_{module}.py": _render("test_patch.py.txt", values)}
    if out is not None:
        if not package.isidentifier():
            raise UsageError(f"--out {out}: the folder's name is the package its test imports ({package!r} is not a "
                             "Python name, e.g. my_patches); nothing written")
        # What a package of patches needs so that `pytest DIR/tests/test_ID.py` imports it from
        # anywhere: DIR/__init__.py, and tests/__init__.py (pytest then puts DIR's parent on the path).
        for package_folder in (folder, test_folder) if test_folder == folder / "tests" else (folder,):
            files.setdefault(package_folder / "__init__.py", b"")
    for path in files:
        if path.exists() and not (path.name == "__init__.py" and path.is_file()):
            raise UsageError(f"{path} exists already; nothing written")
    missing = _folders_to_make(files)
    written = [path for path in files if not path.exists()]  # an __init__.py already there stays
    for path in missing:
        path.mkdir()
    for path in written:
        atomic_write(path, files[path])
    test = test_folder / f"test_{module}.py"
    runner = f"pytest {test}" if out is None or test_folder == folder / "tests" else f"PYTHONPATH={folder.resolve().parent} pytest {test}"
    following = f"fill in the TODOs, run `{runner}`, then docs/AUTHORING.md step 3"
    if as_json:
        output.as_json({"id": pid, "module": str(folder / f"{module}.py"), "test": str(test), "next": following})
        return EXIT_OK
    for path in missing:
        output.line(f"created {path}/")
    for path in written:
        output.line(f"wrote {path}")
    output.line(f"next: {following}")
    return EXIT_OK


def _folders_to_make(files: dict[Path, bytes]) -> list[Path]:
    """The folders the files need that do not exist yet, parents first; each one's parent must
    exist or be made here too (nothing is made deeper than the folder --out or --tests names)."""
    missing: list[Path] = []
    for parent in sorted({path.parent for path in files}, key=lambda p: len(p.parts)):
        if parent.is_dir():
            continue
        if parent.exists() or parent.is_symlink():
            raise UsageError(f"{parent} is not a folder; nothing written")
        if not parent.parent.is_dir() and parent.parent not in missing:
            raise UsageError(f"{parent}: its parent folder {parent.parent} does not exist; nothing written")
        missing.append(parent)
    return missing


def module_package(folder: Path) -> str:
    """The importable package name a test uses for a folder of patch modules: the folder's name
    when it is a package on the path the tests run with (an external patch set's package)."""
    return folder.resolve().name
