"""`bump`: every patch in force moved from release V0 to release V in one plan, never stopping at
the first failure: each patch's verdict on both (the module patches by their probes, judged as
`matrix` judges them; each diff patch re-made for V as `rebase` re-makes a stack), the action it
needs, the files written for V (diffs under their own names, conflicts as `rebase --tree`'s
resolvable trees), the launch lines doctor checked on both, and the report (`to_dict`,
`markdown`). Nothing here writes a tree or the state: `write` writes only the bump's folder.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from patchkit.base.errors import PlanError, UsageError
from patchkit.base.util import atomic_write
from patchkit.engine import registry, upstream
# The actions and the record's and report's names are said once, in bump_record (the registry reads them too).
from patchkit.engine.bump_record import (BLOCKING as BLOCKING, CARRIES as CARRIES, CONFLICTS as CONFLICTS,
                                         DROP as DROP, FAILED as FAILED, GONE as GONE, NOT_NEEDED as NOT_NEEDED,
                                         REBASED as REBASED, RECORD as RECORD, REPORT as REPORT)
from patchkit.engine.bump_record import RECORD_LIMIT as _RECORD_LIMIT

if TYPE_CHECKING:
    from patchkit.authoring.patch import Patch
    from patchkit.diffs.unidiff import DiffPatchFile
    from patchkit.diffs.rebase import Rebased
    from patchkit.releases.pristine import WheelSource

SCHEMA = 1


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
    # A diff stacked on diffs that conflict in the files it shares with them: re-made on top of them by
    # `--continue` once they are resolved (its tree written then, where it conflicts too).
    waits_on: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        found = asdict(self)
        found["conflicts"] = [{"name": c.name, **asdict(c)} for c in self.conflicts]
        for key in ("upstream", "evidence", "notes", "waits_on"):
            found[key] = list(found[key])
        return found

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> PatchRow:
        conflicts = tuple(Conflict(c["file"], c["unit"], c["detail"]) for c in data["conflicts"])
        return cls(**{**data, "conflicts": conflicts, "upstream": tuple(data["upstream"]),
                      "evidence": tuple(data["evidence"]), "notes": tuple(data["notes"]),
                      "waits_on": tuple(data["waits_on"])})


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
class Bump:
    first: str  # V0
    to: str  # V
    folder: Path  # DIR
    patches: tuple[PatchRow, ...]
    launches: tuple[LaunchChange, ...] = ()
    notes: tuple[str, ...] = ()
    # The patch files of the set that could not be loaded, each "FILE: why" (registry.unloadable):
    # the bump ran without them, so the set in DIR is not complete.
    left_out: tuple[str, ...] = ()
    # What `write` puts in DIR: {path relative to DIR: bytes}; the diffs as given (for `--continue`).
    files: dict[str, bytes] = field(default_factory=dict, compare=False, repr=False)
    inputs: dict[str, tuple[str, bytes]] = field(default_factory=dict, compare=False, repr=False)

    @property
    def conflicts(self) -> list[tuple[str, Conflict]]:
        return [(row.id, c) for row in self.patches for c in row.conflicts]

    @property
    def blocked(self) -> bool:
        return any(row.action in BLOCKING for row in self.patches)

    @property
    def complete(self) -> bool:
        return not self.blocked and not self.left_out

    def to_dict(self) -> dict[str, Any]:
        return {"from": self.first, "to": self.to, "folder": str(self.folder),
                "patches": [row.to_dict() for row in self.patches],
                "conflicts": [{"id": pid, "name": c.name, "detail": c.detail} for pid, c in self.conflicts],
                "drops": [row.id for row in self.patches if row.action == DROP],
                "launches": [launch.to_dict() for launch in self.launches],
                "next": self.next_steps(), "notes": list(self.notes), "left_out": list(self.left_out),
                "blocked": [row.id for row in self.patches if row.action in BLOCKING], "complete": self.complete}

    def next_steps(self) -> list[str]:
        """The commands to finish: resolve and continue, then rebuild the image and apply the new folder."""
        steps = []
        if self.left_out:
            steps.append("fix or remove each patch file left out (REPORT.md: Left out), then run this bump again: DIR lacks them")
        if any(row.tree for row in self.patches if row.action == CONFLICTS):
            steps.append(f"resolve the <<<<<<< / >>>>>>> blocks in {self.folder}/*.tree/ (each block: make the "
                         f"change where the code is, delete the marker lines), then run `patchkit bump --continue "
                         f"{self.folder}`")
        patches = f" --patches {self.folder}" if any(row.written for row in self.patches) else ""
        steps.append(f"rebuild the image: `patchkit{patches} image build --target {self.to} ...`")
        steps.append(f"apply on the SGLang {self.to} tree: `patchkit{patches} apply`")
        return steps

    def markdown(self) -> str:
        """REPORT.md: a maintainer pastes it into a pull request."""
        out = [f"# patchkit bump: SGLang {self.first} -> {self.to}", "",
               "| patch | on " + self.first + " | on " + self.to + " | action |", "| --- | --- | --- | --- |"]
        for row in self.patches:
            action = row.action + (f" ({_counts(row.counts)})" if row.counts and row.action in (REBASED, CONFLICTS)
                                   else "")
            out.append(f"| `{row.id}` | {row.on_from} | {row.on_to} | {action} |")
        if self.conflicts:
            out += ["", "## Conflicts", ""]
            out += [f"- `{pid}`: `{c.name}`: {c.detail}" for pid, c in self.conflicts]
        drops = [row for row in self.patches if row.action == DROP]
        if drops:
            out += ["", "## Drops (upstream-fixed on " + self.to + ")", ""]
            for row in drops:
                out.append(f"- `{row.id}`: drop it; upstream: {'; '.join(row.upstream) or 'not named'}")
                out += [f"  - evidence: {item}" for item in row.evidence]
                if row.detail:
                    out.append(f"  - note: {row.detail}")
        gone = [row for row in self.patches if row.action in (GONE, FAILED)]
        if gone:
            out += ["", "## Not carried over", ""]
            out += [f"- `{row.id}` ({row.action}): {row.detail}" for row in gone]
        if self.left_out:
            out += ["", "## Left out (cannot be loaded; not in DIR)", ""] + [f"- {item}" for item in self.left_out]
        if self.launches:
            out += ["", "## Launch lines", ""]
            for launch in self.launches:
                out += _launch_markdown(launch, self.first, self.to)
        notes = [*self.notes, *(f"{row.id}: {note}" for row in self.patches for note in row.notes)]
        if notes:
            out += ["", "## Notes", ""] + [f"- {note}" for note in notes]
        out += ["", "## To finish", ""] + [f"{i}. {step}" for i, step in enumerate(self.next_steps(), 1)]
        return "\n".join(out) + "\n"


def _counts(counts: dict[str, int]) -> str:
    return ", ".join(f"{n} {what}" for what, n in counts.items() if n)


def _launch_markdown(launch: LaunchChange, first: str, to: str) -> list[str]:
    out = ["`" + " ".join(launch.line) + "`", ""]
    out += [f"- removed on {to}: `{item}`" for item in launch.removed]
    out += [f"- renamed on {to}: `{old}` -> `{new}`" for old, new in launch.renamed]
    out += [f"- default changed: `{flag}` {old} -> {new}" for flag, old, new in launch.defaults]
    out += [f"- new on {to}: {item}" for item in launch.appeared]
    out += [f"- gone on {to}: {item}" for item in launch.disappeared]
    out += [f"- changed on {to}: {new} (on {first}: {old})" for old, new in launch.changed]
    if launch.budget_note:
        out.append(f"- budget not compared: {launch.budget_note}")
    if launch.budget:
        out += ["", f"| budget | {first} | {to} |", "| --- | --- | --- |"]
        out += [f"| {what} | {old} | {new} |" for what, old, new in launch.budget]
    if len(out) == 2:
        out.append("- no change")
    return out + [""]


# --- the plan ----------------------------------------------------------------------------------


def plan(first: WheelSource, to: WheelSource, folder: Path, progress: Callable[[str], None],
         cache: Any = None, launches: tuple[LaunchChange, ...] = ()) -> Bump:
    """Every loaded patch on V0 (`first`) and V (`to`), both read from their wheels; nothing written."""
    from patchkit.engine import verdicts

    patches = registry.load_all()
    diffs = [p for p in patches if p.works_on_bytes()]
    modules = [p for p in patches if not p.works_on_bytes()]
    module_ids = {p.ID for p in modules}
    before: dict[str, upstream.Verdict] = {}
    after: dict[str, upstream.Verdict] = {}
    for source, found in ((first, before), (to, after)):
        progress(f"judging {len(patches)} patch(es) on SGLang {source.version}")
        found.update(upstream.judge(source, cache=cache, settled=verdicts.from_manifest(source), ids=module_ids))
    from patchkit.engine import view as view_mod

    view = view_mod.code_view(to)  # type: ignore[arg-type]  # parsed once for every drop's evidence
    rows = [_module_row(p, before[p.ID], after[p.ID], to, view) for p in modules]
    files: dict[str, bytes] = {}
    inputs: dict[str, tuple[str, bytes]] = {}
    rows = [_module_file(row, files) for row in rows]
    if diffs:
        rows += _diff_rows(diffs, before, first, to, progress, files, inputs, cache)
    if cache is not None:
        cache.save()
    order = {p.ID: i for i, p in enumerate(patches)}
    rows.sort(key=lambda row: order[row.id])
    for row in rows:
        progress(f"{row.id}: {row.on_from} on {first.version}, {row.on_to} on {to.version}: {row.action}")
    left_out = tuple(str(exc) for exc in registry.unloadable())
    return Bump(first.version, to.version, folder, tuple(rows), launches, left_out=left_out, files=files,
                inputs=inputs)


def _module_file(row: PatchRow, files: dict[str, bytes]) -> PatchRow:
    """A patch module of a `--patches` folder that stays in force on V, copied into DIR byte for byte
    (a folder of modules, as `--patches DIR` loads it), so that `--patches DIR apply` and `image build`
    get the whole set; the built-in and entry-point sets come with patchkit and their packages."""
    if row.action in (DROP, GONE) or not registry.origin(row.id).startswith("folder "):
        return row
    path = registry.source_file(row.id)
    files[path.name] = path.read_bytes()
    return replace(row, written=path.name)


def _module_row(patch: type[Patch], old: upstream.Verdict, new: upstream.Verdict, to: WheelSource,
                view: Any) -> PatchRow:
    common = PatchRow(id=patch.ID, kind="module", on_from=old.state, on_to=new.state, action=CARRIES,
                      upstream=tuple(patch.UPSTREAM))
    if new.state == upstream.APPLIES:
        return replace(common, action=CARRIES)
    if new.state == upstream.UPSTREAM_FIXED:
        return replace(common, action=DROP, detail=new.detail, evidence=tuple(_evidence(patch, to, view)))
    if new.state == upstream.NOT_APPLICABLE:
        present = [rel for rel in patch.TARGETS if to.read(rel) is not None]
        if old.state == upstream.NOT_APPLICABLE:
            return replace(common, action=NOT_NEEDED, detail=new.detail)
        why = new.detail or (f"its files are gone on {to.version}: {', '.join(patch.TARGETS)}" if not present else "")
        return replace(common, action=GONE, detail=why)
    if new.state == upstream.FAILED:
        return replace(common, action=FAILED, detail=new.detail)
    # broken or moved: the patch's anchors do not hold on V; named by the file and the class it works in.
    rel = new.file or (patch.TARGETS[0] if patch.TARGETS else "?")
    anchors = patch.SCOPE.get(rel, ()) or patch.ANCHOR_SYMBOLS or ("<module>",)
    return replace(common, action=CONFLICTS, detail=new.detail,
                   conflicts=tuple(Conflict(rel, str(unit), new.detail) for unit in anchors[:1]))


def _evidence(patch: type[Patch], to: WheelSource, view: Any) -> list[str]:
    """Where V holds the patched form: the patch's probe `is_fixed_upstream` holds on these files,
    and the units it watches there (`FILE:Class.method`)."""
    files = [rel for rel in patch.TARGETS if to.read(rel) is not None]
    found = []
    for rel in files:
        names = upstream.watched_source(view, patch, [rel])
        found += [f"{rel}:{name}" for name in names]
    if not found:
        found = [f"{rel}: its upstream-fixed probe holds" for rel in files]
    else:
        found = [f"{item} (its upstream-fixed probe holds on {to.version})" for item in found]
    return found


def _diff_rows(diffs: list[type[Patch]], before: dict[str, upstream.Verdict], first: WheelSource, to: WheelSource,
               progress: Callable[[str], None], files: dict[str, bytes],
               inputs: dict[str, tuple[str, bytes]], cache: Any) -> list[PatchRow]:
    from patchkit.diffs import rebase as rebasing, release_blobs, stacks

    items = []
    for patch in diffs:
        path = registry.source_file(patch.ID)
        data = path.read_bytes()
        diff = rebasing.load(data, path.name)
        items.append((diff, data))
        inputs[diff.id] = (path.name, data)
    for diff, _ in items:  # the base of each diff not made on top of another one of them
        if not any(stacks.shared_files(diff, other) for other, _ in items if other is not diff):
            release_blobs.find_base(diff, to.version, progress, last=to.version)  # V0 is older than V
    # On V0, the diffs whose hunks apply there as they are, in stack order (a stacked one on top of
    # the one under it), apply; the others are judged (upstream-fixed, broken, ...).
    under = stacks.stacked_on({diff.id: diff for diff, _ in items}, release_blobs.made_for_a_release,
                              release_blobs.on_lower_tree)
    diffs_by_id = {diff.id: diff for diff, _ in items}
    ordered = [(pid, diffs_by_id[pid]) for pid in stacks.ordered(diffs_by_id)]
    failing = apply_in_order(ordered, first.read, first.version)
    before.update({pid: upstream.Verdict(upstream.APPLIES, None, f"on top of {', '.join(under[pid])}"
                                         if pid in under else "") for pid in diffs_by_id if pid not in failing})
    if failing:
        before.update(upstream.judge(first, cache=cache, ids=set(failing)))
    rows = []
    blocked: dict[str, set[str]] = {}  # the files a diff conflicts in (or waits on), on V
    for pid, made in rebasing.rebase_stack(items, to.version, to.read, to.python_files, to.package_files):
        patch = next(p for p in diffs if p.ID == pid)
        waits = tuple(lower for lower, shared in under.get(pid, {}).items() if set(shared) & blocked.get(lower, set()))
        if waits:
            blocked[pid] = {f.path for f in diffs_by_id[pid].files}
            rows.append(PatchRow(id=pid, kind="diff", on_from=before[pid].state, on_to=upstream.BROKEN,
                                 action=CONFLICTS, upstream=tuple(patch.UPSTREAM), waits_on=waits,
                                 conflicts=tuple(Conflict(rel, "<stack>", f"stacked on {lower}, which conflicts here: "
                                                          "re-made on top of it by `bump --continue` once it is resolved")
                                                 for lower in waits for rel in under[pid][lower]
                                                 if rel in blocked[lower])))
            continue
        if not isinstance(made, str):
            blocked[pid] = {u.file for u in made.conflicts}
        rows.append(_diff_row(patch, before[pid], made, inputs[pid][1], files))
    return rows


def _diff_row(patch: type[Patch], old: upstream.Verdict, made: Rebased | str, data: bytes,
              files: dict[str, bytes]) -> PatchRow:
    from patchkit.diffs import diffpatch, rebase_tree

    name = registry.source_file(patch.ID).name
    common = PatchRow(id=patch.ID, kind="diff", on_from=old.state, on_to=upstream.APPLIES, action=CARRIES,
                      upstream=tuple(patch.UPSTREAM))
    if isinstance(made, str):  # every file already has the change on V
        return replace(common, on_to=upstream.UPSTREAM_FIXED, action=DROP, evidence=(made,))
    counts = {k: v for k, v in made.resolution.counts().items() if v}
    gone = _gone(made)
    if gone:
        return replace(common, on_to=upstream.NOT_APPLICABLE, action=GONE,
                       detail=f"its files are gone on {made.to}: {', '.join(gone)}")
    if made.conflicts:
        tree = f"{Path(name).stem}.tree"
        for rel, content in rebase_tree.tree_files(made, data).items():
            files[f"{tree}/{rel}"] = content
        conflicts = tuple(Conflict(u.file, u.unit, u.detail) for u in made.conflicts)
        return replace(common, on_to=upstream.BROKEN, action=CONFLICTS, counts=counts, conflicts=conflicts, tree=tree,
                        notes=made.notes)
    files[name] = made.data
    moved = sum(n for what, n in counts.items() if what != diffpatch.UPSTREAM)
    clean = not moved and not made.already  # nothing to move: the diff applies on V as it is
    action = CARRIES if clean or _applies_as_is(made) else REBASED
    return replace(common, on_to=upstream.APPLIES if action == CARRIES else upstream.BROKEN, action=action,
                    counts={} if action == CARRIES else counts, written=name, notes=made.notes)


def _gone(made: Rebased) -> list[str]:
    """The files of a diff that only changes files V has none of (at their paths, or where their
    folder moved), none of its units found elsewhere: its files are gone (no longer applicable);
    [] otherwise (a diff that creates a file, or whose code V still has somewhere, is rebased)."""
    from patchkit.diffs import diffpatch

    changed = [f for f in made.diff.files if f.old_path is not None]
    if not changed or len(changed) != len(made.diff.files) or \
            any(n for what, n in made.resolution.counts().items() if what != diffpatch.CONFLICT):
        return []
    if any(f.how != diffpatch.ABSENT or f.elsewhere or f.moved for f in made.resolution.files):
        return []
    return [f.path for f in changed]


def _applies_as_is(made: Rebased) -> bool:
    """Whether the input's hunks apply unchanged to every file of V (then the diff only gets V's index lines)."""
    from patchkit.diffs import diffpatch

    return all(f.how == diffpatch.EXACT for f in made.resolution.files)


# --- DIR -----------------------------------------------------------------------------------------


_STAGING, _EARLIER = ".patchkit-bump-new", ".patchkit-bump-earlier"  # inside DIR, while `write` runs


def check_folder(folder: Path) -> None:
    """DIR is new, empty, or a bump's own folder (written again): nothing of the user's is overwritten;
    and it can be made and written (checked by making it, and a file in it, then removing both)."""
    import errno
    import os
    import tempfile

    from patchkit.base.errors import EnvironmentFailure

    if folder.exists() and (not folder.is_dir() or (any(p.name not in (_STAGING, _EARLIER) for p in folder.iterdir())
                                                    and not (folder / RECORD).is_file())):
        raise UsageError(f"-o {folder}: not a new or empty folder; name another (nothing of yours is overwritten)")
    made = [parent for parent in (folder, *folder.parents) if not parent.exists()]
    try:
        folder.mkdir(parents=True, exist_ok=True)
        handle, probe = tempfile.mkstemp(prefix=".patchkit-bump-check-", dir=folder)
        os.close(handle)
        os.unlink(probe)
    except OSError as exc:
        why = f"-o {folder}: cannot make a folder there and write in it ({exc.strerror or exc}); name another"
        if exc.errno in (errno.EROFS, errno.EACCES, errno.EPERM, errno.ENOSPC, errno.EDQUOT, errno.EIO):
            raise EnvironmentFailure(why) from None
        raise UsageError(why) from None
    finally:
        for parent in made:  # the check leaves nothing behind: the folder is made by `write`
            try:
                parent.rmdir()
            except OSError:
                break


def outputs(bump: Bump) -> list[str]:
    """Every file of DIR the bump wrote (relative paths): the earlier run's, removed before a new plan
    is written into the same DIR, so nothing of a previous move stays beside this one's."""
    return sorted(bump.files)


