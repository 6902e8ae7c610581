"""`patchkit rebase PATCH --to V [--from V] [-o FILE]`: a diff re-made against release V."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from patchkit.commands import output
from patchkit.releases import pristine as releases, versions
from patchkit.commands.destination import output_file
from patchkit.commands.patch_file import read_patch_file
from patchkit.base.constants import EXIT_OK, EXIT_PLAN
from patchkit.base.errors import PlanError, UsageError
from patchkit.base.util import replace_or_keep


def rebase(patches: tuple[str, ...], to: str | None, first: str | None, out: str | None, as_json: bool,
           tree: str | None = None, resume: str | None = None) -> int:
    from patchkit.diffs import rebase as rebasing, release_blobs, unidiff

    if resume is not None:
        if patches or to or first or tree:
            raise UsageError("--continue DIR takes no PATCH, --to, --from or --tree: the tree's record names them")
        return _finish(Path(resume), out, as_json)
    if not patches or not to:
        raise UsageError("rebase needs PATCH and --to V (or --continue DIR)")
    if len(patches) > 1:
        if first or (tree is not None) == (out is not None):
            raise UsageError("several PATCHes (a stack) take -o DIR, a folder each rebased diff is written into "
                             "under its own name, or --tree DIR, a folder of one tree per diff; --from takes one PATCH")
        return _stack(list(patches), versions.normalise(to, "--to"), Path(tree or out or ""), as_json,
                      trees=tree is not None)
    patch = patches[0]
    to = versions.normalise(to, "--to")
    first = versions.normalise(first, "--from") if first else None
    path = output_file("-o", out) if out else None
    data = read_patch_file(patch)
    diff = _with_something_inside(unidiff.load(data, Path(patch).name), to)
    target = releases.WheelSource(to, output.progress)
    base = None
    if not first:
        release_blobs.find_base(diff, to, output.progress)  # fetched as needed, before the pre-images are read
    if first:
        source = releases.WheelSource(first, output.progress)
        base = lambda file: source.read(file.old_path or file.path)  # noqa: E731
    made = rebasing.rebase(diff, data, to, target.read, base, first, target.python_files, target.package_files)
    if tree is not None:
        return _tree(made, data, Path(tree), as_json, Path(patch))
    if path is not None:
        replace_or_keep(path, made.data, 0o644)
    conflicts = made.conflicts
    hint = ([] if made.base or not conflicts else
            ["the diff's base is not known (its index lines name no cached release): --from V names the release it "
             "was made for"])
    if as_json:
        output.as_json({
            "id": made.diff.id, "to": to, "from": list(made.base), "path": None if path is None else str(path),
            "files": [{"file": f.rel, "how": f.how, "units": [u.to_dict() for u in f.units]} for f in made.resolution.files],
            "counts": made.resolution.counts(), "conflicts": [u.to_dict() for u in conflicts],
            "notes": [*made.notes, *hint],
            "diff": None if path is not None else made.data.decode("utf-8", "replace"),
        })
        return EXIT_PLAN if conflicts else EXIT_OK
    for note in (*made.notes, *hint):
        output.note(note)
    if path is None:
        output.data(made.data)
    else:
        counts = ", ".join(f"{n} {what}" for what, n in made.resolution.counts().items() if n)
        output.line(f"wrote {path}: patch {made.diff.id} re-made against SGLang {to} "
                    f"(from {', '.join(made.base) or 'an unknown base'}; units: {counts or 'none'})")
    for unit in conflicts:
        output.warn(f"conflict: {unit.file}:{unit.unit}: {unit.detail} (written with conflict markers)")
    if conflicts:
        output.error(f"{len(conflicts)} unit(s) conflict on SGLang {to}; resolve the <<<<<<< / >>>>>>> blocks in "
                     f"{path or 'the diff'} before applying it")
        return EXIT_PLAN
    return EXIT_OK


def _with_something_inside(diff, to: str):
    """A diff whose every file is outside the sglang package is a usage error: rebase re-makes
    changes to the package's files, and read as one it said "SGLang V already has the change
    (every file: )", exit 1 (`bump` writes such a diff to DIR unchanged)."""
    from patchkit.diffs import unidiff

    if unidiff.nothing_inside(diff):
        raise UsageError(f"{diff.name}: a diff with nothing inside the sglang package: nothing to rebase onto SGLang "
                         f"{to} (leave it out of rebase's PATCHes; `bump` writes it unchanged); its files belong to an SGLang checkout, check them against {to} by hand: "
                         f"{', '.join(diff.outside)}")
    return diff


