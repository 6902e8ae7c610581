"""The Patch base class that every patch module subclasses (see docs/AUTHORING.md).

A patch is pure: it gets a parsed target file and returns a verdict or a new tree. It never
touches the disk; the engine decides, the transaction writes. A subclass declares its
metadata, its snippets (`patchkit.authoring.template.Snippet`, written once) and its edits: methods
decorated with `patchkit.authoring.edits.edit` (libcst's `@m.leave`, counted) and gated with libcst's
`@m.call_if_inside`, building on `updated_node`. A patch is a libcst
`MatcherDecoratableTransformer`, as libcst's codemods are; the base class runs all of a
patch's edits in one pass over a file and owns the guards every patch needs:

- the classes the patch edits in a file (`SCOPE`) are missing -> `SkipPatch` with the reason;
- the file already carries the patch (`MARKS`, the patch's own snippets found by shape) ->
  `transform` returns the tree unchanged;
- an edit that fired a wrong number of times (`AnchorError` naming it), a pass that changed
  nothing, or one after which the patch's own marks are not found is an error (`EditError`),
  never a silent partial patch.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Callable, ClassVar

import libcst as cst

from patchkit.authoring import libcst_private  # first: libcst.matchers at a lower cost (see there)
from patchkit.authoring.launch_trigger import Trigger  # noqa: E402

import libcst.matchers as m  # noqa: E402
from packaging.specifiers import SpecifierSet

from patchkit.authoring.anchor import Anchor, derive
from patchkit.authoring.edits import Edit, EditError, declared
from patchkit.authoring.kind import Files, Read, Rendered
from patchkit.base.errors import AnchorError, PatchkitError
from patchkit.authoring.matchers import classes
from patchkit.authoring.template import Snippet
from patchkit.authoring.upstream_change import UpstreamChange


def upstream_narrower_note(what: str) -> str:
    """The detail of an upstream-fixed verdict whose upstream fix does less than the patch."""
    return f"upstream's fix is narrower than this patch: {what}"


class SkipPatch(PatchkitError):
    """Raised by a transform when this file does not carry what the patch fixes."""


top_classes = classes  # the top-level classes of that name (usually zero or one)


# Nodes whose children can hold statements: a pass whose matchers all name statements descends
# only into these (expressions, parameters and the small statements of a line are skipped).
_BLOCKS = (
    cst.Module, cst.BaseCompoundStatement, cst.IndentedBlock, cst.Else, cst.ExceptHandler, cst.ExceptStarHandler,
    cst.Finally, cst.MatchCase,
)
_STATEMENT_LEVEL = (cst.BaseStatement, *_BLOCKS)
# The fields of those nodes that hold statements (or blocks of them).
_STATEMENT_FIELDS = ("body", "orelse", "handlers", "finalbody", "cases")
# Per concrete node class: 2 = a block (holds statements), 1 = a statement, 0 = neither (the
# classes are abstract bases: isinstance on them is slow, this is a dictionary lookup).
_LEVEL: dict[type, int] = {}


def _level(node: object) -> int:
    kind = type(node)
    level = _LEVEL.get(kind)
    if level is None:
        level = _LEVEL[kind] = 2 if issubclass(kind, _BLOCKS) else 1 if issubclass(kind, _STATEMENT_LEVEL) else 0
    return level


def _node_types(matcher: object) -> set[type] | None:
    """The libcst node classes a matcher can match; None when that cannot be told."""
    if isinstance(matcher, (m.OneOf, m.AllOf)):
        found: set[type] = set()
        for option in matcher.options:
            types = _node_types(option)
            if types is None:
                return None
            found |= types
        return found
    node_type = getattr(cst, type(matcher).__name__, None)
    return {node_type} if isinstance(node_type, type) and issubclass(node_type, cst.CSTNode) else None


class _Hooks:
    """A patch class's decorated methods, by matcher (what `MatcherDecoratableTransformer.__init__`
    gathers from `dir()` of every instance, ~30 ms a patch, read once per class from the class
    dictionaries of its Patch classes), and whether one instance had their annotations checked.
    Gates (call_if_inside / call_if_not_inside matchers) are numbered: a matcher's hash walks all
    of it, so the pass keeps its state in a list, not in a dictionary keyed by matchers."""

    def __init__(self, cls: type) -> None:
        members: dict[str, object] = {}
        for klass in reversed(cls.__mro__):
            if issubclass(klass, Patch):
                members.update(vars(klass))
        self.visit: dict[m.BaseMatcherNode, tuple[str, ...]] = {}
        self.leave: dict[m.BaseMatcherNode, tuple[str, ...]] = {}
        gates: dict[m.BaseMatcherNode, int] = {}
        self.requires: dict[str, tuple[int, ...]] = {}  # per method: gates that must hold
        self.forbids: dict[str, tuple[int, ...]] = {}  # and gates that must not
        for name, value in sorted(members.items()):
            visits, leaves, inside, not_inside = libcst_private.decorations(value)
            for matcher in visits:
                self.visit[matcher] = (*self.visit.get(matcher, ()), name)
            for matcher in leaves:
                self.leave[matcher] = (*self.leave.get(matcher, ()), name)
            self.requires[name] = tuple(gates.setdefault(g, len(gates)) for g in inside)
            self.forbids[name] = tuple(gates.setdefault(g, len(gates)) for g in not_inside)
        self.gates = tuple(gates)
        types = {matcher: _node_types(matcher) for matcher in (*self.visit, *self.leave, *self.gates)}
        # Every matcher names a statement: the pass never needs to look inside an expression.
        self.statements_only = all(found is not None and all(issubclass(t, _STATEMENT_LEVEL) for t in found) for found in types.values())
        self.checked = False

        def fits(matcher: m.BaseMatcherNode, node_type: type) -> bool:
            return any(issubclass(node_type, t) for t in types[matcher] or (object,))

        self._fits = fits
        self._visit: dict[type, tuple[tuple[m.BaseMatcherNode, tuple[str, ...]], ...]] = {}
        self._leave: dict[type, tuple[tuple[m.BaseMatcherNode, tuple[str, ...]], ...]] = {}
        self._gates: dict[type, tuple[tuple[int, m.BaseMatcherNode], ...]] = {}

    def visit_for(self, node_type: type) -> tuple[tuple[m.BaseMatcherNode, tuple[str, ...]], ...]:
        """The @m.visit matchers (and method names) that can match a node of that type."""
        found = self._visit.get(node_type)
        if found is None:
            found = self._visit[node_type] = tuple(item for item in self.visit.items() if self._fits(item[0], node_type))
        return found

    def leave_for(self, node_type: type) -> tuple[tuple[m.BaseMatcherNode, tuple[str, ...]], ...]:
        found = self._leave.get(node_type)
        if found is None:
            found = self._leave[node_type] = tuple(item for item in self.leave.items() if self._fits(item[0], node_type))
        return found

    def gates_for(self, node_type: type) -> tuple[tuple[int, m.BaseMatcherNode], ...]:
        found = self._gates.get(node_type)
        if found is None:
            found = self._gates[node_type] = tuple(
                (index, gate) for index, gate in enumerate(self.gates) if self._fits(gate, node_type)
            )
        return found


class Patch(m.MatcherDecoratableTransformer):
    ID: ClassVar[str]
    TITLE: ClassVar[str]
    RATIONALE: ClassVar[str]
    # Upstream issues / PRs, e.g. "sgl-project/sglang#12345".
    UPSTREAM: ClassVar[tuple[str, ...]] = ()
    # When the patch can be dropped, in words ("drop when #12345 ships").
    DROP_WHEN: ClassVar[str] = ""
    # How upstream's fix, where a release has it, does less than the patch (one phrase): `list`
    # shows it, and an upstream-fixed verdict on code `is_upstream_narrower` finds in that shape
    # carries it as its detail (status, matrix, the manifests).
    UPSTREAM_NARROWER: ClassVar[str] = ""
    # The upstream changes DROP_WHEN names (`patchkit.upstream_change`), as looked up by hand:
    # `track` says whether the release it reaches holds each (a merged one may be in none yet).
    DROP_WAITS_ON: ClassVar[tuple[UpstreamChange, ...]] = ()
    # PEP 440 specifier of the SGLang releases the patch was written and verified for. A hint:
    # the probes on the code decide; outside the range the engine only warns.
    APPLIES_TO: ClassVar[str]
    # Files, relative to the site folder, that the patch may edit. Alternatives for files
    # that moved between releases are listed together; the ones present are used.
    TARGETS: ClassVar[tuple[str, ...]]
    # Files of which at least one must exist for the patch to apply at all (default: any
    # target). A patch whose secondary edits only make sense beside its main one names it here.
    REQUIRES: ClassVar[tuple[str, ...]] = ()
    # Files of the release the patch reads but never writes: where the release keeps a rule that
    # decides whether the patch is needed at all (e.g. a validator refusing the setting the patch
    # would choose). `precondition` gets them; their hashes key the manifests and the verdict
    # cache with the targets'.
    CONSULTS: ClassVar[tuple[str, ...]] = ()
    # Per target file, the top-level classes the patch reads and edits there (`patchkit.authoring.anchor`),
    # each said once: the members parsed, the marks it holds once patched, the methods `track`
    # watches. SCOPE, PARTS, MARKS, ANCHOR_SYMBOLS and WATCH are derived from it.
    ANCHORS: ClassVar[Mapping[str, tuple[Anchor, ...]]] = {}
    # Derived from ANCHORS: per target file, the names of its anchor classes. None of them in
    # the file -> the patch does not apply to it (skip, with the reason). A file not named
    # here is edited at module level. The engine parses only these classes' statements.
    SCOPE: ClassVar[Mapping[str, tuple[str, ...]]] = {}
    # Per target file, the parts of it the engine parses for this patch, when less than its
    # anchor classes whole: "Class" (all of it), "Class.member" (only the members of that name),
    # "Class:text" (only the members whose source mentions `text`), "name" (a top-level def,
    # class or assignment), ":text" (the top-level statements whose source mentions `text`).
    # Probes and edits see only these (each run of code left out is one placeholder line), so
    # declare all they read, the module-level code a MARK looks for included. The class parts
    # come from ANCHORS; a patch declares here only the module-level ones. Default: the anchor
    # classes whole; the whole file with a module-level MARK.
    PARTS: ClassVar[Mapping[str, tuple[str, ...]]] = {}
    # Per target file, what "applied" means: (top-level class, or None for the module, and a
    # snippet of the patch) pairs; the file counts as patched when every class of that name
    # present holds the snippet's first statement (by shape). Derived from the same snippets
    # the patch inserts, so the detector is never written twice. The class marks come from
    # ANCHORS; a patch declares here only `(None, snippet)`. A patch whose change is not
    # a snippet (a derived copy of upstream code) overrides `is_applied` instead.
    MARKS: ClassVar[Mapping[str, tuple[tuple[str | None, Snippet], ...]]] = {}
    # Ids of patches that edit the same file and must be applied before this one there (the
    # stacking order is declared, never alphabetical; a test checks every shared file).
    STACK_AFTER: ClassVar[tuple[str, ...]] = ()
    # Classes the patch needs; when its target files are gone, `track` looks for these in
    # other files to report the patch as `moved` (naming the new file). Default: the ANCHORS.
    ANCHOR_SYMBOLS: ClassVar[tuple[str, ...]] = ()
    # Functions ("Class.method" or "function") whose upstream changes `track` diffs: the
    # anchors' `watch`, then the top-level functions declared here.
    WATCH: ClassVar[tuple[str, ...]] = ()
    # A hook that acts at run time, checked by `verify` in a child interpreter of the patched
    # environment: `module` is imported, then `active` (an expression) must be true, and false
    # again under the `opt_out` environment.
    RUNTIME_HOOK: ClassVar[dict[str, Any] | None] = None
    # The environment settings under which the patched code takes the release's own path at run
    # time (e.g. "SGLANG_PATCHKIT_DISABLE=<id>"); empty: it cannot be switched off without a revert.
    RUNTIME_SWITCH: ClassVar[tuple[str, ...]] = ()
    # Why a patch has no RUNTIME_SWITCH (one phrase, shown by `list`).
    NO_RUNTIME_SWITCH: ClassVar[str] = ""
    # Which launches depend on the patch (flags, model features, hardware): what `patchkit doctor`
    # asks for (patchkit/authoring/launch_trigger.py).
    LAUNCH: ClassVar[Trigger | None] = None

    # The edits the class declares (`@edit` methods), collected when the class is defined.
    EDITS: ClassVar[tuple[Edit, ...]] = ()

    _HOOKS: ClassVar[_Hooks]

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if "ANCHORS" in vars(cls):  # a subclass that only overrides PARTS (a test) keeps them as it says
            if "SCOPE" in vars(cls):
                raise TypeError(f"{cls.__name__}: SCOPE is derived from ANCHORS; declare one of them")
            found = derive(cls.ANCHORS, cls.PARTS, cls.MARKS, cls.WATCH)
            cls.SCOPE, cls.PARTS, cls.MARKS, cls.WATCH = found.scope, found.parts, found.marks, found.watch
            if "ANCHOR_SYMBOLS" not in vars(cls):
                cls.ANCHOR_SYMBOLS = found.symbols
        cls.EDITS = declared(cls)
        cls._HOOKS = _Hooks(cls)

    def __init__(self) -> None:
        # What MatcherDecoratableTransformer.__init__ sets up, from the class's hooks.
        cst.CSTTransformer.__init__(self)
        hooks = self._HOOKS
        libcst_private.set_up(
            self,
            {matcher: [getattr(self, name) for name in names] for matcher, names in hooks.visit.items()},
            {matcher: [getattr(self, name) for name in names] for matcher, names in hooks.leave.items()},
            hooks.gates, check=not hooks.checked)  # the decorated methods' annotations, once per class
        hooks.checked = True
        self._statements_only = hooks.statements_only
        self._rebuilt: list[cst.CSTNode] = []
        self._inside: list[cst.CSTNode | None] = [None] * len(hooks.gates)
        self.warnings: list[str] = []
        # The file the current pass edits, and how often each edit fired there.
        self.path = ""
        self.fired: dict[str, int] = {}

    def warn(self, message: str) -> None:
        """A warning for the user; it reaches `apply`'s output and `--json`."""
        if message not in self.warnings:
            self.warnings.append(message)

    @classmethod
    def specifier(cls) -> SpecifierSet:
        return SpecifierSet(cls.APPLIES_TO)

    # --- what the engine asks of every kind of patch (kind.PatchKind): a module patch's answers ---

    @classmethod
    def works_on_bytes(cls) -> bool:
        return False  # its probes and transform get the file's parsed part (a libcst tree): `code`

    def parsed_parts(self, path: str) -> tuple[str, ...] | None:
        """Its `PARTS` of the file, else its `SCOPE` classes whole; None when it works at module
        level (no SCOPE or PARTS for the file, or a module-level MARK without PARTS)."""
        parts = self.PARTS.get(path)
        if parts is None:
            scope = self.SCOPE.get(path)
            if not scope or any(cls is None for cls, _ in self.MARKS.get(path, ())):
                return None
            parts = scope
        return tuple(parts)

    def code(self, path: str, data: bytes, files: Files) -> Any:
        return files.parse_scoped(path, data)

    def render(self, path: str, rendered: Rendered, below: tuple[str, ...], files: Files) -> Rendered:
        return files.fold_parsed(path, rendered, self)  # with the module patches before it: one parse

    @classmethod
    def all_targets_required(cls) -> bool:
        return False  # a target missing leaves the patch of the files that are there

    @classmethod
    def reads_package(cls) -> bool:
        return False

    @classmethod
    def verdict_inputs(cls) -> list[str]:
        return []

    @classmethod
    def made_for(cls) -> list[Any] | None:
        return None

    def bind_package(self, python_files: Callable[[], list[str]], read: Read) -> None:
        pass  # it reads only its own files

    def targets_for(self, read: Read) -> tuple[str, ...]:
        return self.TARGETS

    def file_change(self, path: str) -> str | None:
        return None  # it edits files; it never creates or deletes one

    def creatable(self, path: str) -> str | None:
        return None

    def before_change(self, path: str, data: bytes) -> bytes | None:
        return None  # a transform cannot be undone from its result

    def upstream_remedy(self, version: str) -> str | None:
        return None

    def precondition(self, read: Read) -> str | None:
        return None  # its own files decide

    # --- probes ------------------------------------------------------------------------------

    def scope_classes(self, path: str, tree: cst.Module) -> list[cst.ClassDef]:
        """The top-level classes this patch works on in `path` that the file holds."""
        return [cls for name in self.SCOPE.get(path, ()) for cls in top_classes(tree, name)]

    def is_applied(self, path: str, tree: cst.Module) -> bool:
        """True when the file already has this patch's change (by shape, not by marker)."""
        checked = False
        for cls_name, snippet in self.MARKS.get(path, ()):
            scopes: list[cst.CSTNode] = [tree] if cls_name is None else list(top_classes(tree, cls_name))
            for scope in scopes:
                if not snippet.present_in(scope):
                    return False
                checked = True
        return checked

    def notes(self, path: str, tree: cst.Module) -> list[str]:
        """What a status detail says about this file beyond its verdict: by default, that
        upstream's fix there is narrower than the patch (UPSTREAM_NARROWER), where it is."""
        if self.UPSTREAM_NARROWER and self.is_upstream_narrower(path, tree):
            return [upstream_narrower_note(self.UPSTREAM_NARROWER)]
        return []

    def is_upstream_narrower(self, path: str, tree: cst.Module) -> bool:
        """True when the file holds upstream's fix in the shape that does less than the patch
        (what UPSTREAM_NARROWER says); never asked of a patch that declares none."""
        return False

    def is_fixed_upstream(self, path: str, tree: cst.Module) -> bool:
        """True when the file holds upstream's own fix: describe the shape of that fix, never
        only the absence of the bug's shape."""
        raise NotImplementedError

    # --- the transform -----------------------------------------------------------------------

    def check(self, path: str, tree: cst.Module) -> None:
        """Raise SkipPatch when `path` does not carry what the patch fixes. The default: none
        of the `SCOPE` classes is in the file. Override to add conditions (call super)."""
        names = self.SCOPE.get(path, ())
        if names and not self.scope_classes(path, tree):
            raise SkipPatch(f"{path} has no {' or '.join(names)}")

    # A pass whose matchers all name statements walks statements only (the fields of a block
    # that hold statements), never an expression, a parameter list or a line's small statements,
    # and rebuilds a block only when something in it changed: unchanged subtrees stay the same
    # objects (a fraction of what libcst's full visit costs, and `deep_equals` stops at them).
    # Gates, @m.visit and @m.leave callbacks work as in libcst; attribute visitors are not called.
    # In that mode the pass also dispatches to the decorated methods itself, as
    # MatcherDecoratableTransformer does, but trying only the matchers that name the node's type.
    def on_visit(self, node: cst.CSTNode) -> bool:
        if not self._statements_only:
            return super().on_visit(node)
        hooks, inside, kind = self._HOOKS, self._inside, type(node)
        for index, gate in hooks.gates_for(kind):
            if inside[index] is None and m.matches(node, gate):
                inside[index] = node
        for matcher, names in hooks.visit_for(kind):
            # The gates first (list lookups), the matcher only where a method may run.
            allowed = [name for name in names if self._allowed(name)]
            if allowed and m.matches(node, matcher):
                for name in allowed:
                    getattr(self, name)(node)
        descend = cst.CSTTransformer.on_visit(self, node)
        self._rebuilt.append(self._visit_statements(node) if descend and _level(node) == 2 else node)
        return False

    def on_leave(self, original_node: cst.CSTNode, updated_node: cst.CSTNode) -> Any:
        if not self._statements_only:
            return super().on_leave(original_node, updated_node)
        result: Any = cst.CSTTransformer.on_leave(self, original_node, self._rebuilt.pop())
        hooks, inside, kind = self._HOOKS, self._inside, type(original_node)
        for matcher, names in reversed(hooks.leave_for(kind)):
            allowed = [name for name in names if self._allowed(name)]
            if allowed and m.matches(original_node, matcher):
                for name in allowed:
                    if isinstance(result, cst.CSTNode):
                        result = getattr(self, name)(original_node, result)
        for index, _gate in hooks.gates_for(kind):
            if inside[index] is original_node:
                inside[index] = None
        return result

    def _allowed(self, name: str) -> bool:
        inside, hooks = self._inside, self._HOOKS
        return all(inside[i] is not None for i in hooks.requires[name]) and all(inside[i] is None for i in hooks.forbids[name])

    def _visit_statements(self, node: cst.CSTNode) -> cst.CSTNode:
        changes: dict[str, object] = {}
        for field in _STATEMENT_FIELDS:
            value = getattr(node, field, None)
            if value is None or isinstance(value, str):
                continue
            if _level(value):
                new = value.visit(self)
                if new is not value:
                    if isinstance(new, cst.FlattenSentinel):
                        raise TypeError(f"{type(node).__name__}.{field} holds one node, not a FlattenSentinel")
                    changes[field] = None if isinstance(new, cst.RemovalSentinel) else new
            elif isinstance(value, (list, tuple)) and value and _level(value[0]):
                rebuilt: list[cst.CSTNode] = []
                for child in value:
                    new = child.visit(self)
                    if isinstance(new, cst.FlattenSentinel):
                        rebuilt.extend(new.nodes)
                    elif isinstance(new, cst.CSTNode):
                        rebuilt.append(new)
                if len(rebuilt) != len(value) or any(a is not b for a, b in zip(rebuilt, value)):
                    changes[field] = rebuilt
        return node.with_changes(**changes) if changes else node

    def transform(self, path: str, tree: cst.Module) -> cst.Module:
        """The patched tree; the tree itself when already applied. Raises SkipPatch when the
        file has nothing to fix, AnchorError when an edit fired a wrong number of times (its
        anchor missing or ambiguous), EditError when the pass did not do what it should."""
        self.check(path, tree)
        if self.is_applied(path, tree):
            return tree
        self.path, self.fired = path, {}
        libcst_private.leave_every_gate(self)  # not inside anything yet
        self._inside = [None] * len(self._HOOKS.gates)
        self._rebuilt = []
        try:
            new = tree.visit(self)
            for spec in self.EDITS:
                if spec.applies_to(path):
                    spec.verify(self.fired.get(spec.name, 0))
        except AnchorError as exc:
            raise type(exc)(f"{path}: {exc}") from None
        assert isinstance(new, cst.Module)
        if new.deep_equals(tree):
            raise EditError(f"{path}: patch {self.ID} changed nothing")
        if (self.MARKS.get(path) or type(self).is_applied is not Patch.is_applied) and not self.is_applied(path, new):
            raise EditError(f"{path}: after its edit, patch {self.ID} does not recognise its own change")
        return new
