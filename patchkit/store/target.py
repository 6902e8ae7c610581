"""Finding the SGLang to patch: the package folder Python imports, its version, and safe paths
to its files.

The package folder (where `sglang/__init__.py` is) and the distribution metadata (version,
RECORD, `direct_url.json`) are separate things: a wheel install keeps both in site-packages,
an editable install (`pip install -e`, as the official images do) keeps the metadata in
site-packages and the code in the checkout. patchkit patches the folder that is really
imported and keeps `.patchkit/` beside its `sglang/`.
"""

from __future__ import annotations


import json
import os
from dataclasses import dataclass, field
from pathlib import Path

from patchkit.base.lean_typing import TYPE_CHECKING
from patchkit.base import crash_log, package_path
from patchkit.releases import versions
from patchkit.base.constants import PACKAGE, RUNTIME_DIST_INFO, RUNTIME_MODULE
from patchkit.base.errors import EnvironmentFailure, NotFoundError, TargetError, UsageError, environment_failure, is_environment_failure, undecodable
from patchkit.base.util import read_regular
from patchkit.store.naming import Naming

if TYPE_CHECKING:
    from typing import Any

SITE, EDITABLE, SOURCE = "site-packages", "editable", "source"


@dataclass(frozen=True)
class Target:
    """A folder holding `sglang/` (a site-packages, a `--target` dir, or a checkout's `python/`)."""

    site: Path
    version: str
    kind: str = SITE  # site-packages (a regular install), editable, or source (--source DIR)
    checkout: Path | None = None  # the git work tree holding `site`, if any (never written to)
    # Where the runtime report's module and dist-info go (a folder on the serving sys.path):
    # `site`, except for an editable install, whose checkout is not on sys.path (its metadata is).
    runtime_root: Path | None = None
    # How this run named it: what the commands a message advises name again (store/naming.py).
    naming: Naming = field(default=Naming(), compare=False)

    @property
    def package_dir(self) -> Path:
        return self.site / PACKAGE

    @property
    def runtime_dir(self) -> Path:
        return self.runtime_root or self.site

    def path(self, rel: str) -> Path:
        """Absolute path of a target file, refusing any path that leaves the package.

        `rel` is relative to the site folder and must stay under `sglang/`, also after
        symlinks are resolved: a patch must never write outside the package it patches.
        The runtime report's own files (`is_runtime_file`) are the one exception: they live in
        `runtime_dir`, and a symlink there is refused.
        """
        if is_runtime_file(rel):
            full = self.runtime_dir / rel
            for step in (full, full.parent):
                if step.is_symlink():
                    # A file of the wrong type (6), not a missing or mismatched SGLang (3).
                    raise EnvironmentFailure(f"{step} is a symlink; patchkit writes its runtime report only to plain "
                                             "files")
            return full
        # The rule the diff parser applies to every path a diff names at load (package_path), for a
        # module patch's TARGETS and a state file's paths here.
        if package_path.problem(rel) or not rel.startswith(PACKAGE + "/"):
            raise TargetError(f"path {rel!r} escapes the {PACKAGE} package folder")
        candidate = Path(rel)
        full = self.site / candidate
        package_root = self.package_dir.resolve()
        resolved = full.resolve()
        if resolved != package_root and package_root not in resolved.parents:
            raise TargetError(f"{rel} is a symlink that points out of {self.package_dir} (to {resolved})")
        return full

    def read(self, rel: str) -> bytes | None:
        try:
            return read_regular(self.path(rel))
        except FileNotFoundError:
            return None

    @property
    def label(self) -> str:
        return self.version

    def python_files(self) -> list[str]:
        """Every .py file of the package, relative to the site folder (for finding moved code)."""
        return sorted(p.relative_to(self.site).as_posix() for p in self.package_dir.rglob("*.py"))

    def package_files(self) -> list[str]:
        """Every file of the package, any kind (for a file whose folder moved), relative to the site folder."""
        return sorted(p.relative_to(self.site).as_posix() for p in self.package_dir.rglob("*")
                      if p.is_file() and "__pycache__" not in p.parts)


def is_runtime_file(rel: str) -> bool:
    """A file directly in the runtime report's package or dist-info (nothing else outside `sglang/`)."""
    parts = rel.split("/")
    return (len(parts) == 2 and parts[0] in (RUNTIME_MODULE, RUNTIME_DIST_INFO)
            and parts[1] not in ("", ".", "..", "__pycache__") and "\\" not in rel)


