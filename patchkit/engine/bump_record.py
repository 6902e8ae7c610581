"""A bump's folder as others see it: the record's name and the actions it spells, and whether the
bump is finished. A folder `bump` wrote whose record says conflicts, failures or left-out patch
files remain is not a patch set to ship: the registry refuses it where `--patches` folders are
read (`unfinished`), unless `--allow-incomplete` takes the rest of it; an image's build context
leaves out what the bump wrote for people (`not_patches`: REPORT.md, the conflict trees).

Reads only the record; never imports the bump itself (the registry, which bump imports, asks it).
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

from patchkit.base.util import read_regular
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
        return (f"--patches {self.folder}: an unfinished bump (SGLang {self.first} -> {self.to}), {self.missing()}; "
                f"{'; '.join(steps)}; or pass --allow-incomplete to use the rest of the set without them")

    def warning(self) -> str:
        """What a command run with --allow-incomplete says it left out."""
        return (f"--allow-incomplete: --patches {self.folder} is an unfinished bump (SGLang {self.first} -> "
                f"{self.to}); left out: {self.missing()}")


def unfinished(folder: Path, named: str) -> Unfinished | None:
    """The bump in `folder` that is not finished, or None: no record there (not a bump's folder),
    or a record saying every patch carries over, is rebased or dropped, none left out."""
    if os.path.lexists(folder / JOURNAL):  # the next `bump` on DIR finishes the switch
        return Unfinished(named, "?", "?", interrupted=True)
    path = folder / RECORD
    if not path.is_file():
        return None
    try:
        data = json.loads(read_regular(path, RECORD_LIMIT))
        rows = [(str(row["id"]), str(row["action"])) for row in data["patches"]]
        left_out = tuple(str(item) for item in data.get("left_out", ()))
        first, to = str(data["from"]), str(data["to"])
    except (OSError, ValueError, TypeError, KeyError, AttributeError) as exc:
        return Unfinished(named, "?", "?", damaged=f"{type(exc).__name__}: {exc}")
    conflicts = tuple(pid for pid, action in rows if action == CONFLICTS)
    failed = tuple(pid for pid, action in rows if action == FAILED)
    if not conflicts and not failed and not left_out:
        return None
    return Unfinished(named, first, to, conflicts, failed, left_out)


def not_patches(folder: Path) -> frozenset[str]:
    """The names at the top of a bump's folder that are not part of the patch set (its report and
    its conflict trees): left out of an image's build context. Empty for any other folder."""
    if not (folder / RECORD).is_file():
        return frozenset()
    try:
        trees = {p.name for p in folder.iterdir() if p.name.endswith(TREE_SUFFIX) and p.is_dir()}
    except OSError:
        trees = set()
    return frozenset({REPORT, *trees})


def continue_command(folder: Path | str) -> str:
    """`patchkit bump --continue DIR`, pasteable as printed (DIR quoted for a shell where it must be)."""
    return Naming().command("bump", "--continue", str(folder))
