"""`bump --continue DIR`: the bump a folder holds finished as far as the user's resolutions take
it (`resume`): patch modules fixed in their trees judged again, then the diffs in stack order on
V's files as the diffs before each leave them: each resolved tree turned back into its diff and
put on top of the diffs before it, each diff that waited re-made, every written diff applied and
checked on V. Nothing is written here: `bump_writer.write` writes the result.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from patchkit.base import confined
from patchkit.base.errors import PlanError, UsageError
from patchkit.engine import registry, upstream
from patchkit.engine.bump_rows import (STACK_UNIT, apply_on, breaks_on_v, conflicts_of, imported, module_row, put_tree,
                                       remade, tree_of)
from patchkit.engine.bump_record import (BLOCKING, CARRIES, CONFLICTS, DROP, FAILED, REBASED, Conflict, PatchRow,
                                         continue_command)
from patchkit.engine.bump_record import Damaged as _Damaged, plain_file as _plain_file
from patchkit.engine.bump_report import Bump

if TYPE_CHECKING:
    from patchkit.diffs.format_patch import FileChange
    from patchkit.releases.pristine import WheelSource


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
    state: dict[str, bytes | None] = {}  # V's files with the diffs so far applied
    after: dict[str, dict[str, bytes | None]] = {}  # each applied diff's files as it leaves them
    prior: dict[str, dict[str, bytes | None]] = {}  # ... and as the diffs before it left them
    changed_by: dict[str, str] = {}  # a file of the set -> the last diff that changes it
    started_rows: dict[str, PatchRow] = {}

    def read_on(rel: str) -> bytes | None:
        return state[rel] if rel in state else to.read(rel)

    for pid in [row.id for row in bump.patches if row.kind == "module" and row.tree and row.action in BLOCKING]:
        rows[pid] = _finish_module(rows[pid], bump, to, files)
        progress(f"{pid}: {rows[pid].action} ({rows[pid].tree})")
    unfinished: dict[str, str] = {}  # a file -> a diff before this one, not finished, that changes it
    for pid in _lower_first([row for row in bump.patches if row.kind == "diff"]):
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
        applied = apply_on(diff, dict(state), to.read)
        if applied is None:
            rows[pid] = replace(row, action=CONFLICTS, conflicts=(Conflict("<set>", pid, (
                f"does not apply on SGLang {bump.to} after the diffs before it")),))
            continue
        invalid = tuple(breaks_on_v(diff, applied, state, to))
        if invalid:  # a resolution that does not compile or leaves a name undefined: back to its tree, not written
            files.pop(row.written, None)
            rows[pid] = _broken(started, row, invalid, bump, data, applied, state, to, files, progress)
            continue
        after[pid], prior[pid], started_rows[pid] = applied, state, started
        changed_by.update({file.path: pid for file in diff.files})
        state = applied
    notes = bump.notes
    if bump.python and changed_by:
        found = imported(bump.python, to, state, changed_by, progress)
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
            applied: dict[str, bytes | None], prior: dict[str, bytes | None], to: WheelSource, files: dict[str, bytes],
            progress: Callable[[str], None]) -> PatchRow:
    """`--continue`: a diff that breaks on V goes back to its tree (one written now where it had
    none: V's files with it applied (`applied`), as the diffs before it leave them), its findings
    `FILE:LINE`."""
    for item in found:
        progress(f"{row.id}: {item.name}: {item.detail}")
    tree = started.tree  # the user's resolved files, where there is a tree: fixed there again
    if tree is None and row.written:
        tree = tree_of(row.written, data, applied, prior, to, files)
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
    made = module_row(patch, upstream.Verdict(row.on_from, None, ""), verdict, to, view)
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
        put_tree(done.name, rebase_tree.tree_files(made, done.data, to.read, left), files, row.tree)
        return replace(row, action=CONFLICTS, on_to=upstream.BROKEN, written=None, notes=(*row.notes, *note),
                       counts={what: n for what, n in made.resolution.counts().items() if n},
                       detail=f"its resolution conflicts with the diffs before it: resolve {row.tree} again",
                       conflicts=conflicts_of(made))
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
    return remade(row, made, name, data, files, to.read)  # its base: the diffs under it


def _lower_first(diffs: list[PatchRow]) -> list[str]:
    """The diffs' ids in their order, each moved after the ones it waits on: in a folder written
    before its rows were in stack order (they were in the order of their names), a stacked diff and
    the one under it would otherwise wait on each other at every `--continue`."""
    waits = {row.id: row.waits_on for row in diffs}
    done: list[str] = []

    def place(pid: str, seen: tuple[str, ...]) -> None:
        if pid in done or pid in seen or pid not in waits:  # (a cycle in a damaged record: its order kept)
            return
        for lower in waits[pid]:
            place(lower, (*seen, pid))
        done.append(pid)

    for row in diffs:
        place(row.id, ())
    return done
