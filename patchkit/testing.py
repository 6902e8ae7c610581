"""Before/after testing of one patch's transform and probes (in the manner of libcst's
CodemodTest): each case is a dedented source pair."""

from __future__ import annotations

import textwrap

import libcst as cst

from patchkit.patch import Patch


class PatchTest:
    PATCH: type[Patch]
    PATH = "sglang/example.py"

    def parse(self, source: str) -> cst.Module:
        return cst.parse_module(textwrap.dedent(source))

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
