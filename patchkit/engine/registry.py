"""The patches patchkit knows: the built-in set (`patches/`), sets shipped by other packages
(entry point group `patchkit.patches`, each naming a package of patch modules) and folders
given with `--patches DIR` (or $PATCHKIT_PATCHES). Ids come from module file names (cheap:
no patch module and no libcst is imported to list them) and must be unique across all sets.
Beside (or instead of) modules, a set's folder may hold diff patches (`.patch` / `.diff` files,
`patchkit.diffs.diffpatch`), and `--patches FILE` names one diff file; a diff's id comes from its
header (`Patchkit-Id:`) or its file name, read without parsing its hunks.
"""

from __future__ import annotations

import contextlib
import importlib
import importlib.machinery
import inspect
import os
import sys
import types
from pathlib import Path

from patchkit.base.lean_typing import TYPE_CHECKING, NamedTuple
from patchkit.base import confined
from patchkit.base.constants import DIFF_SUFFIXES
from patchkit.base.errors import EnvironmentFailure, FetchError, PatchkitError, PlanError, UsageError
from patchkit.base.patch_id import PATCH_ID_RULE, is_patch_id
from patchkit.base.util import read_regular, sha256

if TYPE_CHECKING:
    from typing import Any, Callable, Iterator
    from patchkit.authoring.kind import PatchKind
    from patchkit.authoring.patch import Patch
    from patchkit.diffs.diffpatch import DiffPatch
    from patchkit.engine.bump_record import Unfinished

    # The two kinds of patch the registry loads both implement what the engine asks of a patch
    # (mypy checks this line; nothing imports them here at run time).
    KINDS: tuple[type[PatchKind], ...] = (Patch, DiffPatch)

PATCHES_PACKAGE = "patchkit.patches"
ENTRY_POINT_GROUP = "patchkit.patches"
ENV_PATCHES = "PATCHKIT_PATCHES"  # folders of patch modules or diff files, separated by os.pathsep
BUILT_IN = "built-in"

class FileKind(NamedTuple):
    """A kind of patch kept in files of its own beside the patch modules (a diff: `.patch` / `.diff`),
    registered in `FILE_KINDS` (pre-commit's dict of languages): the registry lists a set's files
    by `suffixes`, reads each one's id with `read` and makes its class with `make`; the engine then
    asks the class only `kind.PatchKind`. A new kind of patch is one module and one entry here
    (`register`)."""

    suffixes: tuple[str, ...]
    # (id, parsed) of one file; UsageError / PlanError naming the file when it does not load (left
    # out of a folder, refused when named alone), EnvironmentFailure when it cannot be read.
    read: Callable[[Path], tuple[str, Any]]
    # The classes of all its files of one load, from (file, origin, what `read` parsed) each, made
    # together (a diff is told which loaded diffs it is stacked on), in that order.
    make: Callable[[list[tuple[Path, str, Any]]], list[type[Patch]]]
    # What `list` shows of a loaded class beyond the fields every patch has (diffs: the releases it
    # was made for, its notes, the diffs it is stacked on).
    describe: Callable[[type[Patch]], dict[str, Any]] | None = None
    # What every command that read the set says of one parsed file when it ends, or None (a diff
    # whose every file is outside the package: "(id): a diff with nothing inside ...").
    note: Callable[[Any], str | None] | None = None


class PatchSet(NamedTuple):  # (not a dataclass: making one costs every command ~1 ms)
    origin: str  # "built-in", "entry point NAME (DIST VERSION)", "folder DIR"
    package: str  # the package its modules are imported under
    folder: Path
    only: str | None = None  # `--patches FILE`: the one diff file of the set


ENTRY_POINTS_LIMIT = 16 << 20  # bytes: an entry_points.txt is a few lines


