"""mamba-slot-graceful: skip a prefix donation when no mamba slot can be had, instead of
asserting and killing the scheduler.

Which call sites change, and why:
- Donations only: every `self._alloc_mamba_slot(...)` inside the function that donates a
  chunked request's prefix to the radix cache (`prepare_for_caching_req` of the unified
  MambaComponent, `cache_unfinished_req` of the legacy MambaRadixCache). In each of them the
  failing allocation is the first thing taken, so nothing needs giving back; the unified
  path returns 0 (callers read `<= 0` as "skip insert" and then give back nothing, since
  `insert_params.mamba_value` stays None), the legacy path takes its own
  `_skip_cache_unfinished_req()` exit. The request goes on; only that prefix is not cached.
- Not changed: the copy-on-write of a matched prefix (`finalize_match_result_in_cache`,
  `_match_post_processor`): the request cannot run without its own slot, there is nothing to
  skip. The int8 checkpoint slot (`_alloc_int8_ckpt_slot`): a separate pool whose failure
  comes after the ping-pong slot was already swapped, which cannot be undone here. Other
  callers of `_alloc_mamba_slot` (e.g. 0.5.23's external-linker transfer) are not donations.
- `_alloc_mamba_slot` itself keeps its assert for those callers; donations call a twin,
  derived from it mechanically (same eviction, whatever the release does), that returns None.
- Logged once per request, not once per chunk.
"""

from __future__ import annotations

import libcst as cst
import libcst.matchers as m

from patchkit.matchers import (
    exactly_one,
    replace_statement,
    methods,
    parse_statements,
    replace_member,
    statements,
    string,
)
from patchkit.errors import AnchorError
from patchkit.patch import Patch, SkipPatch

LEGACY = "sglang/srt/mem_cache/mamba_radix_cache.py"
COMPONENT_PATHS = (
    "sglang/srt/mem_cache/unified_cache_components/mamba_component.py",  # <= 0.5.16
    "sglang/srt/mem_cache/unified_cache/components/mamba_component.py",  # 0.5.17 - 0.5.19
    "sglang/srt/mem_cache/unified_cache/components/mamba.py",  # >= 0.5.20
)
ALLOC = "_alloc_mamba_slot"
TRY_ALLOC = "_patchkit_try_alloc_mamba_slot"
SKIP = "_patchkit_skip_mamba_donation"
# The function that donates a prefix, per class.
DONATING = {"MambaComponent": "prepare_for_caching_req", "MambaRadixCache": "cache_unfinished_req"}
# What the donating function returns when it skips: the unified path's "skip insert", the
# legacy path's own early exit.
SKIP_RETURN = {"MambaComponent": "0", "MambaRadixCache": "_skip_cache_unfinished_req(req)"}

_ASSERTS_SLOT = m.SimpleStatementLine(body=[m.Assert(msg=string("Can not alloc mamba cache"))])
_ASSIGNS_FROM_ALLOC = m.SimpleStatementLine(
    body=[m.Assign(
        targets=[m.AssignTarget(target=m.SaveMatchedNode(m.Name(), "name"))],
        value=m.Call(func=m.Attribute(value=m.Name("self"), attr=m.Name(ALLOC))),
    )]
)
_CALLS_ALLOC = m.Call(func=m.Attribute(value=m.Name("self"), attr=m.Name(ALLOC)))

_SKIP_SOURCE = f'''\
def {SKIP}(self, req):
    """patchkit mamba-slot-graceful: skip this donation; log once per request."""
    if not getattr(req, "_patchkit_mamba_donation_skipped", False):
        req._patchkit_mamba_donation_skipped = True
        import logging

        logging.getLogger(__name__).warning(
            "No free mamba cache slot to donate the prefix of request %s; not caching it "
            "(patchkit mamba-slot-graceful). Consider a larger --max-mamba-cache-size.",
            getattr(req, "rid", "?"),
        )
'''

_GUARD_SOURCE = """\
if {name} is None:
    self.{skip}(req)
    return {value}
"""


