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
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from patchkit.base import confined
from patchkit.base.errors import Interrupted, PlanError, UsageError, environment_failure, is_environment_failure
from patchkit.engine import registry, upstream
from patchkit.store.naming import Naming
# The actions and the record's and report's names are said once, in bump_record (the registry reads them too).
from patchkit.engine.bump_record import (BLOCKING as BLOCKING, CARRIES as CARRIES, CONFLICTS as CONFLICTS,
                                         DROP as DROP, FAILED as FAILED, GONE as GONE, NOT_NEEDED as NOT_NEEDED,
                                         REBASED as REBASED, RECORD as RECORD, REPORT as REPORT)
from patchkit.engine.bump_record import JOURNAL as JOURNAL, RECORD_LIMIT as _RECORD_LIMIT, continue_command
# The record's rows and its reader are bump_record's too (the registry reads the record through it).
from patchkit.engine.bump_record import (SCHEMA as SCHEMA, TREE_OPTIONS as TREE_OPTIONS, Conflict as Conflict,
                                         LaunchChange as LaunchChange, PatchRow as PatchRow, _PROBE, _STAGING)
from patchkit.engine.bump_record import Damaged as _Damaged, own as _own, plain_file as _plain_file, shaped as _shaped

if TYPE_CHECKING:
    from patchkit.engine.works_on import Imported
    from patchkit.authoring.patch import Patch
    from patchkit.diffs.unidiff import DiffPatchFile
    from patchkit.diffs.format_patch import FileChange
    from patchkit.diffs.rebase import Rebased
    from patchkit.releases.pristine import WheelSource

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
    # The sha256 of each output as the bump last wrote (or `--continue` last read) it: what may be removed.
    digests: dict[str, str] = field(default_factory=dict, compare=False, repr=False)
    # `--python PY`: the Python that imports the set on V (works_on.imports), kept for `--continue`.
    python: str | None = None
    # The tree option the bump was given (`--site-packages DIR`, `--source DIR`, `--python PATH`), or
    # none: the SGLang tree "To finish" applies the new folder to.
    tree: tuple[str, ...] = ()

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
                "blocked": [row.id for row in self.patches if row.action in BLOCKING], "complete": self.complete,
                "tree": list(self.tree)}

    def next_steps(self) -> list[str]:
        """The commands to finish: resolve and continue, then rebuild the image and apply the new folder."""
        steps = []
        if self.left_out:
            steps.append("fix or remove each patch file left out (REPORT.md: Left out), then run this bump again: DIR lacks them")
        outside = [row for row in self.patches if row.outside]
        if outside:
            steps.append(f"carry the files outside the sglang package into your SGLang {self.to} checkout yourself "
                         "(patchkit patches the installed package only; DIR's diffs leave them out): "
                         + "; ".join(f"{row.id}: {', '.join(row.outside)}" for row in outside))
        modules = [row.tree for row in self.patches if row.tree and row.kind == "module" and row.action in BLOCKING]
        if modules:
            steps.append(f"fix each patch module that does not work on SGLang {self.to} in its tree, against "
                         f"{self.to}'s files beside it ({', '.join(f'{self.folder}/{tree}/{tree[:-5]}.py' for tree in modules)}), "
                         f"then run `{continue_command(self.folder)}`")
        if any(row.tree for row in self.patches if row.action == CONFLICTS and row.kind == "diff"):
            steps.append(f"resolve the <<<<<<< / >>>>>>> blocks in {self.folder}/*.tree/ (each block: make the "
                         f"change where the code is, delete the marker lines), then run "
                         f"`{continue_command(self.folder)}`")
        if any(c.detail.startswith(f"breaks on {self.to}:") for _, c in self.conflicts):
            steps.append(f"fix what each `breaks on {self.to}` conflict names at its FILE:LINE, in {self.folder}/"
                         f"NAME.tree/ (the diff applied on {self.to}), then run `{continue_command(self.folder)}`")
        # Pasteable as printed: the folder (quoted where it must be), the tree the bump was given.
        patches = (str(self.folder),) if any(row.written for row in self.patches) else ()
        option, value = self.tree if len(self.tree) == 2 else (None, None)
        naming = Naming(option, value, patches=patches)
        image = naming.command("image", "build", "--base", f"lmsysorg/sglang:v{self.to}", "--target", self.to,
                               "-t", f"sglang:v{self.to}-patched")
        steps.append(f"rebuild the image (your base image and tag in place of these): `{image}`")
        steps.append(f"apply on the SGLang {self.to} tree: `{naming.command('apply')}`")
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
        outside = [row for row in self.patches if row.outside]
        if outside:
            out += ["", "## Outside the sglang package (not in DIR: yours to carry to " + self.to + ")", ""]
            out += [f"- `{row.id}`: " + ", ".join(f"`{rel}`" for rel in row.outside) for row in outside]
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
         cache: Any = None, launches: tuple[LaunchChange, ...] = (), python: str | None = None) -> Bump:
    """Every loaded patch on V0 (`first`) and V (`to`), both read from their wheels; nothing written.
    Each diff written for V is checked on V first (`works_on`; imported by `python` where given)."""
    from patchkit.engine import verdicts, works_on

    patches = registry.load_all()
    # A patch that can be re-made for a release (a diff: `rebase`, its upstream_remedy) is re-made
    # for V; the others are judged on both releases by their probes.
    diffs = [p for p in patches if p().upstream_remedy(to.version) is not None]
    modules = [p for p in patches if p not in diffs]
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
    rows = [_module_file(row, patch, to, files) for row, patch in zip(rows, modules)]
    notes: tuple[str, ...] = ()
    if diffs:
        made = _diff_rows(diffs, before, first, to, progress, files, inputs, cache)
        checked, notes = _works_on_v(made, to, folder, python, progress, files)
        rows += checked
    if cache is not None:
        cache.save()
    order = {p.ID: i for i, p in enumerate(patches)}
    rows.sort(key=lambda row: order[row.id])
    for row in rows:
        progress(f"{row.id}: {row.on_from} on {first.version}, {row.on_to} on {to.version}: {row.action}")
    left_out = tuple(str(exc) for exc in registry.unloadable())
    return Bump(first.version, to.version, folder, tuple(rows), launches, notes=notes, left_out=left_out, files=files,
                inputs=inputs, python=works_on.interpreter(python) if python else None)