def _declares_entry_points() -> bool:
    """Whether any installed distribution declares the group: a plain scan of the
    entry_points.txt files on sys.path, so that `status` does not pay for importing
    importlib.metadata when no external patch set is installed (the usual case)."""
    marker = f"[{ENTRY_POINT_GROUP}]"
    for entry in sys.path:
        try:
            names = os.listdir(entry or ".")
        except OSError:
            continue
        for name in names:
            if not name.endswith((".dist-info", ".egg-info")):
                continue
            try:  # never blocks: a FIFO there (which importlib.metadata would wait on too) is exit 6 naming it
                text = read_regular(Path(entry or ".", name, "entry_points.txt"), ENTRY_POINTS_LIMIT).decode("utf-8")
            except (OSError, UnicodeDecodeError):
                continue
            if marker in text:
                return True
    return False


def _entry_point_sets() -> list[PatchSet]:
    if not _declares_entry_points():
        return []
    from importlib.metadata import entry_points

    found = []
    for ep in sorted(entry_points(group=ENTRY_POINT_GROUP), key=lambda e: e.name):
        dist = f"{ep.dist.name} {ep.dist.version}" if ep.dist is not None else "unknown distribution"
        origin = f"entry point {ep.name} ({dist})"
        try:
            package = importlib.import_module(ep.value.split(":")[0])
        except Exception as exc:  # a broken plugin is named, not a crash
            raise PatchkitError(f"patch set {origin}: cannot import {ep.value}: {exc}") from None
        if not hasattr(package, "__path__"):
            raise PatchkitError(f"patch set {origin}: {ep.value} must name a package of patch modules")
        found.append(PatchSet(origin=origin, package=package.__name__, folder=Path(list(package.__path__)[0])))
    return found


def _import_patch_module(module_name: str, path: Path, origin: str, bytecode: bool = True) -> types.ModuleType:
    """Import one patch module; a module that does not compile or raises while it is imported is
    the author's to fix (exit 2 naming the file and line), not a bug in patchkit (70). Without
    `bytecode` (a --patches folder, a bump's folder or tree: the user's files) no __pycache__ is
    written beside it: it would be a stray folder in what bump hands over and an image's context."""
    written = sys.dont_write_bytecode
    sys.dont_write_bytecode = written or not bytecode
    try:
        return importlib.import_module(module_name)
    except SyntaxError as exc:
        raise UsageError(f"{exc.filename or path}:{exc.lineno}: patch module ({origin}) does not compile: "
                         f"{exc.msg}") from None
    except Exception as exc:
        line, tb = None, exc.__traceback__
        while tb is not None:  # the last line of that file the import ran (a Snippet(...), an import)
            if Path(tb.tb_frame.f_code.co_filename) == path:
                line = tb.tb_lineno
            tb = tb.tb_next
        where = f"{path}:{line}" if line else str(path)
        raise UsageError(f"{where}: patch module ({origin}) failed to import: {type(exc).__name__}: {exc}") from None
    finally:
        sys.dont_write_bytecode = written


def _modules_in(folder: Path) -> list[tuple[str, bool]]:
    """(name, is a package) of each module in `folder`, by name, as `pkgutil.iter_modules` lists
    them: a file with an import suffix (the longest that fits; not `__init__`, no dot left in the
    name), or a folder with no dot in its name holding an `__init__` module; of a folder and a file
    of one name, the folder. Listed here for a folder on disk (pkgutil, with the listing it makes,
    is ~0.6 ms of every command); anything else (a zip) is pkgutil's to list."""
    if not folder.is_dir():
        import pkgutil

        return sorted((info.name, info.ispkg) for info in pkgutil.iter_modules([str(folder)]))
    suffixes = sorted(importlib.machinery.all_suffixes(), key=len, reverse=True)

    def module_name(filename: str) -> str | None:
        return next((filename[: -len(suffix)] for suffix in suffixes if filename.endswith(suffix)), None)

    def listing(path: Path) -> list[str]:
        try:
            return os.listdir(path)
        except OSError:  # unreadable: as import skips it
            return []

    found: dict[str, bool] = {}
    for filename in sorted(listing(folder)):  # a folder `x` sorts before its namesake `x.py`
        name = module_name(filename)
        if name == "__init__" or name in found:
            continue
        package = False
        if not name and "." not in filename and (folder / filename).is_dir():
            if not any(module_name(inner) == "__init__" for inner in listing(folder / filename)):
                continue
            name, package = filename, True
        if name and "." not in name:
            found[name] = package
    return sorted(found.items())


