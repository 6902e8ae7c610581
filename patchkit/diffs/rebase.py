"""`rebase`: a diff patch re-made against another release, per unit of code (unit_merge.resolve),
so that `git apply` on that release works again: the same header (trailers kept), the same path
prefix, index lines with the new release's blob hashes. A unit that conflicts is written with
standard conflict markers (<<<<<<< release / ======= / >>>>>>> patch) and listed.

The diff's base (its pre-image) is the cached release whose files have the index lines' blob
hashes; `--from V` names it where the hashes do not (a diff without index lines, or made
against a tree that was not a release).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Callable

from patchkit.diffs import blocks, code_place, format_patch, git_merge, hunk_apply, release_blobs, stacks, unidiff, unit_merge
from patchkit.base.errors import PlanError
from patchkit.diffs.unidiff import DiffPatchFile, FileDiff
from patchkit.diffs import units
from patchkit.diffs.units import split_lines


class AlreadyUpstream(PlanError):
    """Every file of the diff already has its change on the target release: nothing to rebase,
    the patch reads as upstream-fixed there (a drop, not a failure)."""


@dataclass(frozen=True)
class Rebased:
    diff: DiffPatchFile
    to: str
    base: tuple[str, ...]  # the release(s) the input was made for (--from, else by its blob hashes)
    data: bytes  # the rebased diff file
    resolution: unit_merge.Resolution
    notes: tuple[str, ...] = ()
    already: tuple[str, ...] = field(default_factory=tuple)  # files that already have the change on `to`
    changes: tuple[format_patch.FileChange, ...] = ()  # each section's file on `to` and its new bytes
    # {id of a diff of the set it was rebased on: the files it shares with it} (rebase_stack)
    stacked_on: dict[str, list[str]] = field(default_factory=dict)
    # {id of a diff under it: the files it was rebased on there that diff has not finished on `to`
    # (blocks of its own, or a diff under it that has): its re-made change there waits on theirs.
    depends_on: dict[str, list[str]] = field(default_factory=dict)

    @property
    def conflicts(self) -> tuple[unit_merge.UnitOutcome, ...]:
        return self.resolution.conflicts


def _header(data: bytes) -> tuple[bytes, bool]:
    """The free text before the first file of the diff, kept as it is but for format-patch's
    "---" line and diffstat (made anew); and whether the header had that separator."""
    lines = split_lines(data)
    end = next((i for i in range(len(lines)) if unidiff._is_file_start(lines, i)), len(lines))
    head = lines[:end]
    cut = next((i for i, line in enumerate(head) if line.rstrip(b"\r\n") == b"---"), None)
    if cut is not None:
        head = head[:cut]
    text = b"".join(head)
    if text and not text.endswith(b"\n"):
        text += b"\n"
    return text, cut is not None


def name_after(data: bytes, lowers: list[str], named: tuple[str, ...] = ()) -> bytes:
    """`data` with a `Patchkit-After: ID` trailer for each of `lowers` it does not name yet (`named`),
    put at the end of its free text (before format-patch's "---" line): a diff re-made on the diffs
    under it names them, so `patchkit apply` orders the set without the report."""
    lines = split_lines(data)
    end = next((i for i in range(len(lines)) if unidiff._is_file_start(lines, i)), len(lines))
    cut = next((i for i, line in enumerate(lines[:end]) if line.rstrip(b"\r\n") == b"---"), end)
    new = [f"Patchkit-After: {pid}\n".encode() for pid in lowers if pid not in named]
    if not new:
        return data
    if cut and not lines[cut - 1].endswith(b"\n"):
        lines[cut - 1] += b"\n"
    return b"".join([*lines[:cut], *new, *lines[cut:]])


def _sides(prefix: str) -> tuple[str, bool]:
    """The input's prefix ("a/python/", "a/", "python/", "") as (path prefix, git's a/ b/ or not)."""
    return (prefix[2:], True) if prefix.startswith("a/") else (prefix, False)


def rebase(diff: DiffPatchFile, data: bytes, to: str, read: Callable[[str], bytes | None],
           base: Callable[[FileDiff], bytes | None] | None = None, base_label: str | None = None,
           python_files: Callable[[], list[str]] | None = None,
           package_files: Callable[[], list[str]] | None = None,
           defined: dict[bytes, set[str]] | None = None) -> Rebased:
    """`diff` (parsed from `data`) re-made against release `to`, whose files `read` gives. `base`
    gives a file's pre-image (default: the cached release with its blob hash); `python_files`
    lists the release's Python files, where a unit that moved to another file is followed."""
    name = diff.name
    found_base = (base_label,) if base_label else tuple(str(m) for m in release_blobs.made_for(diff))
    resolution = unit_merge.resolve(diff, read, markers=True, pre_image=base, python_files=python_files,
                                   package_files=package_files, defined=defined, merge_file=git_merge.merge_file)
    notes = list(diff.notes)
    changes: list[format_patch.FileChange] = []
    already: list[str] = []
    own = {file.path: file for file in diff.files}
    package = code_place.Package(python_files, read) if python_files is not None else None  # read on a first search
    for file in resolution.files:
        notes.extend(file.notes)
        if file.upstream:  # proved: the hunks apply in reverse, or every unit is in its patched form
            already.append(file.rel)
            continue
        if file.how == unit_merge.ABSENT:
            if file.conflicts or not file.units:
                # Not in this release, and not every change found a place elsewhere: the section
                # creates it holding a block per change, so that nothing is dropped.
                after = file.after or hunk_apply.absent_blocks(own[file.rel], f"{file.rel} is not in SGLang {to}",
                                                               package if file.rel.endswith(".py") else None)
                changes.append(format_patch.FileChange(file.rel, None, after))
            continue  # else what it changed is in other files of the release now (its notes say which)
        if file.after == file.before:
            if file.conflicts:  # a conflict always gets its block: never left out as if there
                raise PlanError(f"{file.rel}: a conflict with nothing written for it (a bug in patchkit's rebase)")
            continue  # its units are upstream or went to other files (written there)
        changes.append(format_patch.FileChange(file.rel, file.before, file.after))
    absent = [f.rel for f in resolution.files if f.how == unit_merge.ABSENT and not f.units]
    if absent:
        # A file of the diff this release does not have (and none of its units found elsewhere):
        # a conflict of the whole file.
        resolution = unit_merge.Resolution(tuple(
            f if f.how != unit_merge.ABSENT or f.units else unit_merge.FileResolution(
                f.rel, f.how, None, None, (unit_merge.UnitOutcome(f.rel, "<file>", unit_merge.CONFLICT, f"not in SGLang {to}" + (
                    f"; {hunk_apply.gone(f.rel, own[f.rel].hunks[0].lines, package)}" if package is not None
                    and f.rel.endswith(".py") and own[f.rel].hunks else "")),))
            for f in resolution.files), resolution.notes)
    if not changes and not resolution.conflicts:
        raise AlreadyUpstream(f"{name}: SGLang {to} already has the change (every file: {', '.join(already)}); nothing "
                        "to rebase, the patch reads as upstream-fixed there")
    if already:
        notes.append(f"{len(already)} file(s) already have the change on SGLang {to} and are left out: "
                     f"{', '.join(already)}")
    out = write_diff(data, diff.prefix, changes)
    return Rebased(diff=diff, to=to, base=found_base, data=out, resolution=resolution, notes=tuple(notes),
                   already=tuple(already), changes=tuple(changes))


