"""Diff patches: a `.patch` / `.diff` file (see `patchkit.diffs.unidiff`) as a Patch class of the
registry, judged and applied by the same engine as the built-in patches (transaction, drift,
stale state, identity: its digest is the diff file's sha256). How a diff is applied to a file is
the per-unit merge's (`patchkit.diffs.unit_merge`); this kind asks it per file and caches the
answer per (file, bytes).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from pathlib import Path
from typing import Any, ClassVar

from patchkit.authoring.kind import CREATED, DELETED, Files, Rendered
from patchkit.authoring.patch import Patch
from patchkit.base.errors import PlanError
from patchkit.diffs import units as units_mod
from patchkit.diffs.unidiff import DiffPatchFile, FileDiff, load, nothing_inside, read_file
from patchkit.diffs.hunk_apply import apply_hunks
from patchkit.diffs.resolution import PER_UNIT, UPSTREAM, FileResolution
from patchkit.diffs.unit_merge import resolve_file, with_units
from patchkit.diffs.unit_moves import (Elsewhere, base_for, created_destination, finder, moved_folder_note,
                                       place_moved_unit, relocated)


# {where a tree has a file of the diff whose folder moved: (its section, that section at the new path)}
Relocated = dict[str, tuple[FileDiff, FileDiff]]


@dataclasses.dataclass(frozen=True)
class Layout:
    """Where a diff's files and moved units are on one tree (`DiffPatch.layout`): the per-tree
    answer `targets_for` gives and every question about one file reads."""

    targets: tuple[str, ...]  # the files it writes there: its own, then the other files, sorted
    relocated: Relocated  # its files whose folder moved (`relocated`)
    # {another file: [(own file, unit, pre-image form, patched form)]}: the units that moved there.
    moves: dict[str, list[tuple[str, str, bytes, bytes]]]

    def own(self, path: str, files: dict[str, FileDiff]) -> bool:
        """Whether `path` is a file of the diff here (where its folder moved too)."""
        return path in files or path in self.relocated

    def file(self, path: str, files: dict[str, FileDiff]) -> FileDiff:
        """The section of a file (at the path this tree has it, where its folder moved)."""
        return self.relocated[path][1] if path in self.relocated else files[path]


def _change(file: FileDiff) -> str | None:
    return CREATED if file.old_path is None else DELETED if file.new_path is None else None


class DiffPatch(Patch):
    """A patch made from a diff file; one subclass per file (`patch_class`).

    The files it writes on a tree (`targets_for`) are its own, plus the files its moved units went
    to (found when the patch is judged on that tree), less an own file the release does not have
    whose every changed unit was found elsewhere. The engine plans, journals, backs up, records
    and reverts those like any target; the diff stays one change over all of them."""

    DIFF: ClassVar[DiffPatchFile]
    # {path: its section}: the engine asks per file, so a lookup is not a scan of every section
    # (a scan made `status` of a 16,000-section diff quadratic).
    FILES: ClassVar[dict[str, FileDiff]] = {}
    SOURCE: ClassVar[Path]
    NOTES: ClassVar[tuple[str, ...]] = ()
    # {id of a loaded diff it is stacked on: the files} (told from the index hashes, `stacks`).
    STACKED_ON: ClassVar[dict[str, list[str]]] = {}

    def __init__(self) -> None:
        super().__init__()
        self._resolved: dict[tuple[str, bytes | None], FileResolution] = {}
        self._elsewhere: Elsewhere | None = None
        self._read: Callable[[str], bytes | None] | None = None
        self._folders: set[str] | None = None
        self._package: Callable[[], list[str]] | None = None
        # Where its files and moved units are on the tree (`layout`): the last `targets_for`'s, else
        # laid out on the bound tree when a question about one file comes first (`_on_tree`).
        self._layout: Layout | None = None

    # --- kind.PatchKind: a diff patch's answers --------------------------------------------------

    @classmethod
    def works_on_bytes(cls) -> bool:
        return True  # probes and transform get the file's bytes (no libcst parse)

    def parsed_parts(self, path: str) -> tuple[str, ...] | None:
        return ()  # nothing of a file is parsed for it: it reads the bytes

    def code(self, path: str, data: bytes, files: Files) -> Any:
        files.check_decodable(path, data)
        return data  # probes and transform get the file's bytes (no libcst parse)

    def render(self, path: str, rendered: Rendered, below: tuple[str, ...], files: Files) -> Rendered:
        return files.transform_bytes(path, rendered, self, below)  # on the bytes the patches below it wrote

    @classmethod
    def all_targets_required(cls) -> bool:
        return True  # every file of the diff must be there: a diff is one change

    @classmethod
    def reads_package(cls) -> bool:
        return True  # a changed unit may have moved to another file of the package

    def upstream_remedy(self, version: str) -> str | None:
        return f"`patchkit rebase {self.SOURCE} --to {version}` re-makes the diff"

    def precondition(self, read: Callable[[str], bytes | None]) -> str | None:
        # A diff of files outside the package only: `not-applicable` on every release, saying so.
        return nothing_inside(self.DIFF)

    def before_change(self, path: str, data: bytes) -> bytes | None:
        layout = self._on_tree()
        return apply_hunks(data, layout.file(path, self.FILES).hunks, reverse=True) if layout.own(path, self.FILES) else None

    def bind_package(self, package_files: Callable[[], list[str]], read: Callable[[str], bytes | None]) -> None:
        """The installed package's other files, where a unit absent from its file is looked for
        and a file whose folder moved is found (bound once per instance: one View, one tree);
        `read` gives the release's bytes of a file."""
        if self._elsewhere is None:
            listed: list[str] = []

            def python_files() -> list[str]:
                if not listed:
                    listed.extend(rel for rel in package_files() if rel.endswith(".py"))
                return listed

            self._read, self._package = read, package_files
            self._elsewhere = finder(lambda: [rel for rel in python_files() if rel not in self.FILES], read)

    def _on_tree(self) -> Layout:
        """Its layout on the tree: the last `targets_for`'s, else laid out on the bound tree now,
        so that every question gets the same answer whichever comes first."""
        if self._layout is None:
            self._layout = self.layout(self._read or (lambda rel: None))
        return self._layout

    def file_change(self, path: str) -> str | None:
        """CREATED or DELETED for a file the diff creates or deletes (the engine writes or removes
        it whole), else None."""
        layout = self._on_tree()
        return _change(layout.file(path, self.FILES)) if layout.own(path, self.FILES) else None

    def creatable(self, path: str) -> str | None:
        """Why a file the diff creates cannot be created on this tree (its folder is not in the
        package: patchkit creates no folders), else None."""
        if self._package is None or "/" not in path:
            return None
        if self._folders is None:
            self._folders = {rel.rsplit("/", 1)[0] for rel in self._package()}
        folder = path.rsplit("/", 1)[0]
        return None if folder in self._folders else f"{path}: the diff creates it in {folder}/, which is not in this release"

    def resolution(self, path: str, data: bytes | None, relocated: Relocated | None = None) -> FileResolution:
        """The diff's section of `path` resolved on `data`; `relocated`: where this tree has the
        files whose folder moved (default: its layout on the tree, `_on_tree`)."""
        moved = self._on_tree().relocated if relocated is None else relocated
        key = (path, data)
        if key not in self._resolved:
            from patchkit.diffs import release_blobs

            file = moved[path][1] if path in moved else self.FILES[path]
            # A moved file's pre-image is the release file at the diff's own path.
            own = moved[path][0] if path in moved else file
            found = resolve_file(file, data, base_for(own, data, release_blobs.pre_image), count=False,
                                 elsewhere=self._elsewhere, follow=True)
            if path in moved:
                found = dataclasses.replace(found, notes=(*found.notes, moved_folder_note(path, own.path)))
            self._resolved[key] = found
        return self._resolved[key]

    def targets_for(self, read: Callable[[str], bytes | None]) -> tuple[str, ...]:
        """The files this diff writes on the tree `read` gives (see the class docstring), in a
        fixed order: its own files as the diff lists them, then the other files, sorted. Its
        layout there is what the questions about one file read after it (`_on_tree`)."""
        self._layout = self.layout(read)
        return self._layout.targets

    def layout(self, read: Callable[[str], bytes | None]) -> Layout:
        """Where its files and moved units are on the tree `read` gives (see `Layout`)."""
        from patchkit.diffs import release_blobs

        own: list[str] = []
        moves: dict[str, list[tuple[str, str, bytes, bytes]]] = {}
        moved: Relocated = {}
        placed: dict[str, str] = {}  # a file of the diff -> where this tree has it (its folder moved)
        for file in self.DIFF.files:
            if file.old_path and file.new_path and self._package is not None and read(file.path) is None:
                # A file whose folder moved (any kind: .cuh, .json, .py) is judged where it is now.
                moved_to = relocated(file, self._package, read, release_blobs.pre_image, set(self.FILES))
                if moved_to is not None:
                    moved[moved_to] = (file, dataclasses.replace(file, old_path=moved_to, new_path=moved_to))
                    placed[file.path] = moved_to
        for file in self.DIFF.files:  # then a created file goes where its folder went with them
            if file.old_path is None and (moved_to := self._created_in_moved_folder(file.path, moved)) is not None:
                moved[moved_to] = (file, dataclasses.replace(file, new_path=moved_to))
                placed[file.path] = moved_to
        for file in self.DIFF.files:
            rel = file.path
            if rel in placed:
                own.append(placed[rel])
                continue
            data = read(rel)
            if _change(file) is not None or not rel.endswith(".py"):
                own.append(rel)
                continue
            try:
                found = self.resolution(rel, data, moved)
            except PlanError:
                own.append(rel)  # judged (and named) when the engine reads the file
                continue
            if data is not None or not found.units or found.conflicts:
                own.append(rel)  # an absent file not followed whole stays: the patch is `failed` naming it
            for other, name, before, after in found.moved:
                moves.setdefault(other, []).append((rel, name, before, after))
        return Layout(tuple(dict.fromkeys([*own, *sorted(moves)])), moved, moves)

    def _created_in_moved_folder(self, rel: str, moved: Relocated) -> str | None:
        """Where a file the diff creates goes on this tree (`created_destination`), None where
        its folder is there or nothing says where it went (`creatable` then names the folder)."""
        if self.creatable(rel) is None:
            return None
        moves = {file.path: moved_to for moved_to, (file, _) in moved.items() if file.old_path}
        return created_destination(rel, moves, lambda path: self.creatable(path) is None)

    def _placed(self, path: str, tree: bytes) -> tuple[bytes, bool]:
        """Another file's bytes with the diff's units that moved there patched (`place_moved_unit`), and
        whether all of them already had their patched form."""
        try:
            current = units_mod.texts(tree)
        except (SyntaxError, ValueError) as exc:
            raise PlanError(f"{path}: the installed file cannot be parsed: {getattr(exc, 'msg', exc)}") from None
        replace: dict[str, bytes] = {}
        upstream = True
        for rel, name, before, after in self._on_tree().moves.get(path, []):
            placed = place_moved_unit(before, current.get(name), after)
            if placed is None:
                raise PlanError(f"{path}:{name} (moved from {rel}:{name}) changed here and by the diff in the same lines")
            if placed[1] != UPSTREAM:
                replace[name], upstream = placed[0], False
        return with_units(tree, replace) if replace else tree, upstream

    def _moved_notes(self, path: str) -> list[str]:
        return [f"moved: {rel}:{name} -> {path}:{name}" for rel, name, _, _ in self._on_tree().moves.get(path, [])]

    def is_applied(self, path: str, tree: Any) -> bool:  # `tree`: the file's bytes (its `code`)
        # A file already in the diff's patched form reads as upstream's (is_fixed_upstream):
        # only the state file says patchkit wrote it.
        return False

    def is_fixed_upstream(self, path: str, tree: Any) -> bool:
        if not self._on_tree().own(path, self.FILES):
            return self._placed(path, tree)[1]
        found = self.resolution(path, tree)
        # A file whose changed units all went elsewhere (or are upstream) has nothing to write.
        return found.upstream or (found.how == PER_UNIT and bool(found.moved) and not found.conflicts
                                  and found.after == found.before)

    @classmethod
    def made_for(cls) -> list[Any]:
        """The cached releases whose files have the diff's pre-image hashes (release_blobs.Match)."""
        from patchkit.diffs import release_blobs

        return release_blobs.made_for(cls.DIFF)

    @classmethod
    def verdict_inputs(cls) -> list[str]:
        """What a verdict depends on beyond the target files: which cached release holds each
        file's pre-image (a per-unit verdict needs it; caching the wheel changes the verdict)."""
        return [f"made-for={','.join(str(m) for m in cls.made_for())}"]

    def notes(self, path: str, tree: Any) -> list[str]:
        """What a status detail says about this file: units already upstream, moved units."""
        if not self._on_tree().own(path, self.FILES):
            return self._moved_notes(path)
        found = self.resolution(path, tree)
        said = list(found.notes)
        upstream = [u.unit for u in found.units if u.outcome == UPSTREAM]
        if upstream and not found.upstream:
            said.append(f"{path}: {len(upstream)} of {len(found.units)} unit(s) already in their patched form "
                        f"({', '.join(upstream)})")
        return said

    def transform(self, path: str, tree: Any) -> Any:
        """The file's new bytes (the engine compiles them before anything is written); for a file
        the diff creates `tree` is None (absent), for one it deletes the result is None."""
        if not self._on_tree().own(path, self.FILES):
            for note in (*self.NOTES, *self._moved_notes(path)):
                self.warn(note)
            return self._placed(path, tree)[0]
        found = self.resolution(path, tree)
        if found.conflicts:
            raise PlanError("; ".join(f"{u.file}:{u.unit} {u.detail}" for u in found.conflicts))
        if found.how == CREATED and (why := self.creatable(path)):
            raise PlanError(why)
        for note in (*self.NOTES, *found.notes):
            self.warn(note)
        if found.how in (CREATED, DELETED):
            return found.after
        return tree if found.after is None else found.after