def _module_file(row: PatchRow, patch: type[Patch], to: WheelSource, files: dict[str, bytes]) -> PatchRow:
    """A patch module of a `--patches` folder that stays in force on V, copied into DIR byte for byte
    (a folder of modules, as `--patches DIR` loads it), so that `--patches DIR apply` and `image build`
    get the whole set; the built-in and entry-point sets come with patchkit and their packages.
    One that conflicts or failed on V is never copied as if it worked: it goes into `NAME.tree/`
    beside V's files of its targets, for the user to fix there and `--continue` to take back."""
    if row.action in (DROP, GONE) or not registry.origin(row.id).startswith("folder "):
        return row
    path = registry.source_file(row.id)
    if row.action not in BLOCKING:
        files[path.name] = path.read_bytes()
        return replace(row, written=path.name)
    tree = f"{path.stem}.tree"
    files[f"{tree}/{path.name}"] = path.read_bytes()
    for rel in patch.TARGETS:
        data = to.read(rel)
        if data is not None:
            files[f"{tree}/{rel}"] = data
    return replace(row, tree=tree)


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
    from patchkit.diffs import rebase as rebasing, release_blobs, stacks, unidiff

    items = []
    for patch in diffs:
        path = registry.source_file(patch.ID)
        data = path.read_bytes()
        diff = unidiff.load(data, path.name)
        items.append((diff, data))
        inputs[diff.id] = (path.name, data)
    # The base of each diff, on its files not made on top of another one of them; V0 is older than V.
    release_blobs.find_bases([diff for diff, _ in items], to.version, progress, last=to.version)
    # On V0, the diffs whose hunks apply there as they are, in stack order (a stacked one on top of
    # the one under it), apply; the others are judged (upstream-fixed, broken, ...).
    diffs_by_id = {diff.id: diff for diff, _ in items}
    stack = stacks.stack(diffs_by_id)
    under = stack.under
    failing = apply_in_order([(pid, diffs_by_id[pid]) for pid in stack.order], first.read, first.version)
    before.update({pid: upstream.Verdict(upstream.APPLIES, None, f"on top of {', '.join(under[pid])}"
                                         if pid in under else "") for pid in diffs_by_id if pid not in failing})
    if failing:
        before.update(upstream.judge(first, cache=cache, ids=set(failing)))
    rows = []
    # Every diff re-made in round one, an upper one on its lower ones' files without their blocks
    # (`rebase_stack`): its own conflicts are named now, its tree written; one with none waits
    # (`waits_on`), re-made on top of them by `--continue` once they are finished.
    for pid, made in rebasing.rebase_stack(items, to.version, to.read, to.python_files, to.package_files, stack):
        patch = next(p for p in diffs if p.ID == pid)
        waits = {} if isinstance(made, str) else made.depends_on
        if waits and not isinstance(made, str) and not made.conflicts:
            rows.append(PatchRow(id=pid, kind="diff", on_from=before[pid].state, on_to=upstream.BROKEN,
                                 action=CONFLICTS, upstream=tuple(patch.UPSTREAM), waits_on=tuple(waits),
                                 conflicts=tuple(Conflict(rel, STACK_UNIT, _waiting(lower)) for lower, files in
                                                 waits.items() for rel in files)))
            continue
        rows.append(_diff_row(patch, before[pid], made, inputs[pid][1], files))
    # Each diff's files outside the package, named from round one, whatever its action.
    return [replace(row, outside=diffs_by_id[row.id].outside) for row in rows]


STACK_UNIT = "<stack>"  # the unit of a conflict that is only a lower diff's not being finished


def _waiting(lower: str) -> str:
    return (f"stacked on {lower}, which is not finished here: re-made on top of it by `bump --continue` once it is "
            "resolved (no block of its own on the rest)")


def _diff_row(patch: type[Patch], old: upstream.Verdict, made: Rebased | str, data: bytes,
              files: dict[str, bytes]) -> PatchRow:
    from patchkit.diffs import unit_merge

    common = PatchRow(id=patch.ID, kind="diff", on_from=old.state, on_to=upstream.APPLIES, action=CARRIES,
                      upstream=tuple(patch.UPSTREAM))
    if isinstance(made, str):  # every file already has the change on V
        return replace(common, on_to=upstream.UPSTREAM_FIXED, action=DROP, evidence=(made,))
    row = _remade(common, made, registry.source_file(patch.ID).name, data, files)
    moved = sum(n for what, n in row.counts.items() if what != unit_merge.UPSTREAM)
    if row.action == REBASED and ((not moved and not made.already) or _applies_as_is(made)):
        return replace(row, on_to=upstream.APPLIES, action=CARRIES, counts={})  # the diff applies on V as it is
    return row