def _kind_files(patch_set: PatchSet) -> list[str]:
    """The files of the set that a registered `FileKind` reads (not its patch modules)."""
    if patch_set.only:
        return [patch_set.only]
    try:
        names = os.listdir(patch_set.folder)
    except OSError:
        return []
    # Anything so named but a folder is a diff patch: a FIFO or a dangling link is refused when read
    # (exit 6), never skipped in silence (the patch would be missing from apply and from images).
    return sorted(n for n in names if _kind_of(n) is not None and not n.startswith(".") and not (patch_set.folder / n).is_dir())


def _read_diff(path: Path) -> tuple[str, Any]:
    """A diff file's id, the whole diff parsed (a damaged one is left out of its folder at once,
    never half-known: listed by id here, failing later)."""
    from patchkit.diffs.unidiff import load, read_file

    try:
        data = read_file(path)  # a FIFO named .patch is refused at once, not waited on; a huge file unread
    except FileNotFoundError:
        raise EnvironmentFailure(f"{path}: a symbolic link to a file that does not exist; patchkit cannot read "
                                 "that diff patch") from None
    except OSError as exc:
        raise EnvironmentFailure(f"cannot read {path}: {exc.strerror}") from None
    diff = load(data, str(path))
    return diff.id, diff


def _diff_classes(files: list[tuple[Path, str, Any]]) -> list[type[Patch]]:
    from patchkit.diffs.diffpatch import patch_classes

    return list(patch_classes(files))


def _describe_diff(cls: type[Patch]) -> dict[str, Any]:
    from patchkit.diffs.diffpatch import described

    return described(cls)  # type: ignore[arg-type]


def _diff_note(parsed: Any) -> str | None:
    from patchkit.diffs.unidiff import nothing_inside

    said = nothing_inside(parsed)
    return f"({parsed.id}): {said}" if said else None


FILE_KINDS: dict[str, FileKind] = {"diff": FileKind(DIFF_SUFFIXES, _read_diff, _diff_classes, _describe_diff,
                                                    _diff_note)}


def _kind_of(name: str) -> str | None:
    """The registered kind whose files are so named, None for a patch module."""
    return next((kind for kind, found in FILE_KINDS.items() if name.endswith(found.suffixes)), None)


def _is_diff(name: str) -> bool:
    return name.endswith(DIFF_SUFFIXES)


def left_out(top: Path) -> Callable[[str, list[str]], set[str]]:
    """What of a patch set's folder `top` is not the set (not loaded, not copied into an image's
    build context; shutil.copytree's ignore): caches, hidden files (a bump's record), and at its top
    what a bump wrote for people (REPORT.md, the NAME.tree/ folders to resolve)."""
    import fnmatch

    from patchkit.engine.bump_record import not_patches

    for_people = not_patches(top)

    def ignored(folder: str, names: list[str]) -> set[str]:
        skipped = {n for n in names if n in _NOT_LOADED or fnmatch.fnmatchcase(n, ".*")}
        return {*skipped, *(for_people & set(names) if Path(folder) == top else ())}

    return ignored


_NOT_LOADED = ("__pycache__", ".git")


def _file(patch_set: PatchSet, name: str) -> Path:
    return patch_set.folder / (name if _kind_of(name) is not None else f"{name}.py")


