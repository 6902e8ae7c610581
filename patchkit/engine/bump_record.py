"""A bump's folder as others see it: the record's name and the actions it spells, and whether the
bump is finished. A folder `bump` wrote whose record says conflicts, failures or left-out patch
files remain is not a patch set to ship: the registry refuses it where `--patches` folders are
read (`unfinished`), unless `--allow-incomplete` takes the rest of it; an image's build context
leaves out what the bump wrote for people (`not_patches`: REPORT.md, the conflict trees).

The record's rows (`PatchRow`, `Conflict`, `LaunchChange`) and its one reader (`load`: read
inside DIR without following a symlink, every part checked) are here, so that `bump --continue`
and the registry read it alike. Reads only the record; never imports the bump itself (the
registry, which bump imports, asks it).
"""

from __future__ import annotations

import base64
import json
import os
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from patchkit.base import confined
from patchkit.store.naming import Naming

# The action each patch needs on V (an interface: --json and REPORT.md spell them so).
CARRIES, REBASED, DROP, GONE, CONFLICTS, FAILED, NOT_NEEDED = (
    "carries over", "rebased", "drop", "no longer applicable", "conflicts", "failed", "not applicable")
BLOCKING = frozenset({CONFLICTS, FAILED})  # what makes the bump exit 1
RECORD = ".patchkit-bump.json"
REPORT = "REPORT.md"
# While bump switches DIR to a new set (its commit point to its end); a kill leaves it, and the next
# `bump` on DIR finishes the switch: until then DIR may hold parts of the earlier set beside the new one.
JOURNAL = ".patchkit-bump-journal.json"
TREE_SUFFIX = ".tree"  # DIR/NAME.tree/: a conflicting patch's files to resolve
RECORD_LIMIT = 256 << 20  # bytes: the record holds the input diffs
# bump's own working files in DIR: the new set while it is written, the probe `check_folder` makes.
_STAGING, _PROBE = ".patchkit-bump-new", ".patchkit-bump-check-"


def own(name: str) -> bool:
    """A name in DIR that only bump itself writes (its working files, the record, REPORT.md)."""
    return name in (_STAGING, JOURNAL, RECORD) or name.startswith(_PROBE)


# --- the record's rows (`bump` builds them; read back here) ---


SCHEMA = 1
TREE_OPTIONS = ("--site-packages", "--source", "--python")  # the options naming the tree (Bump.tree)


@dataclass(frozen=True)
class Conflict:
    file: str
    unit: str  # "Class.method", "function", "<file>", ...
    detail: str

    @property
    def name(self) -> str:
        return f"{self.file}:{self.unit}"


@dataclass(frozen=True)
class PatchRow:
    id: str
    kind: str  # "module" (a patch module) or "diff" (a .patch / .diff file)
    on_from: str  # its verdict on V0 (matrix's states)
    on_to: str  # its verdict on V
    action: str  # one of the actions above
    detail: str = ""  # why, in words; an upstream fix narrower than the patch says so here
    upstream: tuple[str, ...] = ()  # the upstream references the patch names
    evidence: tuple[str, ...] = ()  # upstream-fixed: the units of V that hold the patched form
    counts: dict[str, int] = field(default_factory=dict)  # a rebased diff's units by outcome
    conflicts: tuple[Conflict, ...] = ()
    written: str | None = None  # the file in DIR holding the patch re-made for V
    tree: str | None = None  # the folder in DIR holding V's files with the conflict blocks
    # The diffs under it that are not finished on V in files it is stacked on (stacks.Unfinished): it is
    # finished by `--continue` after them, its tree's resolution put on top of theirs (`_onto`), or,
    # with no tree (no block of its own), re-made on top of them (`_remake`).
    waits_on: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()
    # A diff's files outside the installed sglang package (`test/...`, `sgl-kernel/...`,
    # `python/pyproject.toml`): never in DIR, the user carries them (`Bump.outside_step`).
    outside: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        found = asdict(self)
        found["conflicts"] = [{"name": c.name, **asdict(c)} for c in self.conflicts]
        for key in ("upstream", "evidence", "notes", "waits_on", "outside"):
            found[key] = list(found[key])
        return found

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> PatchRow:
        conflicts = tuple(Conflict(c["file"], c["unit"], c["detail"]) for c in data.get("conflicts", ()))
        return cls(**{**data, "conflicts": conflicts, "upstream": tuple(data.get("upstream", ())),
                      "evidence": tuple(data.get("evidence", ())), "notes": tuple(data.get("notes", ())),
                      "waits_on": tuple(data.get("waits_on", ())), "outside": tuple(data.get("outside", ()))})