def _remade(row: PatchRow, made: Rebased, name: str, data: bytes, files: dict[str, bytes],
            release: Callable[[str], bytes | None] | None = None) -> PatchRow:
    """`row` with what its diff (`data`, file `name`) re-made for V comes to: its files gone there,
    a conflict (NAME.tree/ put in `files`; `release`: V's files, where the diff was made on other
    bytes, as `rebase_tree.tree_files` takes them), or the diff written into `files` (rebased)."""
    from patchkit.diffs import rebase_tree

    counts = {k: v for k, v in made.resolution.counts().items() if v}
    gone = _gone(made)
    if gone:
        return replace(row, on_to=upstream.NOT_APPLICABLE, action=GONE, conflicts=(), waits_on=(),
                       detail=f"its files are gone on {made.to}: {', '.join(gone)}")
    if made.conflicts:
        tree = _put_tree(name, rebase_tree.tree_files(made, data, release), files)
        # Finished after the diffs it depends on (`waits_on`), its resolution merged onto theirs.
        return replace(row, on_to=upstream.BROKEN, action=CONFLICTS, counts=counts, conflicts=_conflicts(made),
                       tree=tree, waits_on=tuple(made.depends_on), notes=made.notes)
    files[name] = made.data
    return replace(row, on_to=upstream.BROKEN, action=REBASED, counts=counts, conflicts=(), waits_on=(), written=name,
                   notes=made.notes)


def _put_tree(name: str, tree_files: dict[str, bytes], files: dict[str, bytes], tree: str | None = None) -> str:
    """A diff's tree ({path in it: bytes}) put in `files` under `tree`, by default NAME.tree/ for
    the diff file `name`; the tree's folder name."""
    tree = tree or f"{Path(name).stem}.tree"
    for rel, content in tree_files.items():
        files[f"{tree}/{rel}"] = content
    return tree


def _conflicts(made: Rebased) -> tuple[Conflict, ...]:
    """The conflicts of a re-made diff; one in a file made on a lower diff's unfinished file says so."""
    on = {rel: lower for lower, rels in made.depends_on.items() for rel in rels}
    return tuple(Conflict(u.file, u.unit, u.detail + (
        f" (made on {on[u.file]}'s file, its blocks taken as its own side: `bump --continue` puts this resolution on top of "
        f"{on[u.file]}'s)" if u.file in on else "")) for u in made.conflicts)


def _works_on_v(rows: list[PatchRow], to: WheelSource, folder: Path, python: str | None,
                progress: Callable[[str], None], files: dict[str, bytes]) -> tuple[list[PatchRow], tuple[str, ...]]:
    """The diffs written for V (carries over, rebased), in stack order, each applied on V's files as
    the diffs before it leave them and checked there (`works_on`: compiled, no new undefined name,
    and with `python`, the set's modules and the model registry imported): a diff that breaks on V
    is a conflict, its findings `FILE:LINE`, its tree written to fix (`--continue`); and the notes
    of what could not be checked."""
    from patchkit.diffs import unidiff

    state: dict[str, bytes] = {}
    after: dict[str, dict[str, bytes]] = {}  # each diff's files as it leaves them, on the diffs under it
    prior: dict[str, dict[str, bytes]] = {}  # ... and as the diffs before it left them
    broken: dict[str, list[Conflict]] = {}
    changed_by: dict[str, str] = {}  # a file of the set -> the last diff that changes it
    for row in rows:
        if row.action in BLOCKING or not row.written:
            continue
        diff = unidiff.parse(files[row.written], row.written)
        applied = _apply(diff, dict(state), to.read)
        if applied is None:  # re-made on these files, it applies; said, never skipped in silence
            broken[row.id] = [Conflict("<set>", row.id, f"does not apply on SGLang {to.version} after the diffs "
                                                        "before it")]
            continue
        after[row.id], prior[row.id] = applied, state
        broken[row.id] = _breaks_on_v(diff, applied, state, to)
        changed_by.update({file.path: row.id for file in diff.files})
        state = applied
    notes: tuple[str, ...] = ()
    if python and changed_by:
        found = _imported(python, to, state, changed_by, progress)
        notes = found.notes
        for finding in found.findings:
            broken[changed_by[finding.file]].append(Conflict(finding.file, str(finding.line), finding.detail))
    out = []
    for row in rows:
        if not broken.get(row.id):
            out.append(row)
            continue
        for item in broken[row.id]:
            progress(f"{row.id}: {item.name}: {item.detail}")
        assert row.written is not None
        data = files.pop(row.written)
        tree = _tree_of(row.written, data, after.get(row.id, {}), prior.get(row.id, {}), to, files)
        out.append(replace(row, action=CONFLICTS, on_to=upstream.BROKEN, written=None, tree=tree,
                           conflicts=tuple(broken[row.id]),
                           detail=f"does not work on SGLang {to.version}: fix it in {tree or 'the diff'}, then run "
                                  f"`{continue_command(folder)}`"))
    return out, notes


def _breaks_on_v(diff: DiffPatchFile, applied: dict[str, bytes], state: dict[str, bytes],
                 to: WheelSource) -> list[Conflict]:
    """What `diff`, applied on V's files as `state` leaves them (`applied`), breaks there: its Python
    files compiled and checked for names left undefined (works_on.static), each `FILE:LINE`."""
    from patchkit.engine import works_on

    found = works_on.static([file.path for file in diff.files],
                            lambda rel: applied[rel] if rel in applied else to.read(rel),
                            lambda rel: state[rel] if rel in state else to.read(rel), to.version)
    return [Conflict(item.file, str(item.line), item.detail) for item in found]


def _imported(python: str, to: WheelSource, state: dict[str, bytes], changed_by: dict[str, str],
              progress: Callable[[str], None]) -> Imported:
    """works_on.imports of the whole set (`state`: V's files it changes, as it leaves them)."""
    from patchkit.engine import works_on

    return works_on.imports(works_on.interpreter(python), to.version, to.package_files(), to.read,
                            {rel: state.get(rel) for rel in changed_by}, progress)


def _tree_of(name: str, data: bytes, applied: dict[str, bytes], prior: dict[str, bytes], to: WheelSource,
             files: dict[str, bytes]) -> str:
    """NAME.tree/ in `files` for a diff written for V that breaks there (`data`): its files as
    `applied` holds them (V's, as the diffs before it leave them, with it applied), to fix and
    `--continue`; `prior`: the files the diffs before it changed, its base there."""
    from patchkit.diffs import rebase_tree, unidiff

    made = rebase_tree.applied_tree(unidiff.parse(data, name), data, to.version,
                                    lambda rel: applied[rel] if rel in applied else to.read(rel), prior)
    return _put_tree(name, made, files)


