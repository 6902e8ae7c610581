"""The working-tree route for a rebase's conflicts: `rebase --tree DIR` writes release V's files of
the rebased diff (each section's file, with its conflict blocks) into DIR, under their package
paths, and a record of the rebase (`.patchkit-rebase.json`); the user resolves the blocks there
with any editor; `rebase --continue DIR` turns the files back into the finished diff: the input's
header and path prefix, V's blob hashes, a section per file that differs from V's.

A conflict block in a .patch file spans the release's lines as `+` lines and cannot be resolved
by editing the diff; in the tree it is plain code. `finish` is what `bump --continue` reuses per patch.
"""

from __future__ import annotations

import base64
import json
import os
import re
import stat
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from patchkit.base.errors import PlanError, UsageError
from patchkit.base.util import read_regular, sha256, write_new_folder
from patchkit.diffs import format_patch
from patchkit.diffs.rebase import Rebased, write_diff
from patchkit.diffs.unidiff import DiffPatchFile
from patchkit.store.naming import Naming

RECORD = ".patchkit-rebase.json"
SCHEMA = 1
_LIMIT = 64 << 20  # bytes: the record holds the input's header, not its hunks
_MARKER = re.compile(rb"^(<<<<<<< release|=======$|>>>>>>> patch)", re.M)


@dataclass(frozen=True)
class Finished:
    id: str
    to: str
    name: str  # the input diff's file name
    data: bytes  # the finished diff
    files: tuple[str, ...]  # the sections written
    dropped: tuple[str, ...]  # files of the tree left with V's bytes (no section)
    not_created: tuple[str, ...] = ()  # files V lacks, emptied by the resolution (in `dropped` too)
    taken: tuple[str, ...] = ()  # files of V the diff did not change, edited in the tree: in the finished diff
    digests: dict[str, str] = field(default_factory=dict)  # sha256 of each file of the tree as it was read
    # Each section's file as the tree was made on (V's, or the diffs under it left it) and as resolved.
    changes: tuple[format_patch.FileChange, ...] = ()

    @property
    def notes(self) -> tuple[str, ...]:
        """What the finished diff leaves out by the user's hand, one line each."""
        return (*(f"not created: {rel} (SGLang {self.to} has no such file and the resolution left it empty; "
                  "the diff's change to it is dropped)" for rel in self.not_created),
                *(f"taken: {rel} (a file of SGLang {self.to} the diff did not change, edited in the tree: its "
                  "change is in the finished diff)" for rel in self.taken))


def check_empty(folder: Path) -> None:
    """`--tree DIR` must be a new or empty folder: nothing of the user's is overwritten."""
    if folder.exists() and (not folder.is_dir() or any(folder.iterdir())):
        raise UsageError(f"--tree {folder}: not an empty folder; name a new one (nothing of yours is overwritten)")


def write_tree(made: Rebased, data: bytes, folder: Path) -> list[str]:
    """V's files of the rebased diff with their conflict blocks, and the record; the files written.
    `folder` must be empty or not exist (nothing of the user's is overwritten)."""
    check_empty(folder)
    files = tree_files(made, data)
    write_new_folder(folder, files)  # whole or not at all: a failure leaves `folder` as it was
    return [rel for rel in files if rel != RECORD]


def tree_files(made: Rebased, data: bytes, release: Callable[[str], bytes | None] | None = None,
               unchanged: dict[str, bytes] | None = None) -> dict[str, bytes]:
    """The tree in memory: {path in the folder: bytes}, V's file of each section (a file the diff
    deletes: nothing to edit) and the record (`data`: the input diff, whose header it keeps). Where
    a file was made on other bytes than V's (a lower diff's post-image; `release`: V's files), the
    record keeps them as its base: the finished diff is the change from them, and only that.
    `unchanged`: {file: bytes} put in the tree as they are, with themselves as base (a file of an
    earlier tree of the diff that has nothing left to do)."""
    files = {change.rel: change.after for change in made.changes if change.after is not None}
    existed = {c.rel: c.before is not None for c in made.changes}
    record: dict[str, object] = {"schema": SCHEMA, "id": made.diff.id, "name": made.diff.name, "to": made.to,
                                 "prefix": made.diff.prefix, "files": existed,
                                 "header": base64.b64encode(data[:_header_end(data)]).decode()}
    shared = {rel for files in made.stacked_on.values() for rel in files}
    base = {c.rel: c.before for c in made.changes if c.before is not None and
            (c.rel in shared or release is not None and release(c.rel) != c.before)}
    for rel, content in (unchanged or {}).items():
        files[rel] = base[rel] = content
        existed[rel] = True
    deleted = sorted(c.rel for c in made.changes if c.after is None and c.before is not None)
    if deleted:  # not in the tree: absent there is the deletion, not a change the user dropped
        record["deleted"] = deleted
    if base:  # made on a lower diff's file: that file is its pre-image, not V's
        record["base"] = {rel: base64.b64encode(content).decode() for rel, content in base.items()}
    return {**files, RECORD: json.dumps(record, indent=1).encode()}