class PatchSets:
    """The patches of one run (pre-commit's Store, LibCST's CodemodContext): the folders given
    (`--patches`, $PATCHKIT_PATCHES), the sets and ids found there, each diff file's parse, the files
    left out and the unfinished bump folders taken. Made once per command, and passed: the CLI
    makes it from its options and runs the command with it (`running`, cli/error_handler.run), which
    then says what it left out. Two of them never see each other's state."""

    def __init__(self, folders: tuple[str, ...] | list[str] = (), allow_incomplete: bool = False) -> None:
        self.folders = tuple(folders)
        # --allow-incomplete: an unfinished bump's folder loads as what it holds (the patches it lacks
        # named by `incomplete`) instead of being refused (exit 1).
        self.allow_incomplete = allow_incomplete
        self._sets: list[PatchSet] | None = None
        self._modules: dict[str, tuple[str, PatchSet]] | None = None  # id -> (module name, set)
        # Diff files of a folder that do not load (a damaged diff, a header id that breaks the rule):
        # left out, the rest of the set works, and the command names each with its cause when it
        # ends, its exit code then non-zero (`unloadable`). A diff named alone (`--patches FILE`) is refused.
        self._unloadable: list[PatchkitError] = []
        self._parsed: dict[Path, Any] = {}  # a patch file -> its parse (made once, for its id)
        # A folder `bump` wrote and has not finished is refused as a patch set (engine/bump_record),
        # unless the user takes the rest of it with --allow-incomplete: then each such folder is kept
        # here, and the command names what it left out when it ends (`incomplete`).
        self._incomplete: list[Unfinished] = []

    def add(self, folders: tuple[str, ...] | list[str], allow_incomplete: bool = False) -> None:
        """More folders after those already given (`patchkit COMMAND --patches DIR`), or
        --allow-incomplete given after the command: listed afresh."""
        self.folders = (*self.folders, *folders)
        self.allow_incomplete = self.allow_incomplete or allow_incomplete
        self._sets = self._modules = None
        self._unloadable, self._parsed, self._incomplete = [], {}, []

    def incomplete(self) -> list[Unfinished]:
        """The unfinished bump folders loaded under --allow-incomplete, each saying what it lacks."""
        return list(self._incomplete)

    def unloadable(self) -> list[PatchkitError]:
        """The diff files of the loaded folders that were left out, each error naming its file."""
        return list(self._unloadable)

    def file_notes(self) -> list[str]:
        """What every command that read the set says of its patch files when it ends, "FILE: note",
        as each file's kind says it (`FileKind.note`: a diff with nothing inside the package)."""
        found = []
        for path, parsed in self._parsed.items():
            note = FILE_KINDS[_kind_of(path.name)].note  # type: ignore[index]
            said = note(parsed) if note is not None else None
            found += [f"{path} {said}"] if said else []
        return found

    def _folder_set(self, folder: str, option: str = "--patches") -> PatchSet:
        """The set a folder (or one diff file) holds; `option`: how the user named it."""
        path = Path(folder).resolve()
        if path.is_file() and _kind_of(path.name) is not None:
            # One diff of an unfinished bump's folder is refused as the folder is (issue 40.1).
            self._refuse_unfinished(path.parent, os.path.dirname(folder.rstrip(os.sep)) or ".", option)
            return PatchSet(origin=f"file {path}", package="", folder=path.parent, only=path.name)
        if not path.is_dir():
            suffixes = [suffix for kind in FILE_KINDS.values() for suffix in kind.suffixes]
            raise UsageError(f"{option} {folder}: not a folder or a {' / '.join(suffixes)} file")
        self._refuse_unfinished(path, folder, option)
        # A symlink out of the folder, to nothing or to a folder: exit 6 naming it, for every command
        # (an image's build context copies the folder, and never a file from elsewhere).
        confined.plain_tree(path, left_out(path))
        # One package per folder, named after its path: each module gets exactly one module name.
        package = "patchkit_folder_" + sha256(str(path).encode())[:12]
        if package not in sys.modules:
            module = types.ModuleType(package, f"patch modules from {path}")
            module.__path__ = [str(path)]
            sys.modules[package] = module
        return PatchSet(origin=f"folder {path}", package=package, folder=path)

    def _refuse_unfinished(self, path: Path, folder: str, option: str) -> None:
        """A folder `bump` wrote whose record says patches remain to be finished: refused (PlanError,
        exit 1; a record that cannot be read: exit 2; a symlink in its place: exit 6), or kept under
        --allow-incomplete."""
        from patchkit.engine.bump_record import unfinished

        found = unfinished(path, folder, option)
        if found is None:
            return
        if self.allow_incomplete:
            if found not in self._incomplete:
                self._incomplete.append(found)
            return
        raise (UsageError if found.damaged else PlanError)(found.refusal())

    def patch_sets(self) -> list[PatchSet]:
        if self._sets is None:
            builtin = importlib.import_module(PATCHES_PACKAGE)
            # Each folder with how the user named it (the command line's first), for what is said about it.
            folders = {folder: "--patches" for folder in self.folders}
            for folder in os.environ.get(ENV_PATCHES, "").split(os.pathsep):
                if folder:
                    folders.setdefault(folder, f"${ENV_PATCHES}")
            given: dict[tuple[Path, str | None], PatchSet] = {}
            for folder, option in folders.items():
                # One folder (or file) under two spellings (DIR and DIR/, a relative path, an image's
                # $PATCHKIT_PATCHES and a --patches of it) is one set, as the same spelling twice is.
                found = self._folder_set(folder, option)
                given.setdefault((found.folder, found.only), found)
            self._sets = [
                PatchSet(origin=BUILT_IN, package=PATCHES_PACKAGE, folder=Path(list(builtin.__path__)[0])),
                *_entry_point_sets(),
                *given.values(),
            ]
        return self._sets

    def _module_index(self) -> dict[str, tuple[str, PatchSet]]:
        if self._modules is None:
            index: dict[str, tuple[str, PatchSet]] = {}
            for patch_set in self.patch_sets():
                found = [] if patch_set.only else [
                    (name.replace("_", "-"), name)
                    for name, package in _modules_in(patch_set.folder)
                    # A patch is one module; a subpackage (the set's tests/, which `patchkit new` makes) is not one.
                    if not name.startswith("_") and not package]
                for pid, name in found:
                    if not is_patch_id(pid):
                        raise UsageError(
                            f"{patch_set.folder / name}.py ({patch_set.origin}): {pid!r} is not a valid patch id "
                            f"({PATCH_ID_RULE}; underscores in the file name stand for dashes); rename the file"
                        )
                # A diff's id is checked by its parser (unidiff.load), by the same rule.
                for name in _kind_files(patch_set):
                    try:
                        found.append((self._file_id(patch_set.folder / name), name))
                    except (UsageError, PlanError) as exc:
                        if patch_set.only:
                            raise
                        self._unloadable.append(exc)
                for pid, name in found:
                    if pid in index:
                        other_name, other = index[pid]
                        raise UsageError(
                            f"patch id {pid!r} is defined twice: by {other.origin} ({_file(other, other_name)}) "
                            f"and by {patch_set.origin} ({_file(patch_set, name)}); remove one of them (a diff file: "
                            "or give it its own id with a `Patchkit-Id:` line)"
                        )
                    index[pid] = (name, patch_set)
            self._modules = dict(sorted(index.items()))
        return self._modules

    def _file_id(self, path: Path) -> str:
        """A patch file's id, read by its kind (its parse kept for `load_all`)."""
        pid, self._parsed[path] = FILE_KINDS[_kind_of(path.name)].read(path)  # type: ignore[index]
        return pid

    def patch_ids(self) -> list[str]:
        """Every patch id, derived from the module file names: cheap, imports no patch (no libcst)."""
        return list(self._module_index())

    def source_file(self, pid: str) -> Path:
        """The module file that defines a patch."""
        name, patch_set = self._module_index()[pid]
        return _file(patch_set, name)

    def is_diff(self, pid: str) -> bool:
        """Whether a patch comes from a diff file, known from its file name: for the checks made
        before any patch is loaded (a plain status imports no libcst); a loaded patch is asked
        through `kind.PatchKind` instead."""
        return _is_diff(self._module_index()[pid][0])

    def origin(self, pid: str) -> str:
        """Where a patch comes from: "built-in", "entry point NAME (DIST VERSION)" or "folder DIR"."""
        return self._module_index()[pid][1].origin

    def described(self, cls: type[Patch]) -> dict[str, Any]:
        """What `list` shows of a loaded patch beyond the fields every patch has, as its kind says."""
        kind = _kind_of(self._module_index()[cls.ID][0])
        describe = None if kind is None else FILE_KINDS[kind].describe
        return {} if describe is None else describe(cls)

    def load_all(self) -> list[type[Patch]]:
        """Every Patch class, in id order (see `stack` for the order on a shared file)."""
        found: dict[str, type[Patch] | None] = {}  # by id, in id order
        files: dict[str, list[tuple[Path, str, Any]]] = {}  # per FileKind: its files, made together
        for pid, (name, patch_set) in self._module_index().items():
            kind = _kind_of(name)
            if kind is not None:
                path = patch_set.folder / name
                if path not in self._parsed:
                    self._file_id(path)
                files.setdefault(kind, []).append((path, patch_set.origin, self._parsed[path]))
                found[pid] = None
                continue
            module = _import_patch_module(f"{patch_set.package}.{name}", patch_set.folder / f"{name}.py",
                                          patch_set.origin, bytecode=not patch_set.origin.startswith("folder "))
            found[pid] = _patch_class(module, f"{patch_set.folder / name}.py ({patch_set.origin})", pid)
        for kind, of_kind in files.items():
            found.update((cls.ID, cls) for cls in FILE_KINDS[kind].make(of_kind))
        return [cls for cls in found.values() if cls is not None]