def _gone(made: Rebased) -> list[str]:
    """The files of a diff that only changes files V has none of (at their paths, or where their
    folder moved), none of its units found elsewhere: its files are gone (no longer applicable);
    [] otherwise (a diff that creates a file, or whose code V still has somewhere, is rebased)."""
    from patchkit.diffs import unit_merge

    changed = [f for f in made.diff.files if f.old_path is not None]
    if not changed or len(changed) != len(made.diff.files) or \
            any(n for what, n in made.resolution.counts().items() if what != unit_merge.CONFLICT):
        return []
    if any(f.how != unit_merge.ABSENT or f.elsewhere or f.moved for f in made.resolution.files):
        return []
    return [f.path for f in changed]


def _applies_as_is(made: Rebased) -> bool:
    """Whether the input's hunks apply unchanged to every file of V (then the diff only gets V's index lines)."""
    from patchkit.diffs import unit_merge

    return all(f.how == unit_merge.EXACT for f in made.resolution.files)


# --- DIR -----------------------------------------------------------------------------------------


# What `write` keeps in DIR besides the outputs, all bump's own: the new set while it is written
# (`_STAGING`), the journal that makes the switch one step (`JOURNAL`, the commit point), and the
# probe file `check_folder` makes; a run that was killed leaves them, the next one finishes or undoes it.
_JOURNAL_LIMIT = 16 << 20


def check_folder(folder: Path, option: str = "-o") -> None:
    """DIR is new, empty, or a bump's own folder (written again): nothing of the user's is overwritten;
    and it can be made and written (checked by making it, and a file in it, then removing both).
    A bump's folder's record is read and checked now, before any work (damaged: exit 2), and a
    symlink where bump's own files or its outputs are is refused (exit 6), never followed."""
    import errno
    import os
    import tempfile

    from patchkit.base.errors import EnvironmentFailure

    if folder.exists():
        if not folder.is_dir():
            raise UsageError(f"-o {folder}: not a new or empty folder; name another (nothing of yours is overwritten)")
        names = [p.name for p in folder.iterdir()]
        for name in (RECORD, JOURNAL, _STAGING):
            if name in names:
                confined.kind(folder, name)  # a symlink there: exit 6, before any work
        if RECORD not in names and JOURNAL not in names and any(not _own(name) for name in names):
            raise UsageError(f"-o {folder}: not a new or empty folder; name another (nothing of yours is overwritten)")
        if JOURNAL not in names:  # (a journal is finished first, by `write`; the record is checked then)
            for rel in _earlier_outputs(folder, option):
                confined.kind(folder, rel)
    made = [parent for parent in (folder, *folder.parents) if not parent.exists()]
    try:
        folder.mkdir(parents=True, exist_ok=True)
        try:  # an unnamed file: a kill during the check leaves nothing in DIR
            os.close(os.open(folder, os.O_TMPFILE | os.O_WRONLY | os.O_CLOEXEC, 0o600))
        except OSError as exc:
            if exc.errno not in (errno.EOPNOTSUPP, errno.EISDIR, errno.EINVAL):
                raise
            handle, probe = tempfile.mkstemp(prefix=_PROBE, dir=folder)
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


# --- the record, read back: every name and type checked (a damaged record is exit 2 naming it) ---


def _record(folder: Path, option: str) -> dict[str, Any] | None:
    """DIR's record, checked (bump_record.load; None where there is none): exit 2 naming it where
    it is damaged, 6 where it is a symlink or not a plain file."""
    from patchkit.engine import bump_record

    try:
        return bump_record.load(folder)
    except IsADirectoryError:
        raise UsageError(f"{option} {folder}: {folder / RECORD} is a folder, not the record patchkit bump "
                         "writes; name another folder (nothing of yours is overwritten)") from None
    except _Damaged as exc:
        raise UsageError(f"{option} {folder}: {folder / RECORD} is damaged ({exc}); nothing written; run the bump "
                         "again into a new folder") from None


def _earlier_outputs(folder: Path, option: str) -> dict[str, str | None]:
    """{file: its sha256 as the bump wrote it} of every output the record in DIR names (None: a
    record from before digests were kept), REPORT.md and the record left out."""
    data = _record(folder, option)
    if data is None:
        return {}
    digests = data.get("digests", {})
    return {name: digests.get(name) for name in data.get("outputs", ())}


def _theirs(folder: Path, rel: str, digest: str | None, option: str) -> None:
    """Refuse to remove or replace `rel` unless it holds the bytes the bump wrote there (exit 2)."""
    from patchkit.base.util import sha256

    if digest is not None and sha256(confined.read(folder, rel, _RECORD_LIMIT)) == digest:
        return
    why = "changed since the bump wrote it" if digest is not None else "not a file the record shows the bump wrote"
    raise UsageError(f"{option} {folder}: {folder / rel} is {why}; nothing written (move it out of the folder, or "
                     "name another folder)")