def applied_tree(diff: DiffPatchFile, data: bytes, to: str, after: Callable[[str], bytes | None],
                 base: dict[str, bytes | None] | None = None) -> dict[str, bytes]:
    """The tree of a diff that applies on V but must be fixed there (`bump`: it breaks on V): each
    file of the diff as `after` has it (V's, the diff applied) and the record, as `tree_files` makes
    them; `base`: its files as the diffs before it left them, where they are not V's (kept in the
    record: `finish` diffs against them, V's files otherwise; None: one they deleted)."""
    files = {f.path: content for f in diff.files if f.new_path is not None for content in [after(f.path)]
             if content is not None}
    record: dict[str, object] = {"schema": SCHEMA, "id": diff.id, "name": diff.name, "to": to, "prefix": diff.prefix,
                                 "header": base64.b64encode(data[:_header_end(data)]).decode(),
                                 "files": {f.path: f.old_path is not None for f in diff.files}}
    if any(f.new_path is None for f in diff.files):
        record["deleted"] = sorted(f.path for f in diff.files if f.new_path is None)
    # (a file the diffs before it deleted, None there, is one it creates: no base kept)
    kept = {f.path: content for f in diff.files for content in [(base or {}).get(f.path)] if content is not None}
    if kept:
        record["base"] = {rel: base64.b64encode(content).decode() for rel, content in kept.items()}
    return {**files, RECORD: json.dumps(record, indent=1).encode()}


def _header_end(data: bytes) -> int:
    from patchkit.diffs import unidiff
    from patchkit.diffs.units import split_lines

    lines = split_lines(data)
    end = next((i for i in range(len(lines)) if unidiff._is_file_start(lines, i)), len(lines))
    return sum(len(line) for line in lines[:end])


def read_record(folder: Path) -> dict:
    path = folder / RECORD
    try:
        record = json.loads(read_regular(path, _LIMIT))
    except FileNotFoundError:
        raise UsageError(f"--continue {folder}: no {RECORD} there (write the tree with `patchkit rebase PATCH "
                         "--to V --tree DIR`)") from None
    except (OSError, ValueError) as exc:
        raise UsageError(f"--continue {folder}: {RECORD} cannot be read ({exc})") from None
    if not isinstance(record, dict) or record.get("schema") != SCHEMA or not isinstance(record.get("files"), dict):
        raise UsageError(f"--continue {folder}: {RECORD} is not a rebase record patchkit wrote")
    why = _damaged(record)
    if why:
        raise UsageError(f"--continue {folder}: {folder / RECORD} is damaged ({why}); nothing written")
    return record


def _damaged(record: dict) -> str | None:
    """What in a rebase record read back is not as `tree_files` writes it: a key missing or of the
    wrong type, a file name that is not a plain file name (`name`: the finished diff is written
    under it) or a path inside the tree (`files`, `base`); None when nothing is."""
    import binascii

    from patchkit.base.confined import bad_name

    for key in ("id", "name", "to", "prefix", "header"):
        if not isinstance(record.get(key), str):
            return f"{key!r} missing or not a string"
    why = bad_name(record["name"]) or ("a path, not a file name" if "/" in record["name"] else None)
    if why:
        return f"name: {json.dumps(record['name'])[:80]} is {why}"
    base = record.get("base", {})
    if not isinstance(base, dict):
        return "base: not an object"
    deleted = record.get("deleted", [])
    if not isinstance(deleted, list) or any(not isinstance(rel, str) or rel not in record["files"] for rel in deleted):
        return "deleted: not a list of the record's files"
    for rel, existed in record["files"].items():
        if bad_name(rel) or not isinstance(existed, bool):
            return f"files: {json.dumps(rel)[:80]} is not a file of the tree"
    for rel, data in [("header", record["header"]), *base.items()]:
        try:
            if bad_name(rel) and rel != "header" or not isinstance(data, str):
                raise ValueError
            base64.b64decode(data, validate=True)
        except (ValueError, binascii.Error):
            return f"{'header' if rel == 'header' else 'base: ' + json.dumps(rel)[:80]} is not base64 of a file"
    return None


