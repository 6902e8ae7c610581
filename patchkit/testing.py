"""Before/after testing of one patch's transform and probes (in the manner of libcst's
CodemodTest): each case is a dedented source pair.

Every sample is also run through the engine twice, once parsing only the parts of the file the
patch declares (`PARTS`, the skeleton path a real apply takes) and once parsing the whole file,
and both must give the same verdict and the same bytes: a probe or an edit that reads something
its `PARTS` leaves out fails here, in the fast tier, not only on a real release (issue 22.3)."""

from __future__ import annotations

import textwrap
import types
from pathlib import Path

import libcst as cst

from patchkit.base.errors import PatchkitError
from patchkit.authoring.patch import Patch


class PatchTest:
    PATCH: type[Patch]
    PATH = "sglang/example.py"
    # Samples of the files the patch consults (its CONSULTS), by path: on the tree of every engine
    # run beside the sample at PATH, so that `precondition` reads them.
    CONSULTED: dict[str, str] = {}

    def parse(self, source: str) -> cst.Module:
        """The whole-file tree of a sample. Every sample a test parses is also run through the
        engine at PATH and at each other file with the same SCOPE classes, parsing its PARTS and
        parsing the whole file: a probe or an edit reading what PARTS leaves out fails here, in
        whichever test holds the sample that reaches it (not only in `assert_transform`)."""
        tree = cst.parse_module(textwrap.dedent(source))
        self.engine_run(source)
        scope = self.PATCH.SCOPE.get(self.PATH)
        for rel in self.PATCH.PARTS:  # the other files holding the same classes (a class moved between files)
            if rel != self.PATH and rel in self.PATCH.TARGETS and scope and self.PATCH.SCOPE.get(rel) == scope:
                self.engine_run(source, rel)
        return tree

    def assert_transform(self, before: str, after: str) -> None:
        patch = self.PATCH()
        tree = self.parse(before)
        assert not patch.is_applied(self.PATH, tree), "the 'before' sample already counts as applied"
        assert not patch.is_fixed_upstream(self.PATH, tree), "the 'before' sample counts as upstream-fixed"
        patched = patch.transform(self.PATH, tree)
        assert patched.code == textwrap.dedent(after)
        assert patch.is_applied(self.PATH, patched), "is_applied() does not recognise the patched code"
        assert not patch.is_fixed_upstream(self.PATH, patched), "the patch's own change counts as an upstream fix"
        again = patch.transform(self.PATH, patched)
        assert again.code == patched.code, "transform is not idempotent"
        compile(patched.code, self.PATH, "exec")
        # A target judged not-applicable alone (its REQUIRES file is another one) is still rendered.
        alone = self.PATH in (self.PATCH.REQUIRES or self.PATCH.TARGETS)
        verdict, written = self.engine_run(before)
        assert (verdict, written) == ("pending" if alone else "not-applicable", textwrap.dedent(after).encode()), \
            "the engine judges or renders the sample otherwise than the transform does"
        assert self.engine_run(after) == ("applied" if alone else "not-applicable", textwrap.dedent(after).encode()), \
            "the engine does not judge the patched sample applied"
        self.parse(after)  # and the patched sample at every file the patch parses in part

    def engine_run(self, source: str, rel: str | None = None) -> tuple[str, bytes | str | None]:
        """(verdict, bytes written or the error) of the engine on the dedented `source` at `rel`
        (PATH), checked to be the same parsing the patch's PARTS only and parsing the whole file."""
        rel = rel or self.PATH
        files: dict[str, bytes | None] = {path: textwrap.dedent(text).encode() for path, text in self.CONSULTED.items()}
        files[rel] = textwrap.dedent(source).encode()
        parts, whole = _engine_run(self.PATCH, rel, files, whole=False), _engine_run(self.PATCH, rel, files, whole=True)
        assert parts == whole, (
            f"{self.PATCH.ID}: parsing only its PARTS of {rel} gives {parts!r}, the whole file {whole!r}: "
            "PARTS must name everything its probes and edits read")
        return parts


def _engine_run(cls: type[Patch], rel: str, files: dict[str, bytes | None], whole: bool) -> tuple[str, bytes | str | None]:
    """The engine's verdict on the sample at `rel` (with the other `files` of the tree), and the
    bytes it renders there (or the error)."""
    from patchkit.engine import decide
    from patchkit.engine import view as view_mod

    data = files[rel]

    target = types.SimpleNamespace(site=Path("/nonexistent"), read=lambda path: None, version="0")
    view = view_mod.View(target=target, state=None, manifest=None)  # type: ignore[arg-type]
    view._patches = {cls.ID: cls()}
    if whole:
        view.skeleton = lambda rel, data: None  # type: ignore[method-assign]
    try:
        verdict = decide.evaluate(view, cls.ID, files).state
    except PatchkitError as exc:
        return "error", str(exc)
    view.pristine = lambda path: data if path == rel else None  # type: ignore[method-assign, assignment]
    try:
        return verdict, view_mod.render_file(view, rel, (cls.ID,))
    except PatchkitError as exc:
        return verdict, f"render-error: {exc}"  # the verdict kept: it may differ where the render does not