def _tree(made, data: bytes, folder: Path, as_json: bool, source: Path) -> int:
    """`--tree DIR`: V's files with the conflict blocks, to resolve there (docs/diffs.md); the next
    step names the diff to write for V beside the input (`source`), never the input itself."""
    from patchkit.diffs import rebase_tree

    written = rebase_tree.write_tree(made, data, folder)
    conflicts = made.conflicts
    if as_json:
        output.as_json({"id": made.diff.id, "to": made.to, "tree": str(folder), "files": written,
                        "conflicts": [u.to_dict() for u in conflicts], "notes": list(made.notes)})
        return EXIT_PLAN if conflicts else EXIT_OK
    for note in made.notes:
        output.note(note)
    for unit in conflicts:
        output.warn(f"conflict: {unit.file}:{unit.unit}: {unit.detail} (a block in {folder / unit.file})")
    output.line(f"wrote {len(written)} file(s) of SGLang {made.to} into {folder}")
    output.line(f"next: resolve the <<<<<<< / >>>>>>> blocks there ({len(conflicts)}), then "
                f"`{rebase_tree.continue_command(folder, str(source.with_name(rebase_tree.name_for(source.name, made.to))))}`")
    return EXIT_PLAN if conflicts else EXIT_OK


def _finish(folder: Path, out: str | None, as_json: bool) -> int:
    """`--continue DIR`: the finished diff from the resolved tree."""
    from patchkit.diffs import rebase_tree

    path = output_file("-o", out) if out else None
    record = rebase_tree.read_record(folder)
    target = releases.WheelSource(versions.normalise(str(record["to"]), "the record's release"), output.progress)
    again = rebase_tree.continue_command(folder, out)
    done = rebase_tree.finish(folder, target.read, again)
    _works_on_v(done, folder, target.read, target.package_files, again)
    if path is not None:
        replace_or_keep(path, done.data, 0o644)
    for note in done.notes:
        output.warn(note)
    if as_json:
        output.as_json({"id": done.id, "to": done.to, "path": None if path is None else str(path),
                        "files": list(done.files), "dropped": list(done.dropped),
                        "not_created": list(done.not_created), "taken": list(done.taken),
                        "diff": None if path is not None else done.data.decode("utf-8", "replace")})
        return EXIT_OK
    if path is None:
        output.data(done.data)
    else:
        kept = [rel for rel in done.dropped if rel not in done.not_created]
        output.line(f"wrote {path}: patch {done.id} for SGLang {done.to}, {len(done.files)} file(s)"
                    + (f"; left with {done.to}'s bytes: {', '.join(kept)}" if kept else "")
                    + (f"; not created: {', '.join(done.not_created)}" if done.not_created else ""))
    return EXIT_OK


def _works_on_v(done, folder: Path, read, listing, again: str) -> None:
    """The resolved files checked on V as `bump --continue` checks a resolution (works_on.static:
    compiled, no name left undefined that the tree's base defines, no import of what V lacks, no
    model class V registers already; `listing`: V's package files): each finding `FILE:LINE`, exit 1
    (PlanError), nothing written."""
    from patchkit.engine import works_on

    changed = {c.rel: c for c in done.changes}
    found = works_on.static(list(changed), lambda rel: changed[rel].after if rel in changed else read(rel),
                            lambda rel: changed[rel].before if rel in changed else read(rel), done.to,
                            lambda: sorted({*listing(), *(rel for rel, c in changed.items() if c.after is not None)}))
    if found:
        raise PlanError(f"{folder}: the resolution does not work on SGLang {done.to}: "
                        + "; ".join(f"{item.file}:{item.line}: {item.detail}" for item in found)
                        + f"; fix it in {folder}, then run `{again}` again (nothing written)")