def finish(folder: Path, read: Callable[[str], bytes | None], again: str | None = None) -> Finished:
    """The finished diff from a resolved tree (`read`: release V's pristine files). A file still
    holding a conflict marker line is refused, naming the file and line and `again`, the command
    to run once it is mended (default `patchkit rebase --continue DIR`; bump names its own). A
    file V does not have whose resolution is empty (only whitespace: its blocks deleted) is not
    created; a symlink or anything but a plain file or folder in the tree is refused (UsageError),
    never followed.

    A resolution may move the change to another file: a file of V's package the diff did not
    change, put in the tree at its path (`sglang/...`) and edited there, is taken into the finished
    diff (`taken`, a note each); one left as V has it adds nothing. A file there that cannot be taken
    (not a file of V's package, or unreadable) is an error naming it (PlanError), never left out in
    silence; Python's own `__pycache__` folders are not read."""
    record = read_record(folder)
    present = _tree_entries(folder)
    again = again or continue_command(folder)
    changes: list[format_patch.FileChange] = []
    dropped: list[str] = []
    not_created: list[str] = []
    taken: list[str] = []
    digests: dict[str, str] = {}
    deleted = set(record.get("deleted", ()))
    for rel, existed in record["files"].items():
        stacked = record.get("base", {}).get(rel) if isinstance(record.get("base"), dict) else None
        if rel not in present:
            gone = None if rel not in deleted else base64.b64decode(stacked) if isinstance(stacked, str) else read(rel)
            if gone is None:
                dropped.append(rel)  # deleted from the tree: the user dropped that change
            else:
                changes.append(format_patch.FileChange(rel, gone, None))  # the diff deletes it: carried
            continue
        now = _resolved(folder, rel, again)
        digests[rel] = sha256(now)
        before = base64.b64decode(stacked) if isinstance(stacked, str) else read(rel) if existed else None
        if before is None and not now.strip():  # V lacks it and the user deleted its blocks: no empty module
            not_created.append(rel)
            dropped.append(rel)
            continue
        if now == before:
            dropped.append(rel)
            continue
        changes.append(format_patch.FileChange(rel, before, now))
    for rel in sorted(present - set(record["files"])):  # put there by the user: a file of V, or an error
        if "__pycache__" in rel.split("/"):
            continue
        before = read(rel) if rel.split("/")[0] == "sglang" else None
        if before is None:
            raise PlanError(f"{folder / rel}: not a file of SGLang {record['to']}'s package, so its change cannot be "
                            "taken into the diff (a file put in the tree must be one of that release's, at its "
                            f"path under sglang/); move it there or delete it, then run `{again}` again")
        now = _resolved(folder, rel, again)
        digests[rel] = sha256(now)
        if now != before:
            taken.append(rel)
            changes.append(format_patch.FileChange(rel, before, now))
    if not changes:
        raise PlanError(f"--continue {folder}: every file has SGLang {record['to']}'s bytes; nothing to write")
    header = base64.b64decode(record["header"])
    return Finished(record["id"], record["to"], record["name"], write_diff(header, record["prefix"], changes),
                    tuple(c.rel for c in changes), tuple(dropped), tuple(not_created), tuple(taken), digests,
                    tuple(changes))


def _resolved(folder: Path, rel: str, again: str) -> bytes:
    """A file of the tree as the user left it: unreadable, or still holding a conflict marker line,
    is an error naming it (FILE:LINE for a marker) and `again`, the command to run once it is mended."""
    path = folder / rel
    try:
        now = read_regular(path, flags=os.O_NOFOLLOW)
    except OSError as exc:
        raise PlanError(f"{path}: cannot be read ({exc.strerror or exc}); make it readable or delete it, then run "
                        f"`{again}` again") from None
    marker = _MARKER.search(now)
    if marker:
        line = now.count(b"\n", 0, marker.start()) + 1
        raise PlanError(f"{path}:{line}: a conflict block is still there ({marker.group().decode()}); resolve "
                        "it (make the change where the code is, delete the marker lines), then run "
                        f"`{again}` again")
    return now


def continue_command(folder: Path, out: str | None = None) -> str:
    """`patchkit rebase --continue DIR [-o OUT]`, pasteable as printed (store/naming quotes each word)."""
    return Naming().command("rebase", "--continue", str(folder), *(("-o", out) if out else ()))