# --- metadata ---------------------------------------------------------------------------------


def _metadata_version(path: Path) -> str | None:
    try:
        text = read_regular(path).decode("utf-8")
    except UnicodeDecodeError as exc:
        raise undecodable(path, exc) from None
    except OSError as exc:
        if is_environment_failure(exc):
            raise environment_failure(exc) from None
        raise TargetError(f"cannot read {path}: {exc.strerror}") from exc
    version = header(text, "Version")
    return version.strip() if version else None


def header(text: str, name: str) -> str | None:
    """The first `name` field of a METADATA file's header block, read as email's HeaderParser
    reads it (case-insensitive names, folded continuation lines, the block ends at a blank line
    or at a line that is no field), without importing the email package (a cost of every `status`)."""
    wanted, found, in_field = name.lower(), None, False  # in_field: a field was read
    for line in text.splitlines():
        if line[:1] in (" ", "\t") and line.strip():
            if in_field and found is not None:
                found += line  # a folded continuation of the field asked for
            continue  # (email skips one before the first field too)
        if found is not None:
            return found
        field, colon, value = line.partition(":")
        if not line.strip() or not colon or not field or field != field.rstrip() or field[:1] in (" ", "\t"):
            return None
        in_field = True
        if field.lower() == wanted:
            found = value.lstrip(" \t")
    return found


def _dist_infos(site: Path) -> list[Path]:
    return sorted(site.glob(f"{PACKAGE}-*.dist-info"))


def _record_matches(info: Path, site: Path) -> bool:
    """Whether the version files a dist-info's RECORD lists hold the bytes it recorded (`pip install
    --target --upgrade` leaves the old release's dist-info beside the new one)."""
    import base64
    import csv
    import hashlib

    try:
        rows = list(csv.reader(read_regular(info / "RECORD").decode("utf-8").splitlines()))
    except (OSError, UnicodeDecodeError):
        return False
    checked = False
    for row in rows:
        if len(row) >= 2 and row[0] in (f"{PACKAGE}/_version.py", f"{PACKAGE}/version.py") and row[1].startswith("sha256="):
            try:
                data = read_regular(site / row[0])
            except OSError:
                return False
            digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
            if digest != row[1][len("sha256="):]:
                return False
            checked = True
    return checked


def _version_from_dist_info(site: Path) -> str:
    infos = _dist_infos(site)
    if not infos:
        raise TargetError(f"no {PACKAGE}-*.dist-info in {site}: cannot tell the SGLang version")
    if len(infos) > 1:
        infos = [info for info in infos if _record_matches(info, site)] or infos
    if len(infos) > 1:
        names = ", ".join(info.name for info in infos)
        raise TargetError(f"several SGLang dist-info folders in {site} ({names}); reinstall SGLang")
    version = _metadata_version(infos[0] / "METADATA")
    if not version:
        raise TargetError(f"{infos[0] / 'METADATA'} has no Version field")
    return version


def _version_from_source(site: Path) -> str | None:
    """The version a source tree declares: sdist PKG-INFO, egg-info, pyproject.toml, _version.py."""
    for info in (site / "PKG-INFO", site / f"{PACKAGE}.egg-info" / "PKG-INFO"):
        if info.is_file():
            version = _metadata_version(info)
            if version:
                return version
    pyproject = site / "pyproject.toml"
    if pyproject.is_file():
        import tomllib

        try:
            project = tomllib.loads(read_regular(pyproject).decode("utf-8")).get("project", {})
        except (OSError, ValueError) as exc:
            raise TargetError(f"cannot read {pyproject}: {exc}") from None
        version = project.get("version")
        if isinstance(version, str):
            return version
    generated = site / PACKAGE / "_version.py"  # written by setuptools-scm when the tree was built
    if generated.is_file():
        import ast

        try:
            module = ast.parse(read_regular(generated))
        except (OSError, SyntaxError) as exc:
            raise TargetError(f"cannot read {generated}: {exc}") from None
        for node in module.body:
            if (isinstance(node, ast.Assign) and any(getattr(t, "id", "") in ("version", "__version__") for t in node.targets)
                    and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str)):
                return node.value.value
    return None


