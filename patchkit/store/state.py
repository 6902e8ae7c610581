"""The state file and the backups folder under `<site>/.patchkit/` (the lock: patchkit.store.lock).

Everything under `.patchkit/` is patchkit's own: it must be plain files and folders, never a
symlink or anything else (`check_state_dir`), files there are opened without following
symlinks, and the state file is validated against its schema before anything trusts it.
"""

from __future__ import annotations

import errno
import json
import os
import re
import stat
from dataclasses import dataclass, field
from pathlib import Path

from patchkit.base.lean_typing import TYPE_CHECKING
from patchkit import __version__
from patchkit.base.constants import (
    BACKUPS_DIR, JOURNAL_FILE, OVERWRITTEN_DIR, PACKAGE, PENDING_DIR, STATE_DIR,
    STATE_FILE, STATE_SCHEMA, STATE_SCHEMAS_READ,
)

READABLE_SCHEMAS = STATE_SCHEMAS_READ  # schema 1 files (no patch digests) are still read
from patchkit.base.errors import (
    EnvironmentFailure, NotPlainStateFile, StateError, UnsafeStateError, environment_failure,
    is_environment_failure,
)
from patchkit.base.patch_id import is_patch_id
from patchkit.base.util import atomic_write, sha256

if TYPE_CHECKING:
    from typing import Any
    from patchkit.store.target import Target

_HEX64 = re.compile(r"[0-9a-f]{64}\Z")


@dataclass
class FileRecord:
    pristine: str | None  # sha256 of the release's bytes; None when patchkit added the file
    patched: str | None  # sha256 of the bytes patchkit wrote; None when it removed the file (a diff's deleted file)
    patches: list[str]  # the patch ids that shaped this file, in stacking order
    # {patch id: sha256 of that patch's source} when the file was rendered (schema 2; empty
    # when read from a schema-1 file): a changed patch makes the file `outdated`.
    digests: dict[str, str] = field(default_factory=dict)


@dataclass
class State:
    sglang_version: str
    patches: list[str] = field(default_factory=list)
    files: dict[str, FileRecord] = field(default_factory=dict)
    patchkit_version: str = __version__
    # The runtime report's files patchkit added outside `sglang/` ({rel: sha256}, see
    # patchkit/store/runtime_plugin.py), and their folder when it is not the site folder (an editable install).
    runtime: dict[str, str] = field(default_factory=dict)
    runtime_dir: str | None = None

    def files_of(self, patch_id: str) -> list[str]:
        return [rel for rel, record in self.files.items() if patch_id in record.patches]

    def to_dict(self) -> dict[str, Any]:
        return {
            "schema": STATE_SCHEMA,
            "patchkit_version": self.patchkit_version,
            "sglang_version": self.sglang_version,
            "patches": list(self.patches),
            "files": {
                rel: {"pristine_sha256": r.pristine, "patched_sha256": r.patched, "patches": list(r.patches),
                      "patch_sha256": dict(r.digests)}
                for rel, r in sorted(self.files.items())
            },
            "runtime": {"dir": self.runtime_dir, "files": dict(sorted(self.runtime.items()))},
        }

    @classmethod
    def from_dict(cls, data: object, where: str) -> "State":
        """A state validated field by field; anything off is a StateError naming the field."""
        return _validate(data, where)


# --- schema validation ------------------------------------------------------------------------


class Invalid(Exception):
    pass


def need(ok: bool, what: str) -> None:
    if not ok:
        raise Invalid(what)


def _str(value: object, what: str) -> str:
    need(isinstance(value, str) and value != "" and "\0" not in value, f"{what} must be a non-empty string")
    return value  # type: ignore[return-value]


def sha_field(value: object, what: str, nullable: bool = False) -> str | None:
    if value is None and nullable:
        return None
    need(isinstance(value, str) and bool(_HEX64.match(value)),
          f"{what} must be {'null or ' if nullable else ''}a sha256 (64 lowercase hex digits)")
    return value  # type: ignore[return-value]


def _patch_id(value: object, what: str) -> str:
    need(is_patch_id(value), f"{what} must be a patch id")
    return value  # type: ignore[return-value]


def keys_of(value: object, what: str, required: set[str], optional: set[str] = frozenset()) -> dict[str, Any]:  # type: ignore[assignment]
    if not isinstance(value, dict):
        raise Invalid(f"{what} must be an object")
    keys = set(value)
    need(not required - keys, f"{what} lacks {', '.join(sorted(required - keys))}")
    need(not keys - required - optional, f"{what} has unknown field(s) {', '.join(sorted(map(str, keys - required - optional)))}")
    return value


def file_path(value: object, what: str) -> str:
    """A path patchkit may write: inside `sglang/`, or one of the runtime report's files."""
    from patchkit.store.target import is_runtime_file

    if isinstance(value, str) and is_runtime_file(value):
        return value
    return package_path(value, what)