def described(cls: type[DiffPatch]) -> dict[str, Any]:
    """What `list` shows of a diff patch: the cached releases it was made for (its index hashes),
    its notes, and {id: files} of each loaded diff it is stacked on."""
    return {"made_for": [match.to_dict() for match in cls.made_for()], "notes": list(cls.NOTES),
            "stacked_on": {pid: files for pid, files in cls.STACKED_ON.items()}, "outside": list(cls.DIFF.outside),
            "nothing_inside": nothing_inside(cls.DIFF)}


def patch_classes(files: list[tuple[Path, str, DiffPatchFile]]) -> list[type[DiffPatch]]:
    """The classes of the diff files one load holds ((file, origin, its parse) each), each made
    knowing the loaded diffs it is stacked on (its pre-image blobs are the other's post-image
    blobs, `stacks`): it comes after them on their shared files, as `Patchkit-After:` would say.
    Told from the diffs before any class is made; no class is changed after."""
    from patchkit.diffs import stacks

    found = stacks.stack({diff.id: diff for _, _, diff in files}).under
    return [patch_class(path, origin, diff, stacked_on=found.get(diff.id, {})) for path, origin, diff in files]


def patch_class(path: Path, origin: str, diff: DiffPatchFile | None = None,
                stacked_on: dict[str, list[str]] | None = None) -> type[DiffPatch]:
    """The Patch class of one diff file (`diff`: already parsed from it, by the registry;
    `stacked_on`: {id: files} of the loaded diffs it is stacked on, told by `patch_classes`)."""
    if diff is None:
        try:
            data = read_file(path)
        except OSError as exc:
            raise PlanError(f"cannot read {path}: {exc.strerror}") from None
        diff = load(data, str(path))
    files = {f.path: f for f in diff.files}  # one section per file (unidiff.parse refuses two)
    attrs: dict[str, Any] = {
        "ID": diff.id, "TITLE": diff.title, "RATIONALE": diff.rationale, "UPSTREAM": diff.upstream,
        "APPLIES_TO": diff.applies_to, "TARGETS": tuple(files), "STACK_AFTER": diff.after,
        "DIFF": diff, "FILES": files, "SOURCE": path, "NOTES": diff.notes, "__module__": __name__,
    }
    if stacked_on is not None:
        attrs["STACKED_ON"] = stacked_on
        attrs["STACK_AFTER"] = tuple(dict.fromkeys([*diff.after, *stacked_on]))
    name = "Diff_" + diff.id.replace("-", "_")
    return type(name, (DiffPatch,), attrs)