# The run's patch sets: what the module functions below ask (the engine's callers, and View, which
# every module patch's digest holds unchanged). A command runs with its own (`running`).
_run = PatchSets()


def current() -> PatchSets:
    """The patch sets of the command running now (the built-in set and $PATCHKIT_PATCHES outside one)."""
    return _run


@contextlib.contextmanager
def running(sets: PatchSets) -> Iterator[PatchSets]:
    """`sets` as the run's for the time of one command, the one before it back after."""
    global _run
    before, _run = _run, sets
    try:
        yield sets
    finally:
        _run = before


def given_folders() -> tuple[str, ...]:
    """The --patches given on the command line, as given (a command patchkit advises names them again)."""
    return _run.folders


def incomplete() -> list[Unfinished]:
    return _run.incomplete()


def unloadable() -> list[PatchkitError]:
    return _run.unloadable()


def patch_sets() -> list[PatchSet]:
    return _run.patch_sets()


def patch_ids() -> list[str]:
    return _run.patch_ids()


def source_file(pid: str) -> Path:
    return _run.source_file(pid)


def is_diff(pid: str) -> bool:
    return _run.is_diff(pid)


def origin(pid: str) -> str:
    return _run.origin(pid)


def described(cls: type[Patch]) -> dict[str, Any]:
    return _run.described(cls)