_RELEASE_IN_NAME = re.compile(r"\d+\.\d+\.\d+(?:\.post\d+)?")


def name_for(name: str, to: str) -> str:
    """The file name to write a diff re-made for V under (`--continue -o`), never the input's own:
    the release the input's name holds replaced by V (`v0.5.15.post1-sglang.patch` for 0.5.17:
    `v0.5.17-sglang.patch`, the field's one diff per release), else V put before its suffix
    (`offload-tied.diff`: `offload-tied-0.5.17.diff`)."""
    suffix = next((s for s in (".patch", ".diff") if name.endswith(s) and len(name) > len(s)), "")
    stem = name[:len(name) - len(suffix)]
    found = _RELEASE_IN_NAME.findall(stem)
    made = _RELEASE_IN_NAME.sub(to, stem) if len(found) == 1 else f"{stem}-{to}"
    return (made if made != stem else f"{stem}-rebased") + suffix


def _tree_entries(folder: Path) -> set[str]:
    """The plain files under `folder` ('/'-separated, the record left out). A symlink is refused,
    never followed (it would put a file from outside the tree into the diff), as is a FIFO, socket
    or device (exit 2, naming it)."""
    found: set[str] = set()
    for top, dirs, names in os.walk(folder, onerror=_raise):
        for name in [*dirs, *names]:
            path = Path(top, name)
            mode = os.lstat(path).st_mode
            if stat.S_ISLNK(mode) or not (stat.S_ISDIR(mode) or stat.S_ISREG(mode)):
                kind = "a symlink" if stat.S_ISLNK(mode) else "not a plain file or folder"
                raise UsageError(f"--continue {folder}: {path} is {kind}; patchkit does not follow or read it "
                                 "(put the file itself there, or delete it)")
            if stat.S_ISREG(mode):
                found.add(path.relative_to(folder).as_posix())
    found.discard(RECORD)
    return found


def _raise(exc: OSError) -> None:
    raise exc


@dataclass(frozen=True)
class StackTree:
    """One diff of a stack rebased with `--tree`: its tree (`NAME.tree`, "" where none was written)."""
    id: str
    name: str  # the input's file name (`--continue -o` writes `name_for` it)
    to: str
    tree: str
    files: tuple[str, ...] = ()
    conflicts: tuple = ()  # unit_merge.UnitOutcome
    notes: tuple[str, ...] = ()
    waits_on: tuple[str, ...] = ()  # lower diffs it depends on (Rebased.depends_on)
    upstream: str = ""  # why no tree: V already has the whole change

    def to_dict(self) -> dict:
        return {"id": self.id, "tree": self.tree or None, "files": list(self.files),
                "conflicts": [u.to_dict() for u in self.conflicts], "notes": list(self.notes),
                "waits_on": list(self.waits_on), "upstream": self.upstream or None}

    def next_step(self, folder: Path) -> str:
        if self.upstream:
            return f"{self.id}: nothing to do ({self.upstream})"
        if self.waits_on:
            return (f"{self.id} waits on {', '.join(self.waits_on)}, not finished in a file it is stacked on: once "
                    f"it is finished, rebase {self.name} on it (`patchkit bump --continue` does both in one run)")
        return f"`{continue_command(folder / self.tree, name_for(self.name, self.to))}`"


def write_stack(stacked: list, inputs: dict[str, bytes], folder: Path) -> list[StackTree]:
    """`rebase.rebase_stack`'s diffs as one tree each under `folder` (new or empty), in stack order.
    An upper diff that depends on a lower one (`Rebased.depends_on`: stacked on a file the lower
    has not finished on V) was rebased on that file without the lower's blocks (its tree would drop
    the lower's resolution): it gets no tree and waits (`waits_on`)."""
    check_empty(folder)
    found: list[StackTree] = []
    files: dict[str, bytes] = {}  # every tree, written together (whole or not at all)
    for pid, made in stacked:
        if isinstance(made, str):
            found.append(StackTree(pid, "", "", "", upstream=made))
            continue
        if made.depends_on:
            found.append(StackTree(pid, made.diff.name, made.to, "", waits_on=tuple(made.depends_on)))
            continue
        tree = f"{Path(made.diff.name).stem}.tree"
        its = tree_files(made, inputs[pid])
        files.update({f"{tree}/{rel}": content for rel, content in its.items()})
        written = [rel for rel in its if rel != RECORD]
        found.append(StackTree(pid, made.diff.name, made.to, tree, tuple(written), made.conflicts, made.notes))
    if files:
        write_new_folder(folder, files)
    return found
