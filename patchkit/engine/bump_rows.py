"""A patch's row on V, for `bump`'s plan (round one) and `--continue` alike: a patch module's from
its verdicts on V0 and V (`module_row`, a drop with its evidence), a diff's from its re-make
for V (`remade`: its files gone, a conflict with its tree, or the diff written), and what a diff
applied on V's files breaks there (`apply_on`, `breaks_on_v`, `imported`; `tree_of` writes the
tree to fix it in).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from patchkit.engine import upstream
from patchkit.engine.bump_record import CARRIES, CONFLICTS, DROP, FAILED, GONE, NOT_NEEDED, REBASED, Conflict, PatchRow

if TYPE_CHECKING:
    from patchkit.engine.works_on import Imported
    from patchkit.authoring.patch import Patch
    from patchkit.diffs.unidiff import DiffPatchFile
    from patchkit.diffs.rebase import Rebased
    from patchkit.releases.pristine import WheelSource


STACK_UNIT = "<stack>"  # the unit of a conflict that is only a lower diff's not being finished


def module_row(patch: type[Patch], old: upstream.Verdict, new: upstream.Verdict, to: WheelSource,
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


def remade(row: PatchRow, made: Rebased, name: str, data: bytes, files: dict[str, bytes],
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
        tree = put_tree(name, rebase_tree.tree_files(made, data, release), files)
        # Finished after the diffs it depends on (`waits_on`), its resolution merged onto theirs.
        return replace(row, on_to=upstream.BROKEN, action=CONFLICTS, counts=counts, conflicts=conflicts_of(made),
                       tree=tree, waits_on=tuple(made.depends_on), notes=made.notes)
    files[name] = made.data
    return replace(row, on_to=upstream.BROKEN, action=REBASED, counts=counts, conflicts=(), waits_on=(), written=name,
                   notes=made.notes)


def put_tree(name: str, tree_files: dict[str, bytes], files: dict[str, bytes], tree: str | None = None) -> str:
    """A diff's tree ({path in it: bytes}) put in `files` under `tree`, by default NAME.tree/ for
    the diff file `name`; the tree's folder name."""
    tree = tree or f"{Path(name).stem}.tree"
    for rel, content in tree_files.items():
        files[f"{tree}/{rel}"] = content
    return tree


def conflicts_of(made: Rebased) -> tuple[Conflict, ...]:
    """The conflicts of a re-made diff; one in a file made on a lower diff's unfinished file says so."""
    on = {rel: lower for lower, rels in made.depends_on.items() for rel in rels}
    return tuple(Conflict(u.file, u.unit, u.detail + (
        f" (made on {on[u.file]}'s file, its blocks taken as its own side: `bump --continue` puts this resolution on top of "
        f"{on[u.file]}'s)" if u.file in on else "")) for u in made.conflicts)


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


def breaks_on_v(diff: DiffPatchFile, applied: dict[str, bytes | None], state: dict[str, bytes | None],
                 to: WheelSource) -> list[Conflict]:
    """What `diff`, applied on V's files as `state` leaves them (`applied`), breaks there: its Python
    files compiled and checked for names left undefined, imports of what V lacks and model classes
    registered twice (works_on.static), each `FILE:LINE`."""
    from patchkit.engine import works_on

    found = works_on.static([file.path for file in diff.files],
                            lambda rel: applied[rel] if rel in applied else to.read(rel),
                            lambda rel: state[rel] if rel in state else to.read(rel), to.version,
                            lambda: sorted({*to.package_files(), *applied} - {rel for rel, data in applied.items() if data is None}))
    return [Conflict(item.file, str(item.line), item.detail) for item in found]


def imported(python: str, to: WheelSource, state: dict[str, bytes | None], changed_by: dict[str, str],
              progress: Callable[[str], None]) -> Imported:
    """works_on.imports of the whole set (`state`: V's files it changes, as it leaves them)."""
    from patchkit.engine import works_on

    return works_on.imports(works_on.interpreter(python), to.version, to.package_files(), to.read,
                            {rel: state.get(rel) for rel in changed_by}, progress)


def tree_of(name: str, data: bytes, applied: dict[str, bytes | None], prior: dict[str, bytes | None], to: WheelSource,
             files: dict[str, bytes]) -> str:
    """NAME.tree/ in `files` for a diff written for V that breaks there (`data`): its files as
    `applied` holds them (V's, as the diffs before it leave them, with it applied), to fix and
    `--continue`; `prior`: the files the diffs before it changed, its base there."""
    from patchkit.diffs import rebase_tree, unidiff

    made = rebase_tree.applied_tree(unidiff.parse(data, name), data, to.version,
                                    lambda rel: applied[rel] if rel in applied else to.read(rel), prior)
    return put_tree(name, made, files)


def apply_on(diff: DiffPatchFile, state: dict[str, bytes | None],
             read: Callable[[str], bytes | None]) -> dict[str, bytes | None] | None:
    """`state` (changed) with `diff` applied on it, each file read from `read` where `state` does not
    have it (None there: a file a diff before it deleted); None when a hunk does not apply, when the
    diff creates a file that is there already or changes one that is not there (an empty file is
    there: as `git apply` and `status` judge it, never an absent file read as an empty one to add
    lines to, nor the reverse). A file the diff deletes is None in the state, absent, so that a diff
    after it may create it again."""
    from patchkit.diffs import hunk_apply

    for file in diff.files:
        now = state[file.path] if file.path in state else read(file.path)
        if (file.old_path is None) != (now is None):
            return None
        patched = hunk_apply.apply_hunks(b"" if now is None else now, file.hunks)
        if patched is None:
            return None
        state[file.path] = None if file.new_path is None else patched
    return state