def write(bump: Bump, fresh: bool = True) -> list[str]:
    """DIR: each diff re-made for V, each module patch of a folder copied, each conflicting diff's tree,
    the record and REPORT.md. DIR must be new or empty, or a bump's own folder (nothing of yours
    overwritten). A new plan (`fresh`) replaces the files the earlier record names, each only where
    it still holds the bytes the bump wrote (the record keeps their sha256); `--continue` adds to them.

    Every path is checked before anything is written (a symlink on the way: exit 6; a file of the
    user's where the bump would write or remove one: exit 2). Then the new files are written into
    DIR/.patchkit-bump-new/, the journal naming what to move in and remove is written (the commit
    point), the switch is made and the journal removed. A run killed before the commit point leaves
    DIR as it was (the next run removes the half-written folder); after it, the next run finishes
    the switch (`recover`): DIR holds the earlier set or the new one, never a mix."""
    from patchkit.base.util import sha256

    folder = bump.folder
    option = "-o" if fresh else "--continue"
    check_folder(folder, option)
    folder.mkdir(parents=True, exist_ok=True)
    recover(folder)
    earlier = _earlier_outputs(folder, option)
    kept = {} if fresh else {rel: bump.digests.get(rel, digest) for rel, digest in earlier.items()}
    digests = {**kept, **{rel: sha256(data) for rel, data in bump.files.items()}}
    record = {"schema": SCHEMA, **bump.to_dict(), "python": bump.python, "outputs": sorted(digests),
              "digests": {rel: digests[rel] for rel in sorted(digests) if digests[rel] is not None},
              "inputs": {pid: {"name": name, "data": base64.b64encode(data).decode()}
                         for pid, (name, data) in bump.inputs.items()}}
    new = {**bump.files, RECORD: json.dumps(record, indent=1).encode(), REPORT: bump.markdown().encode()}
    remove = {rel: digest for rel, digest in earlier.items() if rel not in new} if fresh else {}
    for rel, digest in remove.items():  # check first: every file to remove is the bump's own, in DIR
        if confined.kind(folder, rel) == "file":
            _theirs(folder, rel, digest, option)
    for rel in new:  # ... and every file to write goes where nothing of the user's is
        found = confined.kind(folder, rel)
        if found == "folder":
            raise UsageError(f"{option} {folder}: {folder / rel} is a folder where the bump writes a file; nothing "
                             "written (move it out of the folder, or name another folder)")
        if found == "file" and rel not in (RECORD, REPORT):  # (--continue: a tree's file as it read it, re-written)
            _theirs(folder, rel, earlier.get(rel) if fresh else bump.digests.get(rel, earlier.get(rel)), option)
    try:
        for rel, data in new.items():
            confined.write(folder, f"{_STAGING}/{rel}", data)
        confined.write(folder, f"{_STAGING}/{JOURNAL}", json.dumps(
            {"schema": SCHEMA, "add": sorted(new, key=lambda rel: rel == RECORD), "remove": remove}).encode())
    except BaseException:
        confined.remove_tree(folder, _STAGING)
        raise
    try:
        with _interrupts_held():  # from the commit point on, a Ctrl-C waits for the switch to be made
            confined.rename(folder, f"{_STAGING}/{JOURNAL}", JOURNAL)  # the commit point
            confined.sync(folder)
            _switch(folder, _journal(folder))
    except KeyboardInterrupt:
        raise Interrupted(f"interrupted while {folder} was written; its new set had been committed and was put in "
                          "place first: DIR holds it") from None
    except OSError as exc:
        if not is_environment_failure(exc) or confined.kind(folder, JOURNAL) != "file":
            raise
        raise environment_failure(exc, f"{folder}'s new set was committed ({JOURNAL}): the next `patchkit bump` "
                                       "on it puts it in place") from None
    return outputs(bump)


@contextmanager
def _interrupts_held() -> Iterator[None]:
    """A SIGINT that comes while the body runs is noted, not raised, and raised (KeyboardInterrupt)
    once it is done. Python runs a signal's handler in the main thread whichever thread the signal
    reached, so the handler is swapped there (elsewhere nothing is held)."""
    import signal
    import threading

    if threading.current_thread() is not threading.main_thread():
        yield
        return
    came: list[int] = []
    previous = signal.signal(signal.SIGINT, lambda signum, frame: came.append(signum))
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)
    if came and previous is signal.default_int_handler:
        raise KeyboardInterrupt
    if came and callable(previous):
        previous(signal.SIGINT, None)


def _journal(folder: Path) -> dict[str, Any]:
    try:
        data = json.loads(confined.read(folder, JOURNAL, _JOURNAL_LIMIT))
        if not isinstance(data, dict) or data.get("schema") != SCHEMA:
            raise _Damaged("not a journal patchkit bump wrote")
        _shaped(data.get("add"), "tuple[str, ...]", "add")
        _shaped(data.get("remove"), "dict[str, str | None]", "remove")
        for i, rel in enumerate([*data["add"], *data["remove"]]):
            _plain_file(rel, f"file {i}", nested=True) if rel not in (RECORD, REPORT) else None
    except (ValueError, RecursionError) as exc:
        raise UsageError(f"{folder}: {folder / JOURNAL} is damaged ({exc}); nothing changed; move the folder "
                         "away and run the bump again into a new one") from None
    return data


def _switch(folder: Path, journal: dict[str, Any]) -> None:
    """Roll the journal forward: each new file moved in from the staging folder (the record last),
    each earlier output that still holds the bytes the bump wrote removed, then the journal and the
    staging folder; each step done once however often it is run (a kill in the middle: run again)."""
    from patchkit.base.util import sha256

    touched = {""}
    for rel in journal["add"]:
        if confined.kind(folder, f"{_STAGING}/{rel}") == "file":
            confined.rename(folder, f"{_STAGING}/{rel}", rel)
        touched.add(rel.rpartition("/")[0])
    for rel, digest in journal["remove"].items():
        if confined.kind(folder, rel) == "file" and digest is not None and \
                sha256(confined.read(folder, rel, _RECORD_LIMIT)) == digest:
            confined.unlink(folder, rel)
    for parent in sorted(touched, key=len, reverse=True):
        confined.sync(folder, parent)
    for rel in journal["remove"]:  # the folders of an earlier tree, now empty
        if "/" in rel:
            confined.rmdir_empty(folder, rel.rpartition("/")[0])
    confined.unlink(folder, JOURNAL)
    confined.remove_tree(folder, _STAGING)
    confined.sync(folder)