def load_all() -> list[type[Patch]]:
    return _run.load_all()


def register(name: str, kind: FileKind) -> None:
    """Add a kind of patch file (one more entry of `FILE_KINDS`); the run's sets are listed again."""
    FILE_KINDS[name] = kind
    _run.add(())


def _patch_class(module: types.ModuleType, where: str, pid: str) -> type[Patch]:
    """The one Patch class a patch module defines, with the id its file name says."""
    from patchkit.authoring.patch import Patch

    classes = [
        obj for obj in vars(module).values()
        if inspect.isclass(obj) and issubclass(obj, Patch) and obj is not Patch and obj.__module__ == module.__name__
    ]
    if len(classes) != 1:
        raise PatchkitError(f"{where} must define exactly one Patch class, found {len(classes)}")
    if getattr(classes[0], "ID", None) != pid:
        raise PatchkitError(f"{where} declares id {getattr(classes[0], 'ID', None)!r}; the file name says {pid!r}")
    return classes[0]


def load_file(path: Path, pid: str) -> type[Patch]:
    """The patch class of one module file outside the loaded sets (a module `bump` wrote into a
    conflict tree for the user to fix), imported afresh under a name of its folder's own; a module
    that does not import is exit 2 naming the file and line, as in a set."""
    folder = path.resolve().parent
    package = "patchkit_file_" + sha256(str(folder).encode())[:12]
    module = types.ModuleType(package, f"a patch module from {folder}")
    module.__path__ = [str(folder)]
    sys.modules[package] = module
    sys.modules.pop(f"{package}.{path.stem}", None)  # read again: the user may have fixed it since
    importlib.invalidate_caches()
    origin = f"file {path}"
    return _patch_class(_import_patch_module(f"{package}.{path.stem}", path, origin, bytecode=False),
                        f"{path} ({origin})", pid)