def _checkout_of(site: Path) -> Path | None:
    for folder in (site, *site.parents):
        if (folder / "pyvenv.cfg").is_file():
            return None  # a virtual environment's files (a project's .venv) are installed, never the checkout's own
        if (folder / ".git").exists():
            return None if _ignored_by_git(folder, site / PACKAGE) else folder
    return None


def _ignored_by_git(worktree: Path, path: Path) -> bool:
    """True when git ignores `path`: a release unpacked into an ignored folder of some repository
    (a `build/` or cache folder) is not part of that checkout, and `git status` will not show it."""
    import subprocess

    try:
        proc = subprocess.run(["git", "-C", str(worktree), "check-ignore", "-q", str(path)],
                              capture_output=True, timeout=10, check=False)
    except (OSError, subprocess.SubprocessError):
        return False  # no git here: say the files are in the checkout, the safe side
    return proc.returncode == 0


def _editable_location(info: Path) -> Path | None:
    """The project folder of an editable install, from its `direct_url.json` (PEP 610)."""
    try:
        data = json.loads(read_regular(info / "direct_url.json"))
    except (OSError, ValueError):
        return None
    if not (isinstance(data, dict) and isinstance(data.get("dir_info"), dict) and data["dir_info"].get("editable")):
        return None
    url = str(data.get("url", ""))
    if not url.startswith("file://"):
        return None
    from urllib.parse import unquote, urlparse

    return Path(unquote(urlparse(url).path))


def is_runtime_root(target: Target, folder: Path) -> bool:
    """Whether `folder` is where patchkit writes the runtime report for this target, derived from
    the install, never taken from a record: the site folder, the target's own runtime folder (an
    editable install's metadata), or the site-packages of an editable install of this very tree
    (patched through `--python`, named now with `--source DIR`): its one SGLang dist-info points here."""
    folder = Path(os.path.abspath(folder))
    if folder in (target.site, target.runtime_dir):
        return True
    if not folder.is_dir():
        return False
    infos = _dist_infos(folder)
    project = _editable_location(infos[0]) if len(infos) == 1 else None
    root = _package_root(project) if project is not None else None
    return root is not None and root.resolve() == target.site.resolve()


def _package_root(folder: Path) -> Path | None:
    """`folder` itself when it holds sglang/, or its `python/` (a checkout of the repository)."""
    for candidate in (folder, folder / "python"):
        if (candidate / PACKAGE / "__init__.py").is_file():
            return candidate
    return None


# --- the three ways to name a target ----------------------------------------------------------


def _make(site: Path, version: str, kind: str, metadata_site: Path | None = None,
          naming: Naming = Naming()) -> Target:
    versions.check(version, what=f"the SGLang version installed in {site}", error=TargetError)
    crash_log.note_sglang_version(version)  # a crash after this point names the SGLang it was patching
    site = Path(os.path.abspath(site))
    root = Path(os.path.abspath(metadata_site)) if kind == EDITABLE and metadata_site is not None else None
    return Target(site=site, version=version, kind=kind, checkout=_checkout_of(site),
                  runtime_root=None if root == site else root, naming=naming)


def find_in(site: Path) -> Target:
    """The SGLang in a given folder (`--site-packages DIR`); an editable install there is followed
    to the checkout it points at."""
    site = Path(site)
    if not site.is_dir():
        raise TargetError(f"{site} is not a folder")
    if (site / PACKAGE / "__init__.py").is_file():
        return _make(site, _version_from_dist_info(site), SITE, naming=Naming("--site-packages", str(site)))
    infos = _dist_infos(site)
    project = _editable_location(infos[0]) if len(infos) == 1 else None
    root = _package_root(project) if project else None
    if root is None:
        raise NotFoundError(f"no SGLang in {site}: it holds no {PACKAGE}/ package", [site])
    return _make(root, _version_from_dist_info(site), EDITABLE, metadata_site=site,
                 naming=Naming("--site-packages", str(site)))


