"""`capture`: the files of an installed SGLang that were edited by hand, as a diff patch
(patch-package's workflow). Nothing in the tree is written or recorded.

Which files changed is told by hashes first: each file under `sglang/` against the sha256 its
dist-info RECORD lists (no wheel needed when nothing changed), or, where the tree has no RECORD
(an editable install, a source tree), against the CRC-32 of the release's wheel. Only those are
diffed, against the release's pristine bytes from its wheel.

Bytes patchkit wrote are not a hand edit: a file `.patchkit/state.json` records with the bytes
patchkit wrote there is left out. A recorded file whose bytes changed since is refused (exit
4): a hand edit on top of a patch cannot be told from drift of that patch (the diff would hold
the patch's own change, and `revert` would restore the release's bytes over the edit); revert
that patch first (`patchkit revert --only ID --force` keeps a copy of the bytes), redo the
edit, capture again.
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass
from typing import Any, Callable, Protocol

from patchkit.releases import dist_record
from patchkit.diffs import format_patch
from patchkit.engine import registry
from patchkit.store import stale
from patchkit.store import state as state_mod
from patchkit.base.errors import DriftError, PlanError, TargetError, UsageError
from patchkit.base.patch_id import PATCH_ID_RULE, is_patch_id
from patchkit.store.target import Target
from patchkit.base.util import sha256

DIFF_SUFFIX = ".patch"


class WheelLike(Protocol):
    """What capture reads of a release's wheel (releases.WheelSource)."""

    def read(self, rel: str) -> bytes | None: ...

    def fingerprint(self, rel: str) -> str: ...

    def package_files(self) -> list[str]: ...


@dataclass(frozen=True)
class Capture:
    id: str
    version: str
    data: bytes  # the diff patch file
    files: tuple[dict[str, Any], ...]  # {file, added, removed, new}
    notes: tuple[str, ...]


def _tree_files(target: Target) -> list[str]:
    return sorted(path.relative_to(target.site).as_posix() for path in target.package_dir.rglob("*")
                  if path.is_file() and not path.is_symlink() and "__pycache__" not in path.parts
                  and not path.name.endswith((".pyc", ".pyo")))


def changed_files(target: Target, wheel: Callable[[], WheelLike]) -> tuple[list[str], int]:
    """(the package files whose bytes are not the release's, sorted; how many release files
    are missing from the tree). `wheel` gives the release's wheel, asked for only without RECORD."""
    record = dist_record.release_hashes(target.site, target.version)
    present = _tree_files(target)
    changed: list[str] = []
    if record is not None:
        for rel in present:
            expected = record.get(rel)
            data = target.read(rel)
            if expected is None or data is None or len(data) != expected[1] or sha256(data) != expected[0]:
                changed.append(rel)
        return changed, len(set(record) - set(present) - {r for r in record if "__pycache__" in r})
    source = wheel()
    for rel in present:
        data = target.read(rel) or b""
        if source.fingerprint(rel) != f"{zlib.crc32(data):08x}:{len(data)}":
            changed.append(rel)
    return changed, len(set(source.package_files()) - set(present))


def check_id(pid: str) -> None:
    """A valid id that no loaded patch has (exit 2), checked before anything is read."""
    if not is_patch_id(pid):
        raise UsageError(f"patch id {pid!r}: {PATCH_ID_RULE} (e.g. my-offload-fix)")
    if pid in registry.patch_ids():
        raise UsageError(f"patch id {pid!r} exists already ({registry.origin(pid)}); choose another id")


def capture(target: Target, pid: str, wheel: Callable[[], WheelLike]) -> Capture:
    check_id(pid)
    recorded = stale.stale_state(target)
    if recorded is not None:
        raise TargetError(f"stale state: {state_mod.state_dir(target.site)} records SGLang {recorded.sglang_version} "
                          f"but {target.version} is installed; `{target.naming.command('clean')}` removes it, then capture")
    if state_mod.journal_path(target.site).exists():
        raise PlanError("an interrupted patchkit run is pending (its files may be half written); "
                        f"`{target.naming.command('apply')}` or `{target.naming.command('revert')}` finishes it, "
                        "then capture")
    state = state_mod.load(target.site)
    changed, missing = changed_files(target, wheel)
    notes: list[str] = []
    if missing:
        notes.append(f"{missing} file(s) of the release are not in the tree; a removed file is not captured")
    ours = [rel for rel in changed if state and rel in state.files]
    drifted = [rel for rel in ours if (None if (data := target.read(rel)) is None else sha256(data))
               != state.files[rel].patched]  # type: ignore[union-attr]
    if drifted:
        rel = drifted[0]
        patches = ", ".join(state.files[rel].patches)  # type: ignore[union-attr]
        raise DriftError(f"{rel} carries patch {patches} and was changed since patchkit wrote it: a hand edit there "
                         f"cannot be told from drift of {patches}; nothing written "
                         f"(`{target.naming.command('revert', '--only', state.files[rel].patches[0], '--force')}` "  # type: ignore[union-attr]
                         "keeps a copy of the bytes; redo the edit, then capture)")
    edited = [rel for rel in changed if rel not in ours]
    if ours:
        notes.append(f"left out {len(ours)} file(s) patchkit wrote ({', '.join(ours)})")
    if not edited:
        raise PlanError(f"nothing to capture: every file of {target.package_dir} has the bytes of SGLang "
                        f"{target.version}{' or those patchkit wrote' if ours else ''}")
    source = wheel()
    changes: list[format_patch.FileChange] = []
    binary: list[str] = []
    added: list[str] = []
    for rel in edited:
        before, after = source.read(rel), target.read(rel)
        if before is None:  # a diff patch changes the release's files; it does not add one
            added.append(rel)
            continue
        if not _is_text(before) or not _is_text(after):
            binary.append(rel)
            continue
        changes.append(format_patch.FileChange(rel, before, after))
    if added:
        notes.append(f"left out {len(added)} file(s) the release does not have ({', '.join(added)}): a diff patch "
                     "changes the release's files, it does not add new ones")
    if binary:
        notes.append(f"left out {len(binary)} file(s) that are not text ({', '.join(binary)})")
    if not changes:
        raise PlanError(f"nothing to capture: the changed files of {target.package_dir} are new or not text "
                        f"({', '.join(added + binary)})")
    data = _header(pid, target, len(changes)) + format_patch.git_diff(changes)
    files = tuple({"file": c.rel, "new": c.before is None, "added": added, "removed": removed}
                  for c in changes for added, removed in (format_patch.counts(c),))
    return Capture(id=pid, version=target.version, data=data, files=files, notes=tuple(notes))


def _is_text(data: bytes | None) -> bool:
    if data is None:
        return True
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return b"\0" not in data


def _header(pid: str, target: Target, count: int) -> bytes:
    trailers = format_patch.Trailers(id=pid, title=f"Hand edits of {count} file(s) of SGLang {target.version}")
    lines = [*trailers.lines(),
             f"Patchkit-Rationale: edited by hand in {target.package_dir}, captured by `patchkit capture` against "
             f"the files of the SGLang {target.version} wheel (say here why the change is needed)", ""]
    return ("\n".join(lines) + "\n").encode()
