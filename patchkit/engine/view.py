"""The view of a target: its files, state file and manifest, read once, and the render path
(parse the part of a file the patches read, stack their transforms, splice the bytes back).

`View`, `render_file` and the helpers they call decide the bytes a module patch renders: they are
part of every such patch's identity (`identity.RENDERING`); `open_view`, `code_view` and
`before_patchkit_sha` only say what a view holds. The view never asks a patch which kind it is:
each kind reads (`code`) and renders (`render`) a file through it (`kind.Files`).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from patchkit.base.lean_typing import TYPE_CHECKING
from patchkit.releases import manifest as manifest_mod
from patchkit.engine import registry
from patchkit.store import state as state_mod
from patchkit.base.errors import PlanError, undecodable
from patchkit.engine.patch_status import PatchCrashed, crashed
from patchkit.store.state import State
from patchkit.store.target import Target
from patchkit.base.util import sha256

if TYPE_CHECKING:
    from typing import Any
    import libcst as cst

    from patchkit.authoring.patch import Patch
    from patchkit.engine.skeleton import Skeleton, Wants


@dataclass
class View:
    target: Target
    state: State | None
    manifest: manifest_mod.Manifest
    warnings: list[str] = field(default_factory=list)
    _bytes: dict[str, bytes | None] = field(default_factory=dict)
    _backups: dict[str, bytes | None] = field(default_factory=dict)
    _trees: dict[tuple[str, str], "cst.Module"] = field(default_factory=dict)
    _skeletons: dict[tuple[str, str], "Skeleton | None"] = field(default_factory=dict)
    _scoped: dict[tuple[str, str], "cst.Module"] = field(default_factory=dict)
    _folds: dict[tuple[str, str, tuple[str, ...]], "cst.Module"] = field(default_factory=dict)
    _byte_folds: dict[tuple[str, str, tuple[str, ...]], bytes] = field(default_factory=dict)
    _patches: dict[str, "Patch"] | None = None

    def read(self, rel: str) -> bytes | None:
        if rel not in self._bytes:
            self._bytes[rel] = self.target.read(rel)
        return self._bytes[rel]

    def sha(self, rel: str) -> str | None:
        data = self.read(rel)
        return None if data is None else sha256(data)

    def pristine(self, rel: str) -> bytes | None:
        """The release's bytes of a file: its backup once patchkit changed it (read once)."""
        if not (self.state and rel in self.state.files):
            return self.read(rel)
        if rel not in self._backups:
            record = self.state.files[rel]
            self._backups[rel] = None if record.pristine is None else state_mod.read_backup(self.target.site, rel, record.pristine)
        return self._backups[rel]

    def file_condition(self, rel: str) -> str:
        record = self.state.files[rel]  # type: ignore[union-attr]
        current = self.sha(rel)
        if current == record.patched:
            return "patched"
        if current == record.pristine:
            return "pristine"
        return "drifted"

    @property
    def patches(self) -> dict[str, "Patch"]:
        if self._patches is None:
            self._patches = {cls.ID: cls() for cls in registry.load_all()}
        return self._patches

    def parse(self, rel: str, data: bytes) -> "cst.Module":
        import libcst as cst

        key = (rel, sha256(data))
        if key not in self._trees:
            try:
                self._trees[key] = cst.parse_module(data)
            except cst.ParserSyntaxError as exc:
                raise PlanError(f"{rel} has a syntax error at line {exc.raw_line}: {exc.message}") from None
            except UnicodeDecodeError as exc:
                raise undecodable(self.target.site / rel, exc) from None
        return self._trees[key]

    def _scope(self, rel: str) -> "Wants | None":
        """What the patches targeting `rel` read and edit there (see `patchkit.engine.skeleton`): their
        `PARTS`, else their `SCOPE` classes whole; None when one of them works at module level
        (no SCOPE or PARTS for the file, or a module-level MARK without PARTS: then the whole
        file is parsed)."""
        wants: dict[str, frozenset[str] | None] = {}
        for patch in self.patches.values():
            if rel not in patch.TARGETS:
                continue
            parts = patch.parsed_parts(rel)
            if parts is None:
                return None
            for part in parts:
                name, selector = _part(part)
                if selector is None or (name in wants and wants[name] is None):
                    wants[name] = None
                else:
                    wants[name] = (wants.get(name) or frozenset()) | {selector}
        return wants

    def skeleton(self, rel: str, data: bytes) -> "Skeleton | None":
        """The part of `data` the patches read and edit, with placeholders for the rest (found
        with `ast`, cheap); None when the whole file is parsed. Only this part is parsed with
        libcst and regenerated; the bytes left out are put back as they were."""
        import ast

        from patchkit.engine import skeleton

        key = (rel, sha256(data))
        if key not in self._skeletons:
            self.check_decodable(rel, data)
            wants = self._scope(rel)
            if wants is None:
                self._skeletons[key] = None
                return None
            try:
                module = ast.parse(data, filename=rel)
            except (SyntaxError, ValueError) as exc:
                line = getattr(exc, "lineno", "?")
                raise PlanError(f"{rel} has a syntax error at line {line}: {getattr(exc, 'msg', exc)}") from None
            self._skeletons[key] = skeleton.build(data, module, wants)
        return self._skeletons[key]

    def check_decodable(self, rel: str, data: bytes) -> None:
        """A target file that is not valid UTF-8 is refused whole, exit 6 naming the file, even
        when the odd bytes lie outside the part the patches parse (Python could not import it,
        unless a coding line declares another encoding, which SGLang's sources never do)."""
        try:
            data.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise undecodable(self.target.site / rel, exc) from None

    def parse_scoped(self, rel: str, data: bytes) -> "cst.Module":
        """The libcst tree of `skeleton(rel, data)` (what probes and transforms get)."""
        import libcst as cst

        key = (rel, sha256(data))
        if key not in self._scoped:
            part = self.skeleton(rel, data)
            if part is None:
                self._scoped[key] = self.parse(rel, data)
            else:
                try:
                    tree = cst.parse_module(part.source)
                except cst.ParserSyntaxError as exc:
                    raise PlanError(f"{rel} has a syntax error in the part patchkit parses: {exc.message}") from None
                except UnicodeDecodeError as exc:
                    raise undecodable(self.target.site / rel, exc) from None
                if tree.default_indent != part.default_indent:  # new blocks indent as in the whole file
                    tree = _with_default_indent(tree, part.default_indent)
                self._scoped[key] = tree
        return self._scoped[key]

    def code(self, patch: "Patch", rel: str, data: bytes) -> Any:
        """What `patch`'s probes and transform get for a file (its kind reads it: `PatchKind.code`)."""
        return patch.code(rel, data, self)

    def render(self, rel: str, base: bytes, ids: tuple[str, ...]) -> bytes:
        """The bytes of `base` with the transforms of `ids` stacked in order: each patch adds its
        change to what the ones before it made (`PatchKind.render`), folded onto one parsed part
        (`fold_parsed`) or on bytes (`transform_bytes`); a fold becomes bytes (its parsed part
        regenerated, the parts left out put back) where a patch or the end of the stack needs them."""
        key = (rel, sha256(base), ids)
        if key not in self._byte_folds:
            rendered: Any = base
            for at, pid in enumerate(ids):
                rendered = self._patch(rel, pid).render(rel, rendered, ids[:at], self)
            self._byte_folds[key] = self.as_bytes(rel, rendered)
        return self._byte_folds[key]

    def fold_parsed(self, rel: str, rendered: Any, patch: "Patch") -> "Folded":
        """`rendered` with `patch`'s transform folded onto its parsed part (`fold`)."""
        if isinstance(rendered, Folded):
            return Folded(rendered.base, (*rendered.ids, patch.ID))
        return Folded(rendered, (patch.ID,))

    def transform_bytes(self, rel: str, rendered: Any, patch: "Patch", below: tuple[str, ...]) -> Any:
        """`patch`'s transform of the bytes `rendered` stands for (a patch that reads bytes): the
        new bytes, None for a file it deletes."""
        data = self.as_bytes(rel, rendered)
        if data is not None:  # (None: a file a patch below deleted, absent to this one)
            self.check_decodable(rel, data)
        try:
            new = transformed(patch, rel, data)
        except PlanError as exc:
            if not below:
                raise
            # A diff is made against the release's bytes: say which patches changed them first.
            raise PlanError(f"{exc} (on top of {', '.join(below)}, applied first to {rel}; `--skip {below[0]}` "
                            f"applies {patch.ID} alone, `Patchkit-After:` sets the order)") from None
        return new

    def as_bytes(self, rel: str, rendered: Any) -> bytes:
        """The bytes `rendered` stands for: a fold's parsed part regenerated and spliced back into
        its base (the parts left out put back), in the file's own encoding (a PEP 263 cookie, a
        UTF-8 BOM: `.code` is text without the BOM)."""
        from patchkit.engine.skeleton import SkeletonError

        if not isinstance(rendered, Folded):
            data: bytes = rendered  # (None for a file a diff deletes, as `transformed` returns it)
            return data
        code = self.fold(rel, rendered.base, rendered.ids).bytes
        part = self.skeleton(rel, rendered.base)
        if part is None:
            return code
        try:
            return part.restore(code)
        except SkeletonError as exc:
            raise PlanError(f"patches {', '.join(rendered.ids)} on {rel}: {exc}") from None

    def _patch(self, rel: str, pid: str) -> "Patch":
        if pid not in self.patches:
            raise PlanError(f"{rel} carries patch {pid}, which is not loaded here (a patch set from "
                            "outside patchkit? pass --patches DIR or install its package)")
        return self.patches[pid]

    def fold(self, rel: str, base: bytes, ids: tuple[str, ...]) -> "cst.Module":
        """The parsed part of `base` (see `skeleton`) with the transforms of `ids` stacked in order."""
        key = (rel, sha256(base), ids)
        if key not in self._folds:
            tree = self.parse_scoped(rel, base) if not ids else self.fold(rel, base, ids[:-1])
            if ids:
                tree = transformed(self._patch(rel, ids[-1]), rel, tree)
            self._folds[key] = tree
        return self._folds[key]