def recover(folder: Path) -> bool:
    """A `write` into `folder` that was killed: finished where its journal was written (True), else
    its half-written new set removed (DIR is the earlier set); leftovers of `check_folder` removed."""
    if not folder.is_dir():
        return False
    for entry in folder.iterdir():
        if entry.name.startswith(_PROBE):
            confined.unlink(folder, entry.name)
    if confined.kind(folder, JOURNAL) == "file":
        try:
            with _interrupts_held():
                _switch(folder, _journal(folder))
        except KeyboardInterrupt:
            raise Interrupted(f"interrupted; {folder}'s write that an earlier run left unfinished was finished first "
                              "(DIR holds that run's new set); nothing else was done") from None
        return True
    confined.remove_tree(folder, _STAGING)
    return False


def read(folder: Path) -> Bump:
    """The bump a folder holds (`bump --continue DIR`), every part of its record checked: a damaged
    record (a key missing, a value of the wrong type, a name that is not a plain file in DIR) is
    exit 2 naming it; a write of DIR a kill interrupted is finished first."""
    if not folder.is_dir():
        raise UsageError(f"--continue {folder}: no {RECORD} there (write it with `patchkit bump --to V -o DIR`)")
    recover(folder)
    data = _record(folder, "--continue")
    if data is None:
        raise UsageError(f"--continue {folder}: no {RECORD} there (write it with `patchkit bump --to V -o DIR`)")
    rows = tuple(PatchRow.from_dict(row) for row in data["patches"])
    launches = tuple(LaunchChange.from_dict(launch) for launch in data["launches"])
    inputs = {pid: (item["name"], base64.b64decode(item["data"])) for pid, item in data.get("inputs", {}).items()}
    return Bump(str(data["from"]), str(data["to"]), folder, rows, launches, tuple(data.get("notes", ())),
                tuple(data.get("left_out", ())), inputs=inputs, digests=dict(data.get("digests", {})),
                python=data.get("python"), tree=tuple(data.get("tree", ())))


def resume(bump: Bump, to: WheelSource, progress: Callable[[str], None]) -> Bump:
    """`--continue`: in stack order, on V's files as the diffs before it leave them, each conflicting
    diff finished from its resolved tree (`rebase_tree.finish`; one made on a lower diff's files
    with its blocks taken as its side, put on top of that one's resolution, `_onto`), each diff waiting on a lower
    one without a tree re-made on top of it (its tree written where it conflicts), a diff after
    one that is not finished in its files (a lower one, or a sibling before it) left for the next round, and every written diff applied; a file
    still holding a block, or a diff that does not apply, stays a conflict. Resolved all at once,
    a stack is finished by one `--continue`."""
    from patchkit.diffs import rebase_tree, unidiff

    rows = {row.id: row for row in bump.patches}
    files: dict[str, bytes] = {}
    digests = dict(bump.digests)  # a resolved tree's files as read: the bump's own from now on
    state: dict[str, bytes] = {}  # V's files with the diffs so far applied
    after: dict[str, dict[str, bytes]] = {}  # each applied diff's files as it leaves them
    prior: dict[str, dict[str, bytes]] = {}  # ... and as the diffs before it left them
    changed_by: dict[str, str] = {}  # a file of the set -> the last diff that changes it
    started_rows: dict[str, PatchRow] = {}

    def read_on(rel: str) -> bytes | None:
        return state[rel] if rel in state else to.read(rel)

    for pid in [row.id for row in bump.patches if row.kind == "module" and row.tree and row.action in BLOCKING]:
        rows[pid] = _finish_module(rows[pid], bump, to, files)
        progress(f"{pid}: {rows[pid].action} ({rows[pid].tree})")
    unfinished: dict[str, str] = {}  # a file -> a diff before this one, not finished, that changes it
    for pid in [row.id for row in bump.patches if row.kind == "diff"]:
        row = started = rows[pid]
        own = _input_files(bump, pid)
        pending = list(dict.fromkeys([*(lower for lower in row.waits_on if rows[lower].action in BLOCKING),
                                      *(unfinished[rel] for rel in own if rel in unfinished)]))
        if pending and row.action == CONFLICTS:  # a diff before it in its files is not finished: neither is it
            done_lowers = set(row.waits_on) - set(pending)
            row = replace(row, conflicts=tuple(c for c in row.conflicts if not (
                c.unit == STACK_UNIT and any(c.detail.startswith(f"stacked on {lower},") for lower in done_lowers))))
            progress(f"{pid}: waits on {', '.join(pending)} (not finished, before it in its files)")
        elif row.waits_on and not row.tree:
            row = _remake(row, bump, read_on, to, files)
            progress(f"{pid}: re-made on top of {', '.join(row.waits_on) or 'the diffs under it'}")
        elif row.tree and row.action == CONFLICTS:
            if confined.kind(bump.folder, row.tree) != "folder":  # a symlink: exit 6, never followed
                raise UsageError(f"--continue {bump.folder}: {bump.folder / row.tree}, the tree the bump wrote there, "
                                 "is gone; put it back, or run the bump again into a new folder")
            try:
                done = rebase_tree.finish(bump.folder / row.tree, to.read,  # the change from the tree's own base
                                         continue_command(bump.folder))
            except PlanError as exc:
                rows[pid] = replace(row, detail=str(exc))
                progress(f"{pid}: {exc}")
                continue
            try:
                _plain_file(done.name, "name")
            except _Damaged as exc:
                raise UsageError(f"--continue {bump.folder}: {bump.folder / row.tree / rebase_tree.RECORD} is damaged "
                                 f"({exc}); nothing written") from None
            digests.update({f"{row.tree}/{rel}": digest for rel, digest in done.digests.items()})
            row = replace(row, action=REBASED, conflicts=(), written=done.name, detail=f"resolved in {row.tree}", waits_on=(),
                          counts=_resolved(row.counts),
                          notes=(*row.notes, *(f"left with {to.version}'s bytes: {rel}"
                                               for rel in done.dropped if rel not in done.not_created),
                                 *done.notes))
            for rel in done.taken:  # a change the resolution moved to another file of V: said, not only noted
                progress(f"{pid}: taken from {row.tree}: {rel} (a file of SGLang {to.version} the diff did not change)")
            stale = [c.rel for c in done.changes if c.before != read_on(c.rel)]
            if stale:  # the diffs before it changed its files since its tree was made: its own change onto them
                row = _onto(row, done, stale, bump, read_on, to, files)
                progress(f"{pid}: finished from {row.tree}, re-made on top of the diffs before it ({', '.join(stale)})")
            else:
                files[done.name] = done.data
                progress(f"{pid}: finished from {row.tree}")
        rows[pid] = row
        if row.action in BLOCKING:
            unfinished.update({rel: pid for rel in own if rel not in unfinished})
        if row.action in BLOCKING or not row.written:
            continue
        data = files.get(row.written) or _written(bump.folder, row.written)
        diff = unidiff.parse(data, row.written)
        applied = _apply(diff, dict(state), to.read)
        if applied is None:
            rows[pid] = replace(row, action=CONFLICTS, conflicts=(Conflict("<set>", pid, (
                f"does not apply on SGLang {bump.to} after the diffs before it")),))
            continue
        invalid = tuple(_breaks_on_v(diff, applied, state, to))
        if invalid:  # a resolution that does not compile or leaves a name undefined: back to its tree, not written
            files.pop(row.written, None)
            rows[pid] = _broken(started, row, invalid, bump, data, applied, state, to, files, progress)
            continue
        after[pid], prior[pid], started_rows[pid] = applied, state, started
        changed_by.update({file.path: pid for file in diff.files})
        state = applied
    notes = bump.notes
    if bump.python and changed_by:
        found = _imported(bump.python, to, state, changed_by, progress)
        notes = (*(note for note in notes if not note.startswith("not checked by importing")), *found.notes)
        broken: dict[str, list[Conflict]] = {}
        for finding in found.findings:
            broken.setdefault(changed_by[finding.file], []).append(
                Conflict(finding.file, str(finding.line), finding.detail))
        for pid, items in broken.items():
            row = rows[pid]
            assert row.written is not None
            data = files.pop(row.written) if row.written in files else _written(bump.folder, row.written)
            rows[pid] = _broken(started_rows[pid], row, tuple(items), bump, data, after[pid], prior[pid], to, files,
                                progress)
    return replace(bump, patches=tuple(rows[row.id] for row in bump.patches), files=files, notes=notes, digests=digests)