def _earlier_outputs(folder: Path) -> list[str]:
    """The files the record in DIR says a bump wrote there (each a path inside DIR), REPORT.md and the record."""
    if not (folder / RECORD).is_file():
        return []
    try:
        data = json.loads((folder / RECORD).read_bytes())
        names = [str(name) for name in data.get("outputs", ())]
        for row in data.get("patches", ()):  # a record written before "outputs" was kept: its rows say them
            names += [row["written"]] if row.get("written") else []
            tree = row.get("tree")
            if tree and "outputs" not in data and (folder / tree).is_dir():
                names += [p.relative_to(folder).as_posix() for p in (folder / tree).rglob("*") if not p.is_dir()]
    except (OSError, ValueError, TypeError, KeyError, AttributeError):
        raise UsageError(f"-o {folder}: its {RECORD} cannot be read; name another folder (nothing of yours is "
                         "overwritten)") from None
    inside = [name for name in dict.fromkeys(names) if name and not Path(name).is_absolute()
              and ".." not in Path(name).parts and (folder / name).is_file()]
    return [*inside, *(name for name in (REPORT, RECORD) if (folder / name).is_file())]


def write(bump: Bump, fresh: bool = True) -> list[str]:
    """DIR: each diff re-made for V, each module patch of a folder copied, each conflicting diff's tree,
    the record and REPORT.md. DIR must be new or empty, or a bump's own folder (nothing of yours
    overwritten). A new plan (`fresh`) replaces the files the earlier record in DIR names; `--continue`
    adds to them. Everything is written into DIR/.patchkit-bump-new first: a failure there leaves
    DIR as it was; then the earlier files are moved aside and the new ones moved in (renames)."""
    import os
    import shutil

    folder = bump.folder
    check_folder(folder)
    folder.mkdir(parents=True, exist_ok=True)
    staging, earlier_folder = folder / _STAGING, folder / _EARLIER
    for leftover in (staging, earlier_folder):  # of a run that was killed in the middle
        shutil.rmtree(leftover, ignore_errors=True)
    earlier = _earlier_outputs(folder)
    kept = [] if fresh else [name for name in earlier if name not in (REPORT, RECORD)]
    record = {"schema": SCHEMA, **bump.to_dict(), "outputs": sorted({*kept, *bump.files}),
              "inputs": {pid: {"name": name, "data": base64.b64encode(data).decode()}
                         for pid, (name, data) in bump.inputs.items()}}
    new = {**bump.files, RECORD: json.dumps(record, indent=1).encode(), REPORT: bump.markdown().encode()}
    try:
        for rel, data in new.items():
            path = staging / rel
            path.parent.mkdir(parents=True, exist_ok=True)
            atomic_write(path, data, 0o644)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    for rel in earlier if fresh else ():
        (earlier_folder / rel).parent.mkdir(parents=True, exist_ok=True)
        os.replace(folder / rel, earlier_folder / rel)
    for rel in new:
        (folder / rel).parent.mkdir(parents=True, exist_ok=True)
        os.replace(staging / rel, folder / rel)
    for gone in (staging, earlier_folder):
        shutil.rmtree(gone, ignore_errors=True)
    for rel in earlier if fresh else ():  # the folders of an earlier tree, now empty
        for parent in Path(rel).parents:
            if parent != Path(".") and (folder / parent).is_dir() and not any((folder / parent).iterdir()):
                (folder / parent).rmdir()
    return outputs(bump)