@dataclass(frozen=True)
class LaunchChange:
    """One launch line checked by doctor on V0 and on V (built by `doctor.launch_change`)."""

    line: tuple[str, ...]
    removed: tuple[str, ...] = ()  # "FLAG: what V says" for a flag of the line V no longer takes
    renamed: tuple[tuple[str, str], ...] = ()  # (flag on the line, V's name for it)
    defaults: tuple[tuple[str, str, str], ...] = ()  # (flag, V0's default, V's default) of a flag the line leaves unset
    appeared: tuple[str, ...] = ()  # "level rule: message" of findings on V only
    disappeared: tuple[str, ...] = ()  # ... on V0 only
    changed: tuple[tuple[str, str], ...] = ()  # (on V0, on V) of a rule that found one thing on each, said differently
    budget: tuple[tuple[str, str, str], ...] = ()  # (what, on V0, on V) that changed
    errors: tuple[int, int] = (0, 0)  # error findings on V0, on V
    budget_note: str = ""  # why the budget is not compared (doctor's budget.not_computed), "" where it is

    def to_dict(self) -> dict[str, Any]:
        return {key: [list(v) if isinstance(v, tuple) else v for v in value] if isinstance(value, tuple) else value
                for key, value in asdict(self).items()}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> LaunchChange:
        found: dict[str, Any] = {key: tuple(tuple(v) if isinstance(v, list) else v for v in value)
                                 if isinstance(value, list) else value for key, value in data.items()}
        return cls(**found)


@dataclass(frozen=True)
class Unfinished:
    """What an unfinished bump's record says remains before its folder is the whole set for V."""

    folder: str  # as the user named it
    first: str  # V0 ("?" where the record cannot be read)
    to: str  # V
    conflicts: tuple[str, ...] = ()  # patch ids in conflict (NAME.tree/ to resolve, or waiting on one)
    failed: tuple[str, ...] = ()  # patch ids that failed
    left_out: tuple[str, ...] = ()  # "FILE: why" of the set's files that could not be loaded
    damaged: str = ""  # why the record cannot be read: what it leaves out is not known
    interrupted: bool = False  # bump's switch to a new set was killed half-way (its journal is there)
    option: str = "--patches"  # how the user named the folder: `--patches`, or `$PATCHKIT_PATCHES`

    def missing(self) -> str:
        """The patches this folder lacks, in words."""
        if self.interrupted:
            return (f"a bump's write of it was interrupted ({JOURNAL} is there), so it may hold parts of the earlier "
                    "set beside the new one")
        if self.damaged:
            return f"its {RECORD} cannot be read ({self.damaged}), so what it lacks is not known"
        parts = [f"{what}: {', '.join(ids)}" for what, ids in (
            ("in conflict", self.conflicts), ("failed", self.failed),
            ("left out (cannot be loaded)", tuple(item.split(": ", 1)[0] for item in self.left_out))) if ids]
        return "; ".join(parts)

    def refusal(self) -> str:
        """The one line a command that loads the folder stops with."""
        if self.damaged or self.interrupted:
            steps = [f"run `{continue_command(self.folder)}` or the bump again"]
        else:
            steps = [f"resolve the blocks in {self.folder}/*{TREE_SUFFIX}/ and run `{continue_command(self.folder)}`"
                     ] if self.conflicts else []
            if self.failed or self.left_out:
                steps.append(f"fix {'what failed (REPORT.md)' if self.failed else ''}"
                             f"{' and ' if self.failed and self.left_out else ''}"
                             f"{'each file left out' if self.left_out else ''} and run the bump again")
        return (f"{self.option} {self.folder}: an unfinished bump (SGLang {self.first} -> {self.to}), {self.missing()}; "
                f"{'; '.join(steps)}; or pass --allow-incomplete to use the rest of the set without them")

    def warning(self) -> str:
        """What a command run with --allow-incomplete says it left out."""
        return (f"--allow-incomplete: {self.option} {self.folder} is an unfinished bump (SGLang {self.first} -> "
                f"{self.to}); left out: {self.missing()}")


# --- the record, read back: every name and type checked (a damaged record is exit 2 naming it) ---


class Damaged(ValueError):
    """What in a record read back is not as `bump` writes it (exit 2 where a command names it)."""