def _input_files(bump: Bump, pid: str) -> set[str]:
    """The files of the package the diff `pid` changes, as given (none for a diff the record lacks)."""
    from patchkit.diffs import unidiff

    if pid not in bump.inputs:
        return set()
    name, data = bump.inputs[pid]
    try:
        return {file.path for file in unidiff.parse(data, name).files}
    except (UsageError, PlanError):  # not read as a diff here: its own re-make says why
        return set()


def _broken(started: PatchRow, row: PatchRow, found: tuple[Conflict, ...], bump: Bump, data: bytes,
            applied: dict[str, bytes], prior: dict[str, bytes], to: WheelSource, files: dict[str, bytes],
            progress: Callable[[str], None]) -> PatchRow:
    """`--continue`: a diff that breaks on V goes back to its tree (one written now where it had
    none: V's files with it applied (`applied`), as the diffs before it leave them), its findings
    `FILE:LINE`."""
    for item in found:
        progress(f"{row.id}: {item.name}: {item.detail}")
    tree = started.tree  # the user's resolved files, where there is a tree: fixed there again
    if tree is None and row.written:
        tree = _tree_of(row.written, data, applied, prior, to, files)
    return replace(started, action=CONFLICTS, on_to=upstream.BROKEN, written=None, conflicts=found, tree=tree,
                   waits_on=(), detail=f"does not work on SGLang {bump.to}: fix it in {tree or 'the diff'}, then run "
                                       f"`{continue_command(bump.folder)}` again")


def _resolved(counts: dict[str, int]) -> dict[str, int]:
    """A diff's units by outcome once its tree is finished: its conflicts are resolved ones."""
    from patchkit.diffs import unit_merge

    found = {what: n for what, n in counts.items() if what != unit_merge.CONFLICT}
    if counts.get(unit_merge.CONFLICT):
        found["resolved"] = counts[unit_merge.CONFLICT]
    return found


def _finish_module(row: PatchRow, bump: Bump, to: WheelSource, files: dict[str, bytes]) -> PatchRow:
    """A patch module that conflicted or failed, fixed by the user in DIR/NAME.tree/NAME.py: judged on
    V as the plan judges a module; in force there, it is copied into DIR (`rebased`), else it stays
    as it is with the new verdict's detail."""
    from patchkit.base.util import read_regular
    from patchkit.engine import view as view_mod

    assert row.tree is not None
    name = row.tree.removesuffix(".tree") + ".py"
    try:
        data = read_regular(bump.folder / row.tree / name)
        patch = registry.load_file(bump.folder / row.tree / name, row.id)
    except FileNotFoundError:
        raise UsageError(f"--continue {bump.folder}: {row.tree}/{name}, which the bump wrote there, is gone; put it "
                         "back, or run the bump again into a new folder") from None
    except (PlanError, UsageError) as exc:  # it does not import (yet): still the user's to fix
        return replace(row, detail=str(exc))
    view = view_mod.code_view(to, patch)  # type: ignore[arg-type]
    verdict = upstream.judge_class(to, view, patch.ID)
    made = _module_row(patch, upstream.Verdict(row.on_from, None, ""), verdict, to, view)
    if made.action in BLOCKING:
        return replace(made, tree=row.tree)
    if made.action in (CARRIES, REBASED):
        files[name] = data
        made = replace(made, action=REBASED, written=name, detail=f"fixed in {row.tree}")
    return replace(made, tree=row.tree)