def read(folder: Path) -> Bump:
    """The bump a folder holds (`bump --continue DIR`)."""
    from patchkit.base.util import read_regular

    try:
        data = json.loads(read_regular(folder / RECORD, _RECORD_LIMIT))
    except FileNotFoundError:
        raise UsageError(f"--continue {folder}: no {RECORD} there (write it with `patchkit bump --to V -o DIR`)") from None
    except (OSError, ValueError) as exc:
        raise UsageError(f"--continue {folder}: {RECORD} cannot be read ({exc})") from None
    if not isinstance(data, dict) or data.get("schema") != SCHEMA:
        raise UsageError(f"--continue {folder}: {RECORD} is not a record patchkit bump wrote")
    try:
        rows = tuple(PatchRow.from_dict(row) for row in data["patches"])
        launches = tuple(LaunchChange.from_dict(launch) for launch in data["launches"])
        inputs = {pid: (item["name"], base64.b64decode(item["data"])) for pid, item in data["inputs"].items()}
    except (KeyError, TypeError, ValueError) as exc:
        raise UsageError(f"--continue {folder}: {RECORD} is damaged ({exc})") from None
    return Bump(str(data["from"]), str(data["to"]), folder, rows, launches, tuple(data.get("notes", ())),
                tuple(data.get("left_out", ())), inputs=inputs)