def shaped(value: Any, annotation: str, where: str) -> None:
    """`value` (read from JSON) has the shape of the dataclass field type `annotation` (a string:
    the module uses postponed annotations); Damaged naming `where` otherwise."""
    annotation = annotation.strip()
    if annotation.endswith("| None"):
        if value is not None:
            shaped(value, annotation[:-len("| None")], where)
        return
    base, _, inner = annotation.partition("[")
    inner = inner[:-1] if inner.endswith("]") else inner
    args = _split_args(inner) if inner else []
    if base == "str":
        ok = isinstance(value, str)
    elif base == "int":
        ok = isinstance(value, int) and not isinstance(value, bool)
    elif base == "bool":
        ok = isinstance(value, bool)
    elif base == "Conflict":
        ok = isinstance(value, dict) and all(isinstance(value.get(key), str) for key in ("file", "unit", "detail"))
    elif base == "tuple":
        ok = isinstance(value, list) and (args[-1] == "..." or len(value) == len(args))
        if ok:
            for i, item in enumerate(value):
                shaped(item, args[0] if args[-1] == "..." else args[i], f"{where}[{i}]")
    elif base == "dict":
        ok = isinstance(value, dict)
        if ok:
            for key, item in value.items():
                shaped(item, args[1], f"{where}[{key!r}]")
    else:  # a type this check does not know: whatever JSON holds
        ok = True
    if not ok:
        raise Damaged(f"{where}: {json.dumps(value)[:60]} is not {annotation}")


def _split_args(inner: str) -> list[str]:
    out, depth, start = [], 0, 0
    for i, ch in enumerate(inner):
        depth += ch == "["
        depth -= ch == "]"
        if ch == "," and depth == 0:
            out.append(inner[start:i].strip())
            start = i + 1
    return [*out, inner[start:].strip()]


def _fields_of(cls: type, data: Any, where: str) -> dict[str, Any]:
    """`data`'s fields as `cls`'s (a dataclass) keyword arguments, each of its type; a field with a
    default may be missing, no other may be, and none `cls` does not have may be there."""
    from dataclasses import MISSING, fields

    if not isinstance(data, dict):
        raise Damaged(f"{where}: not an object")
    known = {f.name: f for f in fields(cls)}
    unknown = sorted(set(data) - set(known))
    if unknown:
        raise Damaged(f"{where}: no field {unknown[0]!r}")
    for name, spec in known.items():
        if name not in data:
            if spec.default is MISSING and spec.default_factory is MISSING:
                raise Damaged(f"{where}: {name!r} missing")
            continue
        shaped(data[name], str(spec.type), f"{where}.{name}")
    return dict(data)


def plain_file(name: Any, where: str, nested: bool = False) -> str:
    """A name read back from a record: a plain file name in DIR (`nested`: a path inside it), and
    none of bump's own names; Damaged otherwise."""
    why = confined.bad_name(name)
    if why is None and not nested and "/" in name:
        why = "a path, not a file name"
    if why is None and (own(name.split("/")[0]) or name == REPORT):
        why = "one of bump's own files"
    if why:
        raise Damaged(f"{where}: {json.dumps(name)[:80]} is {why}")
    return str(name)


def checked(data: Any) -> dict[str, Any]:
    """The record, every part of it checked; Damaged naming the first that is not as `write` writes it."""
    from packaging.version import InvalidVersion, Version

    if not isinstance(data, dict) or data.get("schema") != SCHEMA:
        raise Damaged("not a record patchkit bump wrote (no schema 1)")
    for key in ("from", "to"):
        try:
            Version(data[key])
        except KeyError:
            raise Damaged(f"{key!r} missing") from None
        except (InvalidVersion, TypeError):
            raise Damaged(f"{key}: {json.dumps(data[key])[:60]} is not a release") from None
    for key in ("patches", "launches"):
        if not isinstance(data.get(key), list):
            raise Damaged(f"{key!r} missing or not a list")
    for key in ("notes", "left_out", "outputs"):
        shaped(data.get(key, []), "tuple[str, ...]", key)
    shaped(data.get("digests", {}), "dict[str, str]", "digests")
    if not isinstance(data.get("python"), (str, type(None))):
        raise Damaged("python: not a path")
    shaped(data.get("tree", []), "tuple[str, ...]", "tree")
    if data.get("tree") and (len(data["tree"]) != 2 or data["tree"][0] not in TREE_OPTIONS):
        raise Damaged(f"tree: {json.dumps(data['tree'])[:60]} is not a tree option and its value")
    rows = [_fields_of(PatchRow, row, f"patches[{i}]") for i, row in enumerate(data["patches"])]
    for i, launch in enumerate(data["launches"]):
        _fields_of(LaunchChange, launch, f"launches[{i}]")
    inputs = data.get("inputs", {})
    if not isinstance(inputs, dict):
        raise Damaged("inputs: not an object")
    for pid, item in inputs.items():
        if not (isinstance(item, dict) and isinstance(item.get("data"), str)):
            raise Damaged(f"inputs[{pid!r}]: no data")
        plain_file(item.get("name"), f"inputs[{pid!r}].name")
        try:
            base64.b64decode(item["data"], validate=True)
        except ValueError:
            raise Damaged(f"inputs[{pid!r}].data: not base64") from None
    ids = [row["id"] for row in rows]
    if len(set(ids)) != len(ids):
        raise Damaged("patches: an id twice")
    for i, row in enumerate(rows):
        for key in ("written", "tree"):
            if row.get(key) is not None:
                plain_file(row[key], f"patches[{i}].{key}")
        for lower in row.get("waits_on", ()):
            if lower not in ids or lower not in inputs or row["id"] not in inputs:
                raise Damaged(f"patches[{i}].waits_on: {lower!r} is not a diff of the record")
    for i, name in enumerate(data.get("outputs", ())):
        plain_file(name, f"outputs[{i}]", nested=True)
    for name in data.get("digests", {}):
        plain_file(name, f"digests[{name!r}]", nested=True)
    return data