def select(ids: list[str], only: tuple[str, ...] = (), skip: tuple[str, ...] = ()) -> list[str]:
    """The ids chosen by --only / --skip, in registry order; an unknown id is a usage error."""
    for wanted in (*only, *skip):
        if wanted not in ids:
            close = _close_to(wanted, ids)
            meant = f"did you mean {close!r}? " if close else ""
            raise UsageError(f"unknown patch id {wanted!r}; {meant}known: {', '.join(ids)} (see `patchkit list`)")
    chosen = [pid for pid in ids if not only or pid in only]
    return [pid for pid in chosen if pid not in skip]


def _close_to(wanted: str, ids: list[str]) -> str | None:
    """The one id `wanted` was likely meant to be: a close spelling, else the only id it begins."""
    import difflib

    close = difflib.get_close_matches(wanted, ids, n=1)
    if close:
        return close[0]
    starting = [pid for pid in ids if pid.startswith(wanted)]
    return starting[0] if len(starting) == 1 else None


def stack(ids: list[str], classes: dict[str, type[Patch]]) -> list[str]:
    """`ids` (patches applied to one file) in their declared stacking order: a patch comes
    after every patch it names in `STACK_AFTER`. Patches sharing a file must declare their
    order (`unordered_pairs` finds those that do not); the id order only keeps the result
    stable for patches that never share a file."""
    pending = sorted(ids)
    ordered: list[str] = []
    while pending:
        # A patch the state records that is not loaded here declares nothing (rendering a file
        # it shares is refused by the engine, naming it).
        ready = [pid for pid in pending
                 if not any(dep in pending for dep in getattr(classes.get(pid), "STACK_AFTER", ()))]
        if not ready:
            raise PatchkitError(f"patches {', '.join(pending)} declare a cycle in STACK_AFTER")
        ordered.append(ready[0])
        pending.remove(ready[0])
    return ordered


def unordered_pairs(classes: list[type[Patch]]) -> list[tuple[str, str, str]]:
    """(file, id, id) for each pair of patches that target the same file without a declared
    order between them (directly or through others)."""
    by_id = {cls.ID: cls for cls in classes}

    def before(a: str, b: str) -> bool:  # is a declared (transitively) before b?
        seen: set[str] = set()
        todo = list(by_id[b].STACK_AFTER)
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


def knows(version: str) -> bool:
    """Whether patchkit knows anything about a release: a manifest for it, or a loaded patch
    whose declared range holds it."""
    from patchkit.releases import manifest, versions

    if manifest.find(version) is not None:
        return True
    wanted = versions.parse(version, what="--target")
    return any(cls.specifier().contains(wanted, prereleases=True) for cls in load_all())


def check_known(version: str) -> None:
    """Refuse, before any download, a release patchkit knows nothing about: it has no manifest
    for it and no loaded patch declares a range holding it (FetchError, exit 3)."""
    from patchkit.releases import manifest

    if knows(version):
        return
    known = manifest.available()
    raise FetchError(f"patchkit knows nothing about SGLang {version}: no manifest (it has "
                     f"{', '.join(known) or 'none'}) and no patch declares a range holding it; nothing downloaded")