def resume(bump: Bump, to: WheelSource, progress: Callable[[str], None]) -> Bump:
    """`--continue`: in stack order, on V's files as the diffs before it leave them, each conflicting
    diff finished from its resolved tree (`rebase_tree.finish`), each diff waiting on a lower one
    re-made on top of it (its tree written where it conflicts), and every written diff applied; a file
    still holding a block, or a diff that does not apply, stays a conflict."""
    from patchkit.diffs import rebase_tree, unidiff

    rows = {row.id: row for row in bump.patches}
    files: dict[str, bytes] = {}
    state: dict[str, bytes] = {}  # V's files with the diffs so far applied

    def read_on(rel: str) -> bytes | None:
        return state[rel] if rel in state else to.read(rel)

    for pid in [row.id for row in bump.patches if row.kind == "diff"]:
        row = started = rows[pid]
        if row.waits_on and all(rows[lower].action not in BLOCKING for lower in row.waits_on):
            row = _remake(row, bump, read_on, to, files)
            progress(f"{pid}: re-made on top of {', '.join(row.waits_on) or 'the diffs under it'}")
        elif row.tree and row.action == CONFLICTS and not row.waits_on:
            try:
                done = rebase_tree.finish(bump.folder / row.tree, read_on)
            except PlanError as exc:
                rows[pid] = replace(row, detail=str(exc))
                progress(f"{pid}: {exc}")
                continue
            files[done.name] = done.data
            row = replace(row, action=REBASED, conflicts=(), written=done.name, detail=f"resolved in {row.tree}",
                          notes=(*row.notes, *(f"left with {to.version}'s bytes: {rel}"
                                               for rel in done.dropped if rel not in done.not_created),
                                 *done.notes))
            progress(f"{pid}: finished from {row.tree}")
        rows[pid] = row
        if row.action in BLOCKING or not row.written:
            continue
        data = files.get(row.written) or _written(bump.folder, row.written)
        diff = unidiff.parse(data, row.written)
        applied = _apply(diff, dict(state), to.read)
        if applied is None:
            rows[pid] = replace(row, action=CONFLICTS, conflicts=(Conflict("<set>", pid, (
                f"does not apply on SGLang {bump.to} after the diffs before it")),))
            continue
        invalid = _invalid_python(diff, applied)
        if invalid:  # a resolution that does not compile: back to its tree, the diff not written
            files.pop(row.written, None)
            rows[pid] = replace(started, action=CONFLICTS, on_to=upstream.BROKEN, written=None, conflicts=invalid,
                                detail=f"does not compile on SGLang {bump.to}: fix it in {row.tree or 'the tree'}, "
                                       f"then run `patchkit bump --continue {bump.folder}` again")
            for item in invalid:
                progress(f"{pid}: {item.name}: {item.detail}")
            continue
        state = applied
    return replace(bump, patches=tuple(rows[row.id] for row in bump.patches), files=files)