def load(folder: Path) -> dict[str, Any] | None:
    """The record in `folder`, every part of it checked (`checked`), or None where there is none:
    the one reader of it (`bump --continue`, a rerun into DIR, and the registry asking whether the
    folder is finished). Read inside `folder` without following a symlink (NotPlain, exit 6, for a
    symlink or anything but a plain file); Damaged naming what is not as `write` writes it;
    IsADirectoryError where a folder has its name."""
    try:
        raw = confined.read(folder, RECORD, RECORD_LIMIT)
    except FileNotFoundError:
        return None
    try:
        return checked(json.loads(raw))
    except (ValueError, RecursionError) as exc:  # Damaged, JSON or UTF-8
        raise Damaged(str(exc)) from None


def unfinished(folder: Path, named: str, option: str = "--patches") -> Unfinished | None:
    """The bump in `folder` that is not finished, or None: no record there (not a bump's folder),
    or a record saying every patch carries over, is rebased or dropped, none left out. The record
    is read as `bump` reads it (`load`): a symlink is refused (exit 6), a damaged one is named.
    `option`: how the user named the folder (`--patches`, or `$PATCHKIT_PATCHES`)."""
    if os.path.lexists(folder / JOURNAL):  # the next `bump` on DIR finishes the switch
        return Unfinished(named, "?", "?", interrupted=True, option=option)
    try:
        data = load(folder)
    except IsADirectoryError:
        return Unfinished(named, "?", "?", damaged="a folder, not the record patchkit bump writes", option=option)
    except Damaged as exc:
        return Unfinished(named, "?", "?", damaged=str(exc), option=option)
    if data is None:
        return None
    rows = [(str(row["id"]), str(row["action"])) for row in data["patches"]]
    left_out = tuple(str(item) for item in data.get("left_out", ()))
    conflicts = tuple(pid for pid, action in rows if action == CONFLICTS)
    failed = tuple(pid for pid, action in rows if action == FAILED)
    if not conflicts and not failed and not left_out:
        return None
    return Unfinished(named, str(data["from"]), str(data["to"]), conflicts, failed, left_out, option=option)


def not_patches(folder: Path) -> frozenset[str]:
    """The names at the top of a bump's folder that are not part of the patch set (its report and
    its conflict trees): left out of an image's build context. Empty for any other folder. Nothing
    is followed: a symlink where the record, REPORT.md or a NAME.tree is (it would put files from
    elsewhere into the image, or pass another folder's record for this one's) is refused, exit 6
    naming it (confined.NotPlain), as every reader of a bump's folder refuses one."""
    import stat

    if confined.kind(folder, RECORD) != "file":  # (a symlink: NotPlain)
        return frozenset()
    try:
        entries = list(os.scandir(folder))
    except OSError:
        entries = []
    trees = set()
    for entry in entries:
        if entry.name != REPORT and not entry.name.endswith(TREE_SUFFIX):
            continue
        mode = entry.stat(follow_symlinks=False).st_mode
        if not (stat.S_ISDIR(mode) or stat.S_ISREG(mode)):
            confined.kind(folder, entry.name)  # raises NotPlain naming it
        if entry.name.endswith(TREE_SUFFIX) and stat.S_ISDIR(mode):
            trees.add(entry.name)
    return frozenset({REPORT, *trees})


def continue_command(folder: Path | str) -> str:
    """`patchkit bump --continue DIR`, pasteable as printed (DIR quoted for a shell where it must be)."""
    return Naming().command("bump", "--continue", str(folder))