def find_source(folder: Path) -> Target:
    """A source tree given directly (`--source DIR`): a folder holding `sglang/` (a git checkout's
    `python/`, an sdist tree), or a checkout root whose `python/` holds it."""
    folder = Path(folder)
    if not folder.is_dir():
        raise TargetError(f"--source {folder}: not a folder")
    root = _package_root(folder)
    if root is None:
        raise NotFoundError(f"--source {folder}: no {PACKAGE}/ package in it (nor in {folder / 'python'})",
                            [folder, folder / "python"])
    version = _version_from_source(root)
    if version is None:
        infos = _dist_infos(root)
        version = _version_from_dist_info(root) if infos else None
    if version is None:
        raise TargetError(f"--source {folder}: cannot tell the SGLang version (no PKG-INFO, pyproject.toml "
                          f"version or {PACKAGE}/_version.py); pass --target VERSION")
    return _make(root, version, SOURCE, naming=Naming("--source", str(folder)))


# Stdlib only, run in this interpreter or in another one (`--python`): where Python imports
# sglang from, and the version its distribution metadata declares. `read_dist` (in this
# interpreter: `_read_dist`) reads the distribution where it can; else importlib.metadata does.
_WHERE = r"""
def where(read_dist=None):
    import importlib.util, os
    import site
    out = {"package": None, "version": None, "metadata": None, "editable": False}
    try:
        out["sites"] = [*site.getsitepackages(), site.getusersitepackages()]
    except AttributeError:  # an old virtualenv's site module
        out["sites"] = []
    try:
        spec = importlib.util.find_spec("sglang")
    except Exception as exc:
        out["error"] = f"{type(exc).__name__}: {exc}"
        spec = None
    if spec is not None and spec.origin and os.path.basename(spec.origin) == "__init__.py":
        out["package"] = os.path.dirname(os.path.abspath(spec.origin))
    found = read_dist("sglang") if read_dist is not None else None
    if found is None:
        import importlib.metadata
        try:
            dist = importlib.metadata.distribution("sglang")
        except importlib.metadata.PackageNotFoundError:
            return out
        found = (dist.version, str(getattr(dist, "_path", "") or "") or None, lambda: dist.read_text("direct_url.json"))
    if found is False:
        return out
    out["version"], out["metadata"], direct_url = found
    try:
        import json
        direct = json.loads(direct_url() or "{}")
        out["editable"] = bool(direct.get("dir_info", {}).get("editable"))
    except (ValueError, AttributeError):
        pass
    return out
"""


def _from_where(found: dict[str, Any], who: str, naming: Naming = Naming()) -> Target:
    if not found.get("package"):
        if found.get("metadata"):
            raise TargetError(f"{who} has SGLang's metadata ({found['metadata']}) but imports no {PACKAGE} "
                              "package; reinstall SGLang, or pass --source DIR or --site-packages DIR")
        # The options to pass instead are the command's own: commands/locate.py adds them.
        raise NotFoundError(f"SGLang is not installed for {who}", [Path(p) for p in found.get("sites", [])])
    site = Path(found["package"]).parent
    metadata = Path(found["metadata"]) if found.get("metadata") else None
    in_site = metadata is not None and metadata.parent.resolve() == site.resolve()
    if found.get("version") and (in_site or found.get("editable") or metadata is None):
        version = found["version"]
    else:
        # No metadata for the package imported (a checkout on PYTHONPATH), or metadata of
        # another install: the tree's own version wins.
        version = _version_from_source(site) or found.get("version")
        if version is None:
            raise TargetError(f"{who} imports SGLang from {site} but no metadata tells its version; "
                              "pass --source DIR with --target VERSION")
    kind = SITE if in_site else (EDITABLE if found.get("editable") else SOURCE)
    return _make(site, version, kind, metadata_site=metadata.parent if metadata is not None else None, naming=naming)


def find_installed() -> Target:
    """The SGLang that this interpreter imports."""
    namespace: dict[str, Any] = {}
    exec(_WHERE, namespace)  # noqa: S102 - our own constant, shared with find_for_python
    return _from_where(namespace["where"](_read_dist), "this Python")


_LINE_BREAKS = "\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029"  # str.splitlines breaks there, email does not