@dataclass(frozen=True)
class Folded:
    """What a stack has made of a file so far where the last patches fold onto one parsed part:
    the bytes they were parsed from and their ids (`View.fold`, turned into bytes by `View.as_bytes`)."""

    base: bytes
    ids: tuple[str, ...]


def _with_default_indent(tree: "cst.Module", indent: str) -> "cst.Module":
    """`tree` with another default indent for new blocks; its own blocks that used the default
    (indent None) keep the indent they were parsed with."""
    import libcst as cst

    parsed = tree.default_indent

    class _Explicit(cst.CSTTransformer):
        def leave_IndentedBlock(self, original_node: cst.IndentedBlock, updated_node: cst.IndentedBlock) -> cst.IndentedBlock:
            return updated_node.with_changes(indent=parsed) if updated_node.indent is None else updated_node

    explicit = tree.visit(_Explicit())
    assert isinstance(explicit, cst.Module)
    return explicit.with_changes(default_indent=indent)


def _part(part: str) -> tuple[str, str | None]:
    """A PARTS entry as (top-level name, member selector or None for all of it)."""
    if ":" in part:
        name, text = part.split(":", 1)
        return name, ":" + text
    name, _, member = part.partition(".")
    return name, member or None


def transformed(patch: "Patch", rel: str, tree: Any) -> Any:
    """`patch`'s transform of one file (a tree, or bytes for a patch that works on bytes), its
    errors as the engine says them: a PlanError names the patch, any other exception is its crash."""
    from patchkit.authoring.patch import SkipPatch

    from patchkit.base.errors import PatchkitError

    try:
        return patch.transform(rel, tree)
    except (SkipPatch, PatchCrashed):
        raise
    except PlanError as exc:
        raise PlanError(f"patch {patch.ID}: {exc}") from None
    except PatchkitError:
        raise
    except Exception as exc:
        raise crashed(patch, "transform", rel, exc) from None