def _written(folder: Path, name: str) -> bytes:
    """A diff an earlier round wrote into DIR, read back (a file deleted from DIR is named, not a crash)."""
    from patchkit.base.util import read_regular

    try:
        return read_regular(folder / name)
    except FileNotFoundError:
        raise UsageError(f"--continue {folder}: {name}, which the bump wrote there, is gone; put it back, or run the "
                         "bump again into a new folder") from None


def _invalid_python(diff: DiffPatchFile, state: dict[str, bytes]) -> tuple[Conflict, ...]:
    """The Python files of `diff` that do not compile once it is applied (`state`), each named by
    its first syntax error's line (`FILE:LINE`), as `apply` refuses them."""
    found = []
    for file in diff.files:
        data = state.get(file.path)
        if data is None or not file.path.endswith(".py"):
            continue
        try:
            compile(data, file.path, "exec", dont_inherit=True)
        except SyntaxError as exc:
            found.append(Conflict(file.path, str(exc.lineno), f"does not compile: {exc.msg}"))
        except ValueError as exc:  # a NUL byte
            found.append(Conflict(file.path, "1", f"does not compile: {exc}"))
    return tuple(found)


def _remake(row: PatchRow, bump: Bump, read_on: Callable[[str], bytes | None], to: WheelSource,
            files: dict[str, bytes]) -> PatchRow:
    """A diff that waited on the diffs under it, re-made from its input onto their finished files."""
    from patchkit.diffs import rebase as rebasing, rebase_tree

    name, data = bump.inputs[row.id]
    diff = rebasing.load(data, name)
    lowers = [rebasing.load(bump.inputs[lower][1], bump.inputs[lower][0]) for lower in row.waits_on]
    try:
        made = rebasing.rebase(diff, data, to.version, read_on, rebasing.stacked_base(lowers), None,
                               to.python_files, to.package_files)
    except rebasing.AlreadyUpstream as exc:
        return replace(row, action=DROP, on_to=upstream.UPSTREAM_FIXED, conflicts=(), waits_on=(), evidence=(str(exc),))
    except PlanError as exc:  # the diff or a file it reads cannot be re-made: a failure, never a drop
        return replace(row, action=FAILED, conflicts=(), waits_on=(), detail=str(exc))
    counts = {k: v for k, v in made.resolution.counts().items() if v}
    gone = _gone(made)
    if gone:
        return replace(row, on_to=upstream.NOT_APPLICABLE, action=GONE, conflicts=(), waits_on=(),
                       detail=f"its files are gone on {made.to}: {', '.join(gone)}")
    if made.conflicts:
        tree = f"{Path(name).stem}.tree"
        for rel, content in rebase_tree.tree_files(made, data).items():
            files[f"{tree}/{rel}"] = content
        return replace(row, counts=counts, tree=tree, waits_on=(), notes=made.notes,
                       conflicts=tuple(Conflict(u.file, u.unit, u.detail) for u in made.conflicts))
    files[name] = made.data
    return replace(row, action=REBASED, counts=counts, conflicts=(), waits_on=(), written=name, notes=made.notes)


def _apply(diff: DiffPatchFile, state: dict[str, bytes], read: Callable[[str], bytes | None]) -> dict[str, bytes] | None:
    """`state` (changed) with `diff` applied on it, each file read from `read` where `state` does not
    have it; None when a hunk does not apply."""
    from patchkit.diffs import diffpatch

    for file in diff.files:
        now = state[file.path] if file.path in state else read(file.path)
        patched = diffpatch.apply_hunks(b"" if now is None else now, file.hunks)
        if patched is None:
            return None
        state[file.path] = patched
    return state


def apply_in_order(diffs: list[tuple[str, DiffPatchFile]], read: Callable[[str], bytes | None],
                   release: str) -> dict[str, str]:
    """{id: why} of the diffs (lower ones of a stack first) that do not apply, each on the files
    as the diffs before it left them (`read`: the release's files)."""
    state: dict[str, bytes] = {}
    failing: dict[str, str] = {}
    for pid, diff in diffs:
        applied = _apply(diff, dict(state), read)
        if applied is None:
            failing[pid] = f"does not apply on SGLang {release} after the diffs before it"
        else:
            state = applied
    return failing
