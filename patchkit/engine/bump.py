"""`bump`: every patch in force moved from release V0 to release V in one plan, never stopping at
the first failure: each patch's verdict on both (the module patches by their probes, judged as
`matrix` judges them; each diff patch re-made for V as `rebase` re-makes a stack), the action it
needs, the files written for V (diffs under their own names, conflicts as `rebase --tree`'s
resolvable trees), the launch lines doctor checked on both. This module is the plan (round one);
the rest is one module per job, each name kept here too: the result and its report
(`bump_report`: `Bump`, `to_dict`, `markdown`), a patch's row on V shared with `--continue`
(`bump_rows`), `--continue` (`bump_continue.resume`), and DIR (`bump_writer`: `check_folder`,
`write`, `read`, `recover`). Nothing writes a tree or the state: `write` writes only the bump's folder.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from patchkit.engine import registry, upstream
# The actions and the record's and report's names are said once, in bump_record (the registry reads them too).
from patchkit.engine.bump_record import (BLOCKING as BLOCKING, CARRIES as CARRIES, CONFLICTS as CONFLICTS,
                                         DROP as DROP, FAILED as FAILED, GONE as GONE, NOT_NEEDED as NOT_NEEDED,
                                         REBASED as REBASED, RECORD as RECORD, REPORT as REPORT)
from patchkit.engine.bump_record import JOURNAL as JOURNAL, continue_command
# The record's rows and its reader are bump_record's too (the registry reads the record through it).
from patchkit.engine.bump_record import (TREE_OPTIONS as TREE_OPTIONS, Conflict as Conflict,
                                         LaunchChange as LaunchChange, PatchRow as PatchRow)
# The result and its report (bump_report), and DIR (bump_writer), each a module of its own; named here too.
from patchkit.engine.bump_report import Bump as Bump
from patchkit.engine.bump_writer import (check_folder as check_folder, read as read,
                                         recover as recover, write as write)
from patchkit.engine.bump_continue import resume as resume
# A patch's row on V, shared with --continue (bump_rows).
from patchkit.engine.bump_rows import (STACK_UNIT as STACK_UNIT, apply_on, breaks_on_v, imported, module_row,
                                       remade, tree_of)

if TYPE_CHECKING:
    from patchkit.authoring.patch import Patch
    from patchkit.diffs.unidiff import DiffPatchFile
    from patchkit.diffs.rebase import Rebased
    from patchkit.releases.pristine import WheelSource


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
    rows = [module_row(p, before[p.ID], after[p.ID], to, view) for p in modules]
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
    # The diffs keep the places the load gave them but take them in stack order (as made), never in
    # the order of their names: `--continue` finishes them in this order, a lower one first.
    stacked = [row.id for row in rows if row.kind == "diff"]
    order.update(zip(stacked, sorted(order[pid] for pid in stacked)))
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


def _diff_rows(diffs: list[type[Patch]], before: dict[str, upstream.Verdict], first: WheelSource, to: WheelSource,
               progress: Callable[[str], None], files: dict[str, bytes],
               inputs: dict[str, tuple[str, bytes]], cache: Any) -> list[PatchRow]:
    from patchkit.diffs import rebase as rebasing, release_blobs, stacks, unidiff

    items = []
    outside: list[PatchRow] = []
    for patch in diffs:
        path = registry.source_file(patch.ID)
        data = path.read_bytes()
        diff = unidiff.load(data, path.name)
        inputs[diff.id] = (path.name, data)
        if unidiff.nothing_inside(diff):
            outside.append(_outside_row(patch, diff, path.name, data, to.version, files))
            continue
        items.append((diff, data))
    # The base of each diff, on its files not made on top of another one of them; V0 is older than V.
    release_blobs.find_bases([diff for diff, _ in items], to.version, progress, last=to.version)
    # On V0, the diffs whose hunks apply there as they are, in stack order (a stacked one on top of
    # the one under it), apply; the others are judged (upstream-fixed, broken, ...).
    diffs_by_id = {diff.id: diff for diff, _ in items}
    stack = stacks.stack(diffs_by_id)
    under = stack.under
    # A stacked diff names the diffs under it (`Patchkit-After:`), in DIR and in what `--continue`
    # re-makes it from: `apply` and the set's order then need no report to apply it after them.
    for i, (diff, data) in enumerate(items):
        if diff.id in under:
            data = rebasing.name_after(data, sorted(under[diff.id]), diff.after)
            items[i] = (diff, data)
            inputs[diff.id] = (inputs[diff.id][0], data)
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
    return [replace(row, outside=diffs_by_id[row.id].outside) for row in rows] + outside


def _outside_row(patch: type[Patch], diff: DiffPatchFile, name: str, data: bytes, to: str,
                 files: dict[str, bytes]) -> PatchRow:
    """A diff whose every file is outside the package (a checkout's `python/pyproject.toml` pin):
    nothing patchkit can judge on either release; written to DIR unchanged, for the user to check
    against V by hand (`Bump.next_steps`), never a reason the set is not finished."""
    files[name] = data
    return PatchRow(id=patch.ID, kind="diff", on_from=upstream.NOT_APPLICABLE, on_to=upstream.NOT_APPLICABLE,
                    action=NOT_NEEDED, upstream=tuple(patch.UPSTREAM), written=name, outside=diff.outside,
                    detail=f"nothing inside the sglang package: written to DIR unchanged; check its files against "
                           f"SGLang {to} by hand (a dependency pin: the version {to} needs)")


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
    row = remade(common, made, registry.source_file(patch.ID).name, data, files)
    moved = sum(n for what, n in row.counts.items() if what != unit_merge.UPSTREAM)
    if row.action == REBASED and ((not moved and not made.already) or _applies_as_is(made)):
        return replace(row, on_to=upstream.APPLIES, action=CARRIES, counts={})  # the diff applies on V as it is
    return row


def _works_on_v(rows: list[PatchRow], to: WheelSource, folder: Path, python: str | None,
                progress: Callable[[str], None], files: dict[str, bytes]) -> tuple[list[PatchRow], tuple[str, ...]]:
    """The diffs written for V (carries over, rebased), in stack order, each applied on V's files as
    the diffs before it leave them and checked there (`works_on`: compiled, no new undefined name,
    and with `python`, the set's modules and the model registry imported): a diff that breaks on V
    is a conflict, its findings `FILE:LINE`, its tree written to fix (`--continue`); and the notes
    of what could not be checked."""
    from patchkit.diffs import unidiff

    state: dict[str, bytes | None] = {}
    after: dict[str, dict[str, bytes | None]] = {}  # each diff's files as it leaves them, on the diffs under it
    prior: dict[str, dict[str, bytes | None]] = {}  # ... and as the diffs before it left them
    broken: dict[str, list[Conflict]] = {}
    changed_by: dict[str, str] = {}  # a file of the set -> the last diff that changes it
    for row in rows:
        if row.action in BLOCKING or not row.written or row.action == NOT_NEEDED:  # (nothing inside the package)
            continue
        diff = unidiff.parse(files[row.written], row.written)
        applied = apply_on(diff, dict(state), to.read)
        if applied is None:  # re-made on these files, it applies; said, never skipped in silence
            broken[row.id] = [Conflict("<set>", row.id, f"does not apply on SGLang {to.version} after the diffs "
                                                        "before it")]
            continue
        after[row.id], prior[row.id] = applied, state
        broken[row.id] = breaks_on_v(diff, applied, state, to)
        changed_by.update({file.path: row.id for file in diff.files})
        state = applied
    notes: tuple[str, ...] = ()
    if python and changed_by:
        found = imported(python, to, state, changed_by, progress)
        notes = found.notes
        for finding in found.findings:
            said = broken[changed_by[finding.file]]
            if not any(item.file == finding.file and item.unit == str(finding.line) for item in said):
                said.append(Conflict(finding.file, str(finding.line), finding.detail))  # else said already, statically
    out = []
    for row in rows:
        if not broken.get(row.id):
            out.append(row)
            continue
        for item in broken[row.id]:
            progress(f"{row.id}: {item.name}: {item.detail}")
        assert row.written is not None
        data = files.pop(row.written)
        tree = tree_of(row.written, data, after.get(row.id, {}), prior.get(row.id, {}), to, files)
        out.append(replace(row, action=CONFLICTS, on_to=upstream.BROKEN, written=None, tree=tree,
                           conflicts=tuple(broken[row.id]),
                           detail=f"does not work on SGLang {to.version}: fix it in {tree or 'the diff'}, then run "
                                  f"`{continue_command(folder)}`"))
    return out, notes


def _applies_as_is(made: Rebased) -> bool:
    """Whether the input's hunks apply unchanged to every file of V (then the diff only gets V's index lines)."""
    from patchkit.diffs import unit_merge

    return all(f.how == unit_merge.EXACT for f in made.resolution.files)


def apply_in_order(diffs: list[tuple[str, DiffPatchFile]], read: Callable[[str], bytes | None],
                   release: str) -> dict[str, str]:
    """{id: why} of the diffs (lower ones of a stack first) that do not apply, each on the files
    as the diffs before it left them (`read`: the release's files)."""
    state: dict[str, bytes | None] = {}
    failing: dict[str, str] = {}
    for pid, diff in diffs:
        applied = apply_on(diff, dict(state), read)
        if applied is None:
            failing[pid] = f"does not apply on SGLang {release} after the diffs before it"
        else:
            state = applied
    return failing