def _written(folder: Path, name: str) -> bytes:
    """A diff an earlier round wrote into DIR, read back (a file deleted from DIR is named, not a crash;
    a symlink there is refused, never followed: exit 6)."""
    try:
        return confined.read(folder, name)
    except FileNotFoundError:
        raise UsageError(f"--continue {folder}: {name}, which the bump wrote there, is gone; put it back, or run the "
                         "bump again into a new folder") from None


def _onto(row: PatchRow, done: Any, stale: list[str], bump: Bump, read_on: Callable[[str], bytes | None],
          to: WheelSource, files: dict[str, bytes]) -> PatchRow:
    """A resolved tree made on files the diffs before it have changed since (a sibling finished in
    the same round): the resolution's own change, from the tree's base to the resolved files,
    re-made onto the files as those diffs leave them (as git rebase does), never the stale tree
    diffed against the newer file. Where it conflicts there, its tree is written again."""
    from patchkit.diffs import rebase as rebasing, rebase_tree, unidiff

    assert row.tree is not None
    base = {c.rel: c.before for c in done.changes}
    diff = unidiff.load(done.data, done.name)
    try:
        made = rebasing.rebase(diff, done.data, to.version, read_on, lambda file: base.get(file.path),
                               f"{row.tree} as resolved", to.python_files, to.package_files)
    except rebasing.AlreadyUpstream:  # the diffs before it hold the whole change already
        return replace(row, action=DROP, on_to=upstream.UPSTREAM_FIXED, written=None,
                       evidence=(f"the diffs before it already make its change ({', '.join(stale)})",))
    except PlanError as exc:
        return replace(row, action=FAILED, written=None, detail=str(exc))
    note = (f"re-made on top of the diffs before it, which changed {', '.join(stale)} after its tree was made",)
    merged = _merged_onto(done, stale, read_on) if made.conflicts else None
    if merged == []:  # the diffs before it hold the whole resolution already
        return replace(row, action=DROP, on_to=upstream.UPSTREAM_FIXED, written=None,
                       evidence=(f"the diffs before it already make its change ({', '.join(stale)})",))
    if merged is not None:  # its lines next to theirs, or their change made alike: no clash
        files[done.name] = rebasing.write_diff(done.data, diff.prefix, merged)
        return replace(row, notes=(*row.notes, *note))
    if made.conflicts:
        left = {rel: data for rel in base if rel not in {c.rel for c in made.changes}
                for data in [read_on(rel)] if data is not None}
        _put_tree(done.name, rebase_tree.tree_files(made, done.data, to.read, left), files, row.tree)
        return replace(row, action=CONFLICTS, on_to=upstream.BROKEN, written=None, notes=(*row.notes, *note),
                       counts={what: n for what, n in made.resolution.counts().items() if n},
                       detail=f"its resolution conflicts with the diffs before it: resolve {row.tree} again",
                       conflicts=_conflicts(made))
    files[done.name] = made.data
    return replace(row, notes=(*row.notes, *made.notes, *note))


def _merged_onto(done: Any, stale: list[str], read_on: Callable[[str], bytes | None]) -> list[FileChange] | None:
    """A resolved tree's change, from its base to the resolved files, put line by line onto the
    files as the diffs before it leave them (`line_merge`: a line it changed next to one they
    changed, or a change of theirs it makes alike, is no clash): each file's change from those
    files; None where a file clashes (they took away or changed otherwise what it changes), or is
    created or deleted on either side (left to the unit-by-unit re-make)."""
    from patchkit.diffs import line_merge
    from patchkit.diffs.format_patch import FileChange

    found: list[FileChange] = []
    for change in done.changes:
        if change.rel not in stale:
            found.append(change)
            continue
        now = read_on(change.rel)
        if change.before is None or change.after is None or now is None:
            return None
        merged = line_merge.merge(change.before, now, change.after)
        if merged is None:
            return None
        if merged != now:
            found.append(FileChange(change.rel, now, merged))
    return found


def _remake(row: PatchRow, bump: Bump, read_on: Callable[[str], bytes | None], to: WheelSource,
            files: dict[str, bytes]) -> PatchRow:
    """A diff that waited on the diffs under it, re-made from its input onto their finished files."""
    from patchkit.diffs import rebase as rebasing, unidiff

    name, data = bump.inputs[row.id]
    diff = unidiff.load(data, name)
    lowers = [unidiff.load(bump.inputs[lower][1], bump.inputs[lower][0]) for lower in row.waits_on]
    try:
        made = rebasing.rebase(diff, data, to.version, read_on, rebasing.stacked_base(lowers), None,
                               to.python_files, to.package_files)
    except rebasing.AlreadyUpstream as exc:
        return replace(row, action=DROP, on_to=upstream.UPSTREAM_FIXED, conflicts=(), waits_on=(), evidence=(str(exc),))
    except PlanError as exc:  # the diff or a file it reads cannot be re-made: a failure, never a drop
        return replace(row, action=FAILED, conflicts=(), waits_on=(), detail=str(exc))
    return _remade(row, made, name, data, files, to.read)  # its base: the diffs under it


def _apply(diff: DiffPatchFile, state: dict[str, bytes], read: Callable[[str], bytes | None]) -> dict[str, bytes] | None:
    """`state` (changed) with `diff` applied on it, each file read from `read` where `state` does not
    have it; None when a hunk does not apply."""
    from patchkit.diffs import unit_merge

    for file in diff.files:
        now = state[file.path] if file.path in state else read(file.path)
        patched = unit_merge.apply_hunks(b"" if now is None else now, file.hunks)
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
