"""The Patch base class that every patch module subclasses (see docs/AUTHORING.md).

A patch is pure: it gets a parsed target file and returns a verdict or a new tree. It never
touches the disk; the engine decides, the transaction writes. A subclass declares its
metadata, its snippets (`patchkit.template.Snippet`, written once) and `edit()`; the base class
owns the guards every patch needs:

- the classes the patch edits in a file (`SCOPE`) are missing -> `SkipPatch` with the reason;
- the file already carries the patch (`MARKS`, the patch's own snippets found by shape) ->
  `transform` returns the tree unchanged;
- an edit that changed nothing, or after which the patch's own marks are not found, is an
  error (`EditError`), never a silent partial patch.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

import libcst as cst
from packaging.specifiers import SpecifierSet

from patchkit.edits import EditError
from patchkit.errors import AnchorError, PatchkitError
from patchkit.matchers import classes
from patchkit.template import Snippet


class SkipPatch(PatchkitError):
    """Raised by a transform when this file does not carry what the patch fixes."""


top_classes = classes  # the top-level classes of that name (usually zero or one)


class Patch:
    ID: ClassVar[str]
    TITLE: ClassVar[str]
    RATIONALE: ClassVar[str]
    # Upstream issues / PRs, e.g. "sgl-project/sglang#12345".
    UPSTREAM: ClassVar[tuple[str, ...]] = ()
    # When the patch can be dropped, in words ("drop when #12345 ships").
    DROP_WHEN: ClassVar[str] = ""
    # PEP 440 specifier of the SGLang releases the patch was written and verified for. A hint:
    # the probes on the code decide; outside the range the engine only warns.
    APPLIES_TO: ClassVar[str]
    # Files, relative to the site folder, that the patch may edit. Alternatives for files
    # that moved between releases are listed together; the ones present are used.
    TARGETS: ClassVar[tuple[str, ...]]
    # Files of which at least one must exist for the patch to apply at all (default: any
    # target). A patch whose secondary edits only make sense beside its main one names it here.
    REQUIRES: ClassVar[tuple[str, ...]] = ()
    # Per target file, the top-level classes the patch reads and edits there. None of them in
    # the file -> the patch does not apply to it (skip, with the reason). A file not named
    # here is edited at module level. The engine parses only these classes' statements.
    SCOPE: ClassVar[Mapping[str, tuple[str, ...]]] = {}
    # Per target file, the parts of it the engine parses for this patch, when less than its
    # SCOPE classes whole: "Class" (all of it), "Class.member" (only the members of that name),
    # "Class:text" (only the members whose source mentions `text`), "name" (a top-level def,
    # class or assignment), ":text" (the top-level statements whose source mentions `text`). Probes and edits see only these (each run of code left out is one
    # placeholder line), so declare all they read, the module-level code a MARK looks for
    # included. Default: the SCOPE classes whole; the whole file with a module-level MARK.
    PARTS: ClassVar[Mapping[str, tuple[str, ...]]] = {}
    # Per target file, what "applied" means: (top-level class, or None for the module, and a
    # snippet of the patch) pairs; the file counts as patched when every class of that name
    # present holds the snippet's first statement (by shape). Derived from the same snippets
    # the patch inserts, so the detector is never written twice. A patch whose change is not
    # a snippet (a derived copy of upstream code) overrides `is_applied` instead.
    MARKS: ClassVar[Mapping[str, tuple[tuple[str | None, Snippet], ...]]] = {}
    # Ids of patches that edit the same file and must be applied before this one there (the
    # stacking order is declared, never alphabetical; a test checks every shared file).
    STACK_AFTER: ClassVar[tuple[str, ...]] = ()
    # Classes the patch needs; when its target files are gone, `track` looks for these in
    # other files to report the patch as `moved` (naming the new file).
    ANCHOR_SYMBOLS: ClassVar[tuple[str, ...]] = ()
    # Functions ("Class.method" or "function") whose upstream changes `track` diffs.
    WATCH: ClassVar[tuple[str, ...]] = ()
    # A hook that acts at run time, checked by `verify` in a child interpreter of the patched
    # environment: `module` is imported, then `active` (an expression) must be true, and false
    # again under the `opt_out` environment.
    RUNTIME_HOOK: ClassVar[dict[str, Any] | None] = None

    def __init__(self) -> None:
        self.warnings: list[str] = []

    def warn(self, message: str) -> None:
        """A warning for the user; it reaches `apply`'s output and `--json`."""
        if message not in self.warnings:
            self.warnings.append(message)

    @classmethod
    def specifier(cls) -> SpecifierSet:
        return SpecifierSet(cls.APPLIES_TO)

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

    def edit(self, path: str, tree: cst.Module) -> cst.Module:
        """The patched tree, built with `patchkit.edits` helpers (they raise when an anchor is
        missing or ambiguous). Called only on files that pass `check` and are not applied."""
        raise NotImplementedError

    def transform(self, path: str, tree: cst.Module) -> cst.Module:
        """The patched tree; the tree itself when already applied. Raises SkipPatch when the
        file has nothing to fix, AnchorError when an anchor is missing or ambiguous or the
        edit did not do what it should."""
        self.check(path, tree)
        if self.is_applied(path, tree):
            return tree
        try:
            new = self.edit(path, tree)
        except AnchorError as exc:
            raise type(exc)(f"{path}: {exc}") from None
        if new.deep_equals(tree):
            raise EditError(f"{path}: patch {self.ID} changed nothing")
        if (self.MARKS.get(path) or type(self).is_applied is not Patch.is_applied) and not self.is_applied(path, new):
            raise EditError(f"{path}: after its edit, patch {self.ID} does not recognise its own change")
        return new