def write_diff(data: bytes, prefix: str, changes: list[format_patch.FileChange]) -> bytes:
    """The diff file for `changes`: the header of the input `data` kept (a format-patch file
    stays one: separator, a new diffstat, signature), its path prefix, V's blob hashes."""
    from patchkit import __version__

    path_prefix, sides = _sides(prefix)
    header, mailed = _header(data)
    body = format_patch.git_diff(changes, path_prefix, sides)
    if mailed:
        out = header + b"---\n" + format_patch.diffstat(changes, path_prefix).encode() + b"\n" + body
        return out + f"-- \npatchkit {__version__}\n\n".encode()
    return header + (b"\n" if header and not header.endswith(b"\n\n") else b"") + body


def rebase_stack(items: list[tuple[DiffPatchFile, bytes]], to: str, read: Callable[[str], bytes | None],
                 python_files: Callable[[], list[str]] | None = None,
                 package_files: Callable[[], list[str]] | None = None,
                 stack: stacks.Stack | None = None) -> list[tuple[str, Rebased | str]]:
    """Diffs re-made against `to` in stack order (`stacks.stack`, or `stack` where the caller has
    it): one stacked on another is rebased onto the other's rebased files (its pre-image: the
    other's post-image), so the rebased diffs stack again (the upper's index lines are the lower's
    new post-image blobs). Where the lower one conflicts in a file, the upper is rebased on the
    lower's file there with each block taken as the lower's side (`blocks.without_blocks`; the
    release's, where that does not parse), so that its own conflicts are found now, and a
    resolution of them differs from that base by its own change only; it depends on the lower
    there (`Rebased.depends_on`, `stacks.Unfinished`) and says so."""
    diffs = {diff.id: diff for diff, _ in items}
    raw = {diff.id: data for diff, data in items}
    stack = stack or stacks.stack(diffs)
    under = stack.under
    unfinished = stacks.Unfinished(under)
    done: dict[str, Rebased] = {}
    # The index of the release's names where a moved unit is looked for: made once, from `to`'s files
    # (a lower diff's rebased file is read as it is written when a candidate is opened).
    defined: dict[bytes, set[str]] = {}
    upstream: dict[str, str] = {}
    for pid in stack.order:
        # The rebased lower diffs' files (a conflicting one's blocks taken as its side; None: one it deletes).
        written: dict[str, bytes | None] = {}
        for lower in under.get(pid, {}):
            if lower not in done:
                continue
            conflicted = {u.file for u in done[lower].conflicts}
            for change in done[lower].changes:
                after = change.after
                if after is not None and change.rel in conflicted:  # each block taken as the lower's side
                    whole = after
                    after = blocks.without_blocks(whole, "patch")
                    if not units.parses(change.rel, after):  # its side does not parse there: V's
                        after = blocks.without_blocks(whole, "release")
                    if change.before is None and not after.strip():  # a file V lacks, only blocks
                        continue
                written[change.rel] = after  # (deleted: absent to the diff on top, which may create it again)
        waits = unfinished.depends_on(pid)
        notes = [f"{rel}: {lower} is not finished there on SGLang {to} (its blocks, or a diff under it); {pid} is "
                 f"rebased on {lower}'s file with each of {lower}'s blocks taken as its own side, and depends on its "
                 "resolution there" for lower, files in waits.items() for rel in files]
        base_of = stacked_base([diffs[lower] for lower in under.get(pid, {}) if lower in done])

        def read_on(rel: str, written: dict[str, bytes | None] = written) -> bytes | None:
            return written[rel] if rel in written else read(rel)

        label = ", ".join(f"{lower}'s post-image" for lower in under.get(pid, {})) or None
        try:
            made = rebase(diffs[pid], raw[pid], to, read_on, base_of, label, python_files, package_files, defined)
        except AlreadyUpstream as exc:
            unfinished.add(pid, ())
            upstream[pid] = str(exc)
            continue
        unfinished.add(pid, {u.file for u in made.conflicts})
        done[pid] = replace(made, notes=(*made.notes, *notes), stacked_on=under.get(pid, {}), depends_on=waits)
    return [(pid, done.get(pid) or upstream[pid]) for pid in stack.order]


def stacked_base(lowers: list[DiffPatchFile]) -> Callable[[FileDiff], bytes | None]:
    """The pre-image of a file of a diff made on top of `lowers`: their own post-image of it (their
    pre-image from the cached release, their hunks applied), else a cached release's file by its hash."""
    post: dict[str, bytes] = {}
    for lower in lowers:
        for file in lower.files:
            pre = release_blobs.pre_image(file)
            patched = None if pre is None else hunk_apply.apply_hunks(pre, file.hunks)
            if patched is not None:
                post[file.path] = patched

    def base_of(file: FileDiff) -> bytes | None:
        return post.get(file.path) or release_blobs.pre_image(file)

    return base_of