def render_file(view: View, rel: str, ids: tuple[str, ...]) -> bytes | None:
    """The bytes a file must have with exactly `ids` applied, validated by compiling them."""
    base = view.pristine(rel)
    if base is None or not ids:
        return base
    data = view.render(rel, base, ids)
    if b"\r\n" in base and base.count(b"\r\n") == base.count(b"\n"):
        # A CRLF file stays CRLF also in inserted code (Python reads both alike, string literals too).
        data = data.replace(b"\r\n", b"\n").replace(b"\n", b"\r\n")
    try:
        # The whole file, not only the regenerated part: a splice that joins or shifts lines
        # around a part left out must never be written (0.5.17's target files: ~75 ms). Only
        # Python files: a diff patch may change others in the package (data, configs).
        if rel.endswith(".py"):
            compile(data, rel, "exec", dont_inherit=True)
    except SyntaxError as exc:
        raise PlanError(f"patches {', '.join(ids)} produce invalid Python in {rel}: {exc.msg} (line {exc.lineno})") from None
    return data


def open_view(target: Target) -> View:
    state = state_mod.load(target.site)
    found = manifest_mod.find(target.version)
    view = View(target=target, state=state, manifest=found or manifest_mod.Manifest(target.version))
    if found is None:
        known = manifest_mod.available()
        view.warnings.append(
            f"SGLang {target.version} was not verified by patchkit (it has manifests for "
            f"{known[0]}..{known[-1]}): each patch is judged by its probes on the code" if known else
            f"SGLang {target.version} was not verified by patchkit: each patch is judged by its probes on the code"
        )
    if state is not None and state.sglang_version != target.version:
        # SGLang was reinstalled at another version over a patched tree: the record is stale.
        view.warnings.append(
            f"stale state: {state_mod.state_dir(target.site)} records SGLang {state.sglang_version} but "
            f"{target.version} is installed (upgraded or reinstalled); the tree is judged afresh, and "
            f"`{target.naming.command('apply')}`, `{target.naming.command('revert')}` or "
            f"`{target.naming.command('clean')}` discards the old record"
        )
        view.state = None
    if view.state is not None:
        # The runtime report stays where it was written (an editable install's metadata folder, or
        # the site when patched with --source): there it is updated and removed, however the tree
        # is named now; a recorded folder patchkit never writes to for this tree is a corrupt record.
        recorded = state_mod.runtime_root(target, view.state)
        if view.state.runtime and recorded != target.runtime_root:
            view.target = replace(target, runtime_root=recorded)
    if view.state is not None:
        unknown = [pid for pid in view.state.patches if pid not in registry.patch_ids()]
        if unknown:
            view.warnings.append(f"the state records patch(es) {', '.join(unknown)} that are not loaded here "
                                 "(a patch set from outside patchkit? pass --patches DIR or install its package)")
    return view


def code_view(source: Target, patch: "type[Patch] | None" = None) -> View:
    """A view that judges code alone: no state file, no manifest to lean on (any object with
    `read` and `version` will do: a release tree or a git revision); with `patch`, a view of that
    one patch instead of the loaded set."""
    return View(target=source, state=None, manifest=manifest_mod.Manifest(source.version),
                _patches=None if patch is None else {patch.ID: patch()})


def before_patchkit_sha(view: View, rel: str) -> str | None:
    """The sha256 of a file before patchkit changed it (its pristine record), else of its bytes."""
    if view.state and rel in view.state.files:
        return view.state.files[rel].pristine
    return view.sha(rel)