def package_path(value: object, what: str) -> str:
    """A path relative to the site folder that stays inside `sglang/` (no `..`, not absolute)."""
    rel = _str(value, what)
    parts = rel.split("/")
    need(parts[0] == PACKAGE and len(parts) > 1 and all(p not in ("", ".", "..") for p in parts) and "\\" not in rel,
          f"{what} {rel!r} is not a path inside {PACKAGE}/")
    return rel


def _validate(data: object, where: str) -> State:
    try:
        top = keys_of(data, "the state", {"schema", "patchkit_version", "sglang_version", "patches", "files"},
                      {"runtime"})
        need(type(top["schema"]) is int and top["schema"] in STATE_SCHEMAS_READ,
              f"schema {top['schema']!r} is not one this patchkit reads ({', '.join(map(str, STATE_SCHEMAS_READ))})")
        schema = top["schema"]
        need("runtime" not in top or schema >= 3, "runtime is a field of schema 3")
        runtime = keys_of(top.get("runtime", {"dir": None, "files": {}}), "runtime", {"dir", "files"})
        need(runtime["dir"] is None or (isinstance(runtime["dir"], str) and os.path.isabs(runtime["dir"])),
              "runtime.dir must be null or an absolute path")
        need(isinstance(runtime["files"], dict), "runtime.files must be an object")
        runtime_files = {file_path(rel, "a runtime.files key"): str(sha_field(sha, f"runtime.files[{rel!r}]"))
                         for rel, sha in runtime["files"].items()}
        need(all(not rel.startswith(PACKAGE + "/") for rel in runtime_files), "runtime.files lists a file of sglang/")
        patches = top["patches"]
        need(isinstance(patches, list), "patches must be a list")
        ids = [_patch_id(p, "each of patches") for p in patches]
        need(len(set(ids)) == len(ids), "patches lists an id twice")
        need(isinstance(top["files"], dict), "files must be an object")
        files: dict[str, FileRecord] = {}
        for rel, raw in top["files"].items():
            rel = package_path(rel, "a files key")
            fields = {"pristine_sha256", "patched_sha256", "patches"}
            record = keys_of(raw, f"files[{rel!r}]", fields | ({"patch_sha256"} if schema >= 2 else set()))
            on = record["patches"]
            need(isinstance(on, list) and on != [], f"files[{rel!r}].patches must be a non-empty list")
            on_ids = [_patch_id(p, f"each of files[{rel!r}].patches") for p in on]
            need(set(on_ids) <= set(ids), f"files[{rel!r}].patches names a patch that patches does not list")
            digests = record.get("patch_sha256", {})
            need(isinstance(digests, dict), f"files[{rel!r}].patch_sha256 must be an object")
            # patched null: a file the patch removed (a diff's deleted file); never both null.
            need(record["pristine_sha256"] is not None or record["patched_sha256"] is not None,
                 f"files[{rel!r}] has neither pristine_sha256 nor patched_sha256")
            files[rel] = FileRecord(
                pristine=sha_field(record["pristine_sha256"], f"files[{rel!r}].pristine_sha256", nullable=True),
                patched=sha_field(record["patched_sha256"], f"files[{rel!r}].patched_sha256", nullable=True),
                patches=on_ids,
                digests={_patch_id(k, f"a files[{rel!r}].patch_sha256 key"): str(sha_field(v, f"files[{rel!r}].patch_sha256[{k!r}]"))
                         for k, v in digests.items()},
            )
        return State(sglang_version=_str(top["sglang_version"], "sglang_version"), patches=ids, files=files,
                     patchkit_version=_str(top["patchkit_version"], "patchkit_version"),
                     runtime=runtime_files, runtime_dir=runtime["dir"])
    except Invalid as exc:
        raise StateError(f"{where} is corrupt, not a valid patchkit state file: {exc}; nothing was written "
                         f"(restore it, or reinstall SGLang and remove {Path(where).parent})") from None


def runtime_root(target: Target, state: State) -> Path | None:
    """The folder the runtime report of `state` is in (None: the site folder): its recorded
    `runtime.dir`, trusted only where patchkit writes the report for this target
    (`target.is_runtime_root`); a record naming any other folder is corrupt (StateError, exit 1),
    so that no run writes or removes a file outside the install it was named."""
    from patchkit.store.target import is_runtime_root

    if state.runtime_dir is None:
        return None
    if not is_runtime_root(target, Path(state.runtime_dir)):
        where = state_path(target.site)
        raise StateError(f"{where} is corrupt, not a valid patchkit state file: runtime.dir {state.runtime_dir!r} is not "
                         f"where patchkit writes the runtime report for the SGLang in {target.site} (that folder, or "
                         f"the site-packages of its editable install); nothing was written (restore it, or reinstall "
                         f"SGLang and remove {where.parent})")
    return Path(state.runtime_dir)


# --- paths ------------------------------------------------------------------------------------


def state_dir(site: Path) -> Path:
    return site / STATE_DIR


def state_path(site: Path) -> Path:
    return state_dir(site) / STATE_FILE


def journal_path(site: Path) -> Path:
    return state_dir(site) / JOURNAL_FILE


def pending_dir(site: Path) -> Path:
    return state_dir(site) / PENDING_DIR


def backup_path(site: Path, rel: str) -> Path:
    return state_dir(site) / BACKUPS_DIR / rel