def _stack(patches: list[str], to: str, folder: Path, as_json: bool, trees: bool = False) -> int:
    """Several diffs (a stack): each re-made against V, one stacked on another onto the other's
    rebased files (`rebase.rebase_stack`), written into DIR under its own file name; with `trees`
    (`--tree DIR`) each as `NAME.tree/` to resolve there (`rebase_tree.write_stack`)."""
    from patchkit.diffs import rebase as rebasing, release_blobs, rebase_tree, unidiff

    if trees:
        rebase_tree.check_empty(folder)
    elif not folder.is_dir():
        raise UsageError(f"-o {folder}: not a folder (several PATCHes are written into a folder)")
    items = []
    for patch in patches:
        data = read_patch_file(patch)
        items.append((_with_something_inside(unidiff.load(data, Path(patch).name), to), data))
    target = releases.WheelSource(to, output.progress)
    from patchkit.diffs import stacks

    for diff, _ in items:  # the base of each diff not made on top of another one of them
        if not any(stacks.shared_files(diff, other) for other, _ in items if other is not diff):
            release_blobs.find_base(diff, to, output.progress)
    rows: list[dict[str, Any]] = []
    conflicts = 0
    stacked = rebasing.rebase_stack(items, to, target.read, target.python_files, target.package_files)
    if trees:
        return _stack_trees(stacked, {diff.id: data for diff, data in items}, folder, as_json)
    for pid, made in stacked:
        if isinstance(made, str):
            rows.append({"id": pid, "path": None, "conflicts": [], "notes": [made]})
            continue
        path = folder / made.diff.name
        replace_or_keep(path, made.data, 0o644)
        conflicts += len(made.conflicts)
        rows.append({"id": pid, "path": str(path), "from": list(made.base), "counts": made.resolution.counts(),
                     "conflicts": [u.to_dict() for u in made.conflicts], "notes": list(made.notes)})
    if as_json:
        output.as_json({"to": to, "patches": rows})
        return EXIT_PLAN if conflicts else EXIT_OK
    for row in rows:
        for note in row["notes"]:
            output.note(note)
        for unit in row["conflicts"]:
            output.warn(f"conflict: {row['id']}: {unit['file']}:{unit['unit']}: {unit['detail']}")
        if row["path"]:
            output.line(f"wrote {row['path']}: patch {row['id']} re-made against SGLang {to} "
                        f"(from {', '.join(row['from']) or 'an unknown base'})")
    if conflicts:
        output.error(f"{conflicts} unit(s) conflict on SGLang {to}; resolve the blocks before applying")
        return EXIT_PLAN
    return EXIT_OK


def _stack_trees(stacked: list, inputs: dict[str, bytes], folder: Path, as_json: bool) -> int:
    """`rebase LOWER UPPER --to V --tree DIR`: one tree per rebased diff, `DIR/NAME.tree/`, to
    resolve and finish in stack order (`rebase --continue DIR/NAME.tree -o NAME`); a diff whose
    lower one conflicts in a file they share gets no tree yet (it would be made on V's file there)."""
    from patchkit.diffs import rebase_tree

    made = rebase_tree.write_stack(stacked, inputs, folder)
    conflicts = sum(len(tree.conflicts) for tree in made)
    if as_json:
        output.as_json({"to": made[0].to if made else None, "tree": str(folder),
                        "patches": [tree.to_dict() for tree in made]})
        return EXIT_PLAN if conflicts or any(tree.waits_on for tree in made) else EXIT_OK
    for tree in made:
        for note in tree.notes:
            output.note(note)
        for unit in tree.conflicts:
            output.warn(f"conflict: {tree.id}: {unit.file}:{unit.unit}: {unit.detail} (a block in "
                        f"{folder / tree.tree / unit.file})")
        if tree.tree:
            output.line(f"wrote {tree.tree}: {len(tree.files)} file(s) of {tree.id}, {len(tree.conflicts)} block(s)")
    output.line("next, in this order: " + "; ".join(tree.next_step(folder) for tree in made))
    return EXIT_PLAN if conflicts or any(tree.waits_on for tree in made) else EXIT_OK