def _read_dist(name: str) -> Any:
    """What `importlib.metadata.distribution(name)` would answer, read without it (it imports the
    email package: ~36 ms of every `status` of this Python's own SGLang): (version, its metadata
    folder, a reader of its direct_url.json), or False where no distribution has that name. It
    looks where importlib.metadata (3.10 to 3.13) looks: each sys.path folder in order, the first
    child whose lowercased name ends in .dist-info or .egg-info and whose part before the first
    dash normalises to `name`. None, and importlib.metadata answers, wherever this could differ:
    another finder of distributions, a zip or an .egg on sys.path before it, a metadata file
    rather than a folder, a Version that is not one plain line, an unreadable file."""
    import importlib.machinery
    import re
    import sys

    if sys.version_info < (3, 10) or any(getattr(finder, "find_distributions", None) is not None
                                         and finder is not importlib.machinery.PathFinder for finder in sys.meta_path):
        return None

    def normal(text: str) -> str:
        return re.sub(r"[-_.]+", "-", text).lower().replace("-", "_")

    wanted = normal(name)
    for root in sys.path:
        if not isinstance(root, str) or os.path.basename(root).lower().endswith(".egg"):
            return None
        try:
            children = os.listdir(root or ".")
        except OSError:
            if os.path.isfile(root):
                return None  # a zip
            continue
        for child in children:
            low = child.lower()
            if low.endswith((".dist-info", ".egg-info")) and normal(low.rpartition(".")[0].partition("-")[0]) == wanted:
                return _dist_at(Path(root, child))
    return False


def _dist_at(info: Path) -> Any:
    def read(name: str) -> str | None:  # as importlib.metadata's PathDistribution.read_text
        try:
            return (info / name).read_text(encoding="utf-8")
        except (FileNotFoundError, IsADirectoryError, KeyError, NotADirectoryError, PermissionError):
            return None

    try:
        text = info.is_dir() and (read("METADATA") or read("PKG-INFO"))
    except (OSError, ValueError):
        return None
    if not text or any(char in text for char in _LINE_BREAKS):
        return None
    version = header(text, "Version")
    if not version or version.split() != [version]:
        return None
    return version, str(info), lambda: read("direct_url.json")


def interpreter(python: str) -> str:
    """`--python` as a path that works from any folder: a relative path (`venv/bin/python`) is
    made absolute against the current folder (children run with another cwd); a bare name
    (`python3`) is left to the PATH. Symlinks are kept: a venv's bin/python is one."""
    return os.path.abspath(python) if os.sep in python else python


def find_for_python(python: str) -> Target:
    """The SGLang that another interpreter imports (`--python PATH`)."""
    import subprocess  # here: a status of this Python's own SGLang starts no process

    code = _WHERE + "\nimport json\nprint(json.dumps(where()))\n"
    try:
        # cwd "/": the child's sys.path[0] must not be whatever folder patchkit was started in.
        proc = subprocess.run([interpreter(python), "-c", code], capture_output=True, text=True, timeout=120, cwd="/")
    except OSError as exc:
        raise TargetError(f"--python {python}: cannot run it ({exc.strerror})") from None
    except subprocess.TimeoutExpired:
        raise TargetError(f"--python {python}: no answer within 120 s") from None
    if proc.returncode != 0:
        tail = (proc.stderr.strip().splitlines() or [f"exit code {proc.returncode}"])[-1]
        raise TargetError(f"--python {python}: cannot ask it where SGLang is ({tail})")
    try:
        found = json.loads(proc.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        raise TargetError(f"--python {python}: unexpected answer {proc.stdout.strip()[:200]!r}") from None
    return _from_where(found, python, Naming("--python", python))


def check_version(target: Target, wanted: str | None) -> None:
    """`--target V` must name the version found (a local build `0.5.19+cu130` matches `0.5.19`)."""
    if wanted is None:
        return
    want = versions.parse(wanted, what="--target")
    have = versions.parse(target.version, what=f"the SGLang version in {target.site}", error=TargetError)
    if want == have or (not want.local and want == versions.public(have)):
        return
    raise TargetError(
        f"--target {wanted} but SGLang {target.version} is installed in {target.site}; "
        f"run with --target {target.version} or install SGLang {wanted}"
    )


def usage_conflict(**given: object) -> None:
    """Exit 2 when more than one of the mutually exclusive targeting options is given."""
    named = [f"--{name.replace('_', '-')}" for name, value in given.items() if value]
    if len(named) > 1:
        raise UsageError(f"{' and '.join(named)} are mutually exclusive")


def interpreter_for(site: Path) -> str | None:
    """The interpreter of the virtual environment that owns `site`, if it is a venv's site-packages."""
    for root in site.parents[:3]:
        candidate = root / "bin" / "python"
        if (root / "pyvenv.cfg").is_file() and candidate.exists():
            return str(candidate)
    return None