def overwritten_dir(site: Path) -> Path:
    return state_dir(site) / OVERWRITTEN_DIR


def check_state_dir(site: Path) -> None:
    """Refuse (exit 3, nothing touched) a `.patchkit/` holding anything but plain files and
    folders: a symlink there could make patchkit write, copy or delete outside the package."""
    root = state_dir(site)
    try:
        top = os.lstat(root)
    except FileNotFoundError:
        return
    except OSError as exc:
        raise environment_failure(exc) from None
    if not stat.S_ISDIR(top.st_mode):
        kind = "a symlink" if stat.S_ISLNK(top.st_mode) else "not a folder"
        raise UnsafeStateError(f"{root} is {kind}; patchkit refuses to use it (nothing was written or deleted). "
                               f"Remove it if it is not patchkit's own")
    for folder, dirs, names in os.walk(root, onerror=_raise):
        for name in dirs + names:
            path = os.path.join(folder, name)
            try:
                mode = os.lstat(path).st_mode
            except FileNotFoundError:
                continue  # the lock file of a run finishing right now
            if not (stat.S_ISREG(mode) or stat.S_ISDIR(mode)):
                kind = "a symlink" if stat.S_ISLNK(mode) else "not a plain file or folder"
                refusal = UnsafeStateError if stat.S_ISLNK(mode) else NotPlainStateFile  # exit 3 / 6
                raise refusal(f"{path} is {kind}; patchkit refuses to use {root} (nothing was written or "
                              "deleted). Remove it if it is not patchkit's own")


def _raise(exc: OSError) -> None:
    if isinstance(exc, FileNotFoundError):
        return  # removed by a run finishing right now
    raise environment_failure(exc)


def read_private(path: Path) -> bytes | None:
    """A file under `.patchkit/`, opened without following a symlink and without blocking (a
    FIFO put there is refused, not waited on); None when absent."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except FileNotFoundError:
        return None
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise UnsafeStateError(f"{path} is a symlink; patchkit refuses to read it (nothing was written)") from None
        raise
    mode = os.fstat(fd).st_mode
    if not stat.S_ISREG(mode):
        os.close(fd)
        if stat.S_ISDIR(mode):
            raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR), str(path))
        raise NotPlainStateFile(f"{path} is not a plain file; patchkit refuses to read it (nothing was written)")
    os.set_blocking(fd, True)
    with os.fdopen(fd, "rb") as handle:
        return handle.read()


# --- the state file ---------------------------------------------------------------------------


def load(site: Path) -> State | None:
    check_state_dir(site)
    path = state_path(site)
    try:
        raw = read_private(path)
    except OSError as exc:
        if is_environment_failure(exc):
            raise environment_failure(exc) from None
        raise
    if raw is None:
        return None
    try:
        data = json.loads(raw)
    except (ValueError, RecursionError):  # RecursionError: nested too deep to be a state file
        raise StateError(f"{path} is corrupt (not JSON); nothing was written (restore it, or reinstall SGLang "
                         f"and remove {state_dir(site)})") from None
    state = State.from_dict(data, str(path))
    added = [rel for rel, record in state.files.items() if record.pristine is None]
    release = _release_files(site) if added else set()  # read once, only when a record claims an added file
    for rel in added:
        if rel in release:
            raise StateError(f"{path} is not a valid patchkit state file: it records {rel}, a file of the SGLang "
                             f"release, as added by patchkit; nothing was written")
    return state


def _release_files(site: Path) -> set[str]:
    """Paths the installed release's RECORD lists (only read when a record claims an added file)."""
    found: set[str] = set()
    for record in site.glob(f"{PACKAGE}-*.dist-info/RECORD"):
        found.update(line.split(",", 1)[0] for line in record.read_text(encoding="utf-8", errors="replace").splitlines())
    return found


def dumps(state: State) -> bytes:
    return (json.dumps(state.to_dict(), indent=2) + "\n").encode()


def save(site: Path, state: State) -> None:
    atomic_write(state_path(site), dumps(state), 0o644)


def read_backup(site: Path, rel: str, expected: str | None = None) -> bytes:
    """The backed-up pristine bytes of `rel`, checked against the recorded sha256 when given."""
    path = backup_path(site, rel)
    try:
        data = read_private(path)
    except IsADirectoryError:
        raise EnvironmentFailure(f"{path}: a folder where the backup of {rel} should be (EISDIR); nothing was "
                                 f"written or removed. Put the backup file back, or reinstall SGLang to get the "
                                 f"pristine file, then remove {state_dir(site)}") from None
    if data is None:
        raise StateError(f"backup of {rel} is missing ({path}); nothing was written. Reinstall SGLang to get the "
                         f"pristine file, then remove {state_dir(site)}")
    if expected is not None and sha256(data) != expected:
        raise StateError(f"backup of {rel} ({path}) does not match the pristine sha256 recorded for it; it is "
                         f"tampered or corrupt and was not used (nothing was written). Reinstall SGLang to get the "
                         f"pristine file, then remove {state_dir(site)}")
    return data
