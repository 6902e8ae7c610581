"""`patchkit new ID --target FILE`: a patch module and its before/after test, from templates."""

from __future__ import annotations

import re
from importlib import resources
from pathlib import Path
from string import Template

from patchkit import output, registry
from patchkit.constants import EXIT_OK
from patchkit.errors import UsageError
from patchkit.manifest import checkout_folder
from patchkit.util import atomic_write

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
    for path in files:
        if path.exists():
            raise UsageError(f"{path} exists already; nothing written")
        if not path.parent.is_dir():
            raise UsageError(f"{path.parent} is not a folder; nothing written")
    for path, data in files.items():
        atomic_write(path, data)
    test = test_folder / f"test_{module}.py"
    following = f"fill in the TODOs, run `pytest {test}`, then docs/AUTHORING.md step 3"
    if as_json:
        output.as_json({"id": pid, "module": str(folder / f"{module}.py"), "test": str(test), "next": following})
        return EXIT_OK
    for path in files:
        output.line(f"wrote {path}")
    output.line(f"next: {following}")
    return EXIT_OK


def module_package(folder: Path) -> str:
    """The importable package name a test uses for a folder of patch modules: the folder's name
    when it is a package on the path the tests run with (an external patch set's package)."""
    return folder.resolve().name