class MambaSlotGraceful(Patch):
    ID = "mamba-slot-graceful"
    TITLE = "Skip a prefix donation when no mamba slot is free instead of killing the server"
    RATIONALE = (
        "When chunked prefill donates a prefix to the radix cache and no mamba state slot can be freed, "
        "_alloc_mamba_slot asserts 'Can not alloc mamba cache', the scheduler dies and the whole server "
        "exits (2 x 60K concurrent prompts, 16 slots). The donation is skipped instead: the request goes "
        "on, that prefix is not cached, and it is logged once per request."
    )
    UPSTREAM = ("no upstream fix up to 0.5.23",)
    DROP_WHEN = "drop when _alloc_mamba_slot no longer asserts for prefix donations"
    APPLIES_TO = ">=0.5.13"
    TARGETS = (*COMPONENT_PATHS, LEGACY)
    ANCHOR_SYMBOLS = tuple(DONATING)
    WATCH = tuple(f"{cls}.{fn}" for cls, donating in DONATING.items() for fn in (ALLOC, donating))

    def _class(self, path: str, tree: cst.Module) -> cst.ClassDef | None:
        found = [node for node in tree.body if m.matches(node, m.ClassDef(name=m.OneOf(*map(m.Name, DONATING))))
                 and methods(node, ALLOC)]
        return exactly_one(found, f"class with {ALLOC}() ({' or '.join(DONATING)})", path) if found else None

    def is_applied(self, path: str, tree: cst.Module) -> bool:
        cls = self._class(path, tree)
        return cls is not None and bool(methods(cls, TRY_ALLOC)) and bool(methods(cls, SKIP))

    def is_fixed_upstream(self, path: str, tree: cst.Module) -> bool:
        cls = self._class(path, tree)
        if cls is None or methods(cls, TRY_ALLOC):
            return False
        # Upstream made the allocation itself graceful (no assert left to crash on).
        return not any(statements(fn, _ASSERTS_SLOT) for fn in methods(cls, ALLOC))

    def transform(self, path: str, tree: cst.Module) -> cst.Module:
        cls = self._class(path, tree)
        if cls is None:
            raise SkipPatch(f"{path} has no mamba cache class with {ALLOC}()")
        if self.is_applied(path, tree):
            return tree
        kind = cls.name.value
        alloc = exactly_one(methods(cls, ALLOC), f"{kind}.{ALLOC}()", path)
        donating = exactly_one(methods(cls, DONATING[kind]), f"{kind}.{DONATING[kind]}()", path)

        where = f"{kind}.{DONATING[kind]}()"
        sites = statements(donating, _ASSIGNS_FROM_ALLOC)
        if not sites:
            raise AnchorError(f"{path}: anchor not found: {where}: <name> = self.{ALLOC}(...)")
        if len(m.findall(donating, _CALLS_ALLOC)) != len(sites):
            # A call in another shape (nested in an expression) would escape the guard.
            raise AnchorError(f"{path}: anchor is ambiguous: {where} calls self.{ALLOC}() outside `<name> = self.{ALLOC}(...)`")

        new_donating = donating
        for site in sites:
            name = m.extract(site, _ASSIGNS_FROM_ALLOC)["name"].value  # type: ignore[index,union-attr]
            retargeted = site.deep_replace(_only(m.findall(site, _CALLS_ALLOC)).func.attr, cst.Name(TRY_ALLOC))  # type: ignore[attr-defined]
            guard = parse_statements(_GUARD_SOURCE.format(name=name, skip=SKIP, value=SKIP_RETURN[kind]))
            new_donating = replace_statement(new_donating, site, [retargeted, *guard])

        # Returns Optional now; drop the Tensor annotation rather than import Optional.
        try_alloc = _without_assert(alloc, path).with_changes(name=cst.Name(TRY_ALLOC), returns=None)
        skip = parse_statements(_SKIP_SOURCE, blank_lines_before=1)
        new_cls = replace_member(cls, donating, new_donating)
        body = list(new_cls.body.body)
        position = body.index(alloc) + 1
        body[position:position] = [try_alloc.with_changes(leading_lines=[cst.EmptyLine(indent=False)]), *skip]
        new_cls = new_cls.with_changes(body=new_cls.body.with_changes(body=body))
        return replace_member(tree, cls, new_cls)


def _only(found):
    (single,) = found
    return single


def _without_assert(alloc: cst.FunctionDef, path: str) -> cst.FunctionDef:
    """`_alloc_mamba_slot` with its 'Can not alloc mamba cache' assert removed: returns None."""
    assertion = exactly_one(statements(alloc, _ASSERTS_SLOT), f'{ALLOC}(): assert ..., "Can not alloc mamba cache"', path)
    docstring = '"""patchkit mamba-slot-graceful: like _alloc_mamba_slot, but None when no slot can be had."""'
    body = list(alloc.body.body)
    if body and m.matches(body[0], m.SimpleStatementLine(body=[m.Expr(value=m.SimpleString())])):
        body[0] = body[0].with_changes(body=[cst.Expr(cst.parse_expression(docstring))])
    stripped = alloc.with_changes(body=alloc.body.with_changes(body=body))
    return replace_statement(stripped, assertion, [])
