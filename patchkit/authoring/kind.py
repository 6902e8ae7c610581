"""What the engine asks of every kind of patch (issues 34, 44): a module patch (`Patch`, which holds
the no-op defaults) and a diff patch (`DiffPatch`) both implement `PatchKind`, and the engine calls
it, never asking a patch what kind it is. A third kind kept in files of its own is one module that
implements these plus its entry in `engine/registry.FILE_KINDS` (how its files are read and made
into a class), and nothing in the engine changes (tests/unit/engine/test_third_kind.py adds one);
mypy checks both kinds against it (`engine/registry.py`, `KINDS`).

Facts of the class (asked of a loaded class too, by `list` and `track`) are classmethods; what
depends on the tree being patched is asked of the instance a View holds. The probes and the
transform get a file's `Code`, which the kind itself reads (`code`) and renders (`render`) through
the engine's view of the tree (`Files`): the view never asks which medium a patch works on."""

from __future__ import annotations

from typing import Any, Callable, Protocol

Read = Callable[[str], "bytes | None"]  # a file's bytes on a tree, None when absent
# A file as a patch's probes and transform get it: the libcst tree of the part it parses (a module
# patch), or the file's bytes (a patch that works on bytes; None for a file it creates).
Code = Any
CREATED, DELETED = "created", "deleted"  # what `file_change` says of a file written or removed whole
# What a stack of patches has made of a file so far, as `render` hands it on: bytes, or a fold of
# parsed transforms the view turns into bytes when a patch (or the end of the stack) needs them.
Rendered = Any


class Files(Protocol):
    """What a kind reads and renders a file through: the engine's view of one tree (engine/view.View)."""

    def parse_scoped(self, rel: str, data: bytes) -> Any:
        """The libcst tree of the part of `data` the patches targeting `rel` read (their parsed parts)."""
        ...

    def check_decodable(self, rel: str, data: bytes) -> None:
        """Refuse a file that is not UTF-8 (exit 6, naming it)."""
        ...

    def fold_parsed(self, rel: str, rendered: Rendered, patch: Any) -> Rendered:
        """`rendered` with `patch`'s transform folded onto its parsed part (with the folds before it)."""
        ...

    def transform_bytes(self, rel: str, rendered: Rendered, patch: Any, below: tuple[str, ...]) -> Rendered:
        """`patch`'s transform of the bytes `rendered` stands for (None for a file it deletes);
        `below`: the patches applied first."""
        ...


class PatchKind(Protocol):
    # --- the class ---
    def all_targets_required(self) -> bool:
        """Whether the patch is one change over all its targets: one missing while others are
        there makes it `failed`, not a patch of the files that are left."""
        ...

    def reads_package(self) -> bool:
        """Whether its verdict on a release may depend on files beyond its TARGETS and REQUIRES
        (a diff: a changed unit moved to another file): a cached verdict is keyed on the listing."""
        ...

    def verdict_inputs(self) -> list[str]:
        """What a cached verdict depends on beyond the files it reads."""
        ...

    def made_for(self) -> list[Any] | None:
        """The releases the patch was made for where it can tell (a diff's blob hashes), else None."""
        ...

    # --- the patch on one tree ---
    def bind_package(self, package_files: Callable[[], list[str]], read: Read) -> None:
        """The package's other files (every file of it, as the release has them), bound once per tree."""
        ...

    def targets_for(self, read: Read) -> tuple[str, ...]:
        """The files it writes on the tree `read` gives."""
        ...

    def file_change(self, path: str) -> str | None:
        """CREATED or DELETED for a file it writes or removes whole, None for a file it edits."""
        ...

    def creatable(self, path: str) -> str | None:
        """Why a file it creates cannot be created on this tree, else None."""
        ...

    def before_change(self, path: str, data: bytes) -> bytes | None:
        """`data` as it was before this patch's change, where the change can be undone exactly
        (a diff's hunks in reverse), else None: how a diff applied by hand is recognised."""
        ...

    def upstream_remedy(self, version: str) -> str | None:
        """The command that re-makes the patch for SGLang `version` after an upstream change,
        where there is one (a diff: `rebase`), else None (`track` shows what changed)."""
        ...

    # --- the patch on one file -------------------------------------------------------------------
    def parsed_parts(self, path: str) -> tuple[str, ...] | None:
        """The parts of the file its probes and transform read parsed (`PARTS` entries: `Class`,
        `Class.member`, `name`), None for the whole module, () for none (it reads the bytes)."""
        ...

    def code(self, path: str, data: bytes, files: Files) -> Code:
        """The file as its probes and transform get it (through `files`: a parsed part, or the bytes)."""
        ...

    def render(self, path: str, rendered: Rendered, below: tuple[str, ...], files: Files) -> Rendered:
        """What the file is with this patch's change added to `rendered` (what the patches `below`
        it made of the release's bytes), through `files`: a transform folded onto the parsed part
        (`Files.fold_parsed`), or the new bytes (`Files.transform_bytes`)."""
        ...

    def is_applied(self, path: str, tree: Code) -> bool:
        """Whether the file already has this patch's change (by shape, not by marker)."""
        ...

    def is_fixed_upstream(self, path: str, tree: Code) -> bool:
        """Whether the file holds upstream's own fix."""
        ...

    def notes(self, path: str, tree: Code) -> list[str]:
        """What a status detail says of this file beyond its verdict."""
        ...

    def transform(self, path: str, tree: Code) -> Code:
        """The file patched: raises SkipPatch when it has nothing to fix, AnchorError / PlanError when
        the patch cannot be made there; warnings go to `warn`."""
        ...

    def warn(self, message: str) -> None:
        """A warning for the user, said by `apply` and in `--json`."""
        ...

    def precondition(self, read: Read) -> str | None:
        """Why the patch is not applicable on the tree `read` gives, decided from files it reads
        but never writes (its CONSULTS: a rule the release keeps elsewhere), else None. An
        AnchorError when that rule cannot be found makes it `failed`."""
        ...
