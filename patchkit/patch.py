"""The Patch base class that every module under `patches/` subclasses.

A patch is pure: it gets a parsed target file and returns a verdict or a new tree. It
never touches the disk; the engine decides, the transaction writes.
"""

from __future__ import annotations

from typing import ClassVar

import libcst as cst
from packaging.specifiers import SpecifierSet

from patchkit.errors import PatchkitError


class SkipPatch(PatchkitError):
    """Raised by a transform when this file does not carry what the patch fixes."""


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
    # Classes the patch needs; when its target files are gone, `track` looks for these in
    # other files to report the patch as `moved` (naming the new file).
    ANCHOR_SYMBOLS: ClassVar[tuple[str, ...]] = ()
    # Functions ("Class.method" or "function") whose upstream changes `track` diffs.
    WATCH: ClassVar[tuple[str, ...]] = ()
    # A hook that acts at run time, checked by `verify` in a child interpreter of the patched
    # environment: `module` is imported, then `active` (an expression) must be true, and false
    # again under the `opt_out` environment.
    RUNTIME_HOOK: ClassVar[dict | None] = None

    def __init__(self) -> None:
        self.warnings: list[str] = []

    def warn(self, message: str) -> None:
        self.warnings.append(message)

    @classmethod
    def specifier(cls) -> SpecifierSet:
        return SpecifierSet(cls.APPLIES_TO)

    def is_applied(self, path: str, tree: cst.Module) -> bool:
        """True when the file already has this patch's change (by shape, not by marker)."""
        raise NotImplementedError

    def is_fixed_upstream(self, path: str, tree: cst.Module) -> bool:
        """True when the file already contains an equivalent upstream fix."""
        raise NotImplementedError

    def transform(self, path: str, tree: cst.Module) -> cst.Module:
        """The patched tree. Raise SkipPatch when the file has nothing to fix, AnchorError
        when an anchor is missing or ambiguous."""
        raise NotImplementedError
