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
- Runtime switch: `SGLANG_PATCHKIT_DISABLE=mamba-slot-graceful` makes the twin keep the
  release's own assert (its test `or` the switch), so a failed donation asserts and kills the
  scheduler as the release does. Read at call time, and only when the allocation failed (the
  `or` is not evaluated while a slot is had), so the hot path pays nothing.
"""

from __future__ import annotations

import libcst as cst
import libcst.matchers as m

from patchkit.anchor import Anchor
from patchkit.edits import edit
from patchkit.errors import AnchorError
from patchkit.launch_trigger import Trigger
from patchkit.matchers import capture, methods, string
from patchkit.patch import Patch, SkipPatch
from patchkit.runtime_switch import declared, on
from patchkit.template import Snippet, walk_statements

ID = "mamba-slot-graceful"
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

SKIP_METHOD = Snippet('''
    def {skip}(self, req):
        """patchkit mamba-slot-graceful: skip this donation; log once per request."""
        if not getattr(req, "_patchkit_mamba_donation_skipped", False):
            req._patchkit_mamba_donation_skipped = True
            import logging

            logging.getLogger(__name__).warning(
                "No free mamba cache slot to donate the prefix of request %s; not caching it "
                "(patchkit mamba-slot-graceful). Consider a larger --max-mamba-cache-size.",
                getattr(req, "rid", "?"),
            )
''', blank_lines_before=1, skip=SKIP)

GUARD = Snippet("""
    if {name} is None:
        self.{skip}(req)
        return {value}
""", skip=SKIP)
_DOCSTRING = m.SimpleStatementLine(body=[m.Expr(value=m.SimpleString())])
# Either class, in whichever file holds it: its allocator, the methods this patch adds and its donating function.
CACHE_CLASSES = tuple(Anchor(cls, parts=(ALLOC, TRY_ALLOC, SKIP, donating), watch=(ALLOC, donating))
                      for cls, donating in DONATING.items())
_CACHE_CLASS = m.ClassDef(name=m.OneOf(*(m.Name(kind) for kind in DONATING)))
_DONATING_FN = m.FunctionDef(name=m.OneOf(*(m.Name(fn) for fn in DONATING.values())))
_TRY_ALLOC_DOC = ('"""patchkit mamba-slot-graceful: like _alloc_mamba_slot, but None when no slot can be had '
                  '(it asserts as _alloc_mamba_slot does when SGLANG_PATCHKIT_DISABLE lists mamba-slot-graceful)."""')
# The assert's test, kept, or the switch: true (no assert) unless the patch is switched off.
_SWITCHED_ASSERT = on(ID)
_SIMPLE_TEST = m.Comparison() | m.Name() | m.Attribute() | m.Call() | m.UnaryOperation()


def _methods(cls: cst.ClassDef, name: str) -> list[cst.FunctionDef]:
    return methods(cls, name)


class MambaSlotGraceful(Patch):
    ID = ID
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
    LAUNCH = Trigger(level="warning", model=("hybrid-gdn",),
                     flags=("!disable_radix_cache", "max_running_requests>1"),
                     why="long concurrent chunked prefills can run the state pool dry and crash the scheduler")
    TARGETS = (*COMPONENT_PATHS, LEGACY)
    ANCHORS = {path: CACHE_CLASSES for path in TARGETS}
    RUNTIME_SWITCH = declared(ID)

    def _classes(self, path: str, tree: cst.Module) -> list[cst.ClassDef]:
        return [cls for cls in self.scope_classes(path, tree) if _methods(cls, ALLOC)]

    def check(self, path: str, tree: cst.Module) -> None:
        found = self._classes(path, tree)
        if not found:
            raise SkipPatch(f"{path} has no mamba cache class with {ALLOC}()")
        if len(found) > 1:
            raise AnchorError(f"{path}: anchor is ambiguous ({len(found)} matches): class with {ALLOC}() ({' or '.join(DONATING)})")

    def is_applied(self, path: str, tree: cst.Module) -> bool:
        # The try-alloc twin is derived from the release's own _alloc_mamba_slot (no snippet to
        # compare with), the skip method is this patch's snippet.
        return any(_methods(cls, TRY_ALLOC) and SKIP_METHOD.present_in(cls) for cls in self._classes(path, tree))

    def is_fixed_upstream(self, path: str, tree: cst.Module) -> bool:
        # Upstream's fix, by its shape: the allocation no longer asserts AND the donating
        # function handles a failed allocation itself (`if <slot> is None` after the call).
        for cls in self._classes(path, tree):
            if _methods(cls, TRY_ALLOC) or any(m.matches(s, _ASSERTS_SLOT) for fn in _methods(cls, ALLOC) for s in walk_statements(fn)):
                continue
            for fn in _methods(cls, DONATING[cls.name.value]):
                names = [_assigned_name(s) for s in walk_statements(fn) if m.matches(s, _ASSIGNS_FROM_ALLOC)]
                if names and any(m.matches(s, m.If(test=_is_none(name))) for name in names for s in walk_statements(fn)):
                    return True
        return False

    # Which donating function the pass is in, and what it returns when it skips (None outside).
    skip_return: str | None = None

    @m.call_if_inside(_CACHE_CLASS)
    @m.visit(_DONATING_FN)
    def enter_donating(self, node: cst.FunctionDef) -> None:
        kind = self.kind
        self.skip_return = SKIP_RETURN[kind] if node.name.value == DONATING[kind] else None
        sites = [s for s in walk_statements(node) if m.matches(s, _ASSIGNS_FROM_ALLOC)]
        if self.skip_return is not None and sites and len(m.findall(node, _CALLS_ALLOC)) != len(sites):
            # A call in another shape (nested in an expression) would escape the guard.
            raise AnchorError(f"anchor is ambiguous: {kind}.{DONATING[kind]}() calls self.{ALLOC}() outside `<name> = self.{ALLOC}(...)`")

    @m.visit(_CACHE_CLASS)
    def enter_cache_class(self, node: cst.ClassDef) -> None:
        self.kind = node.name.value

    @m.call_if_inside(_CACHE_CLASS)
    @m.call_if_inside(_DONATING_FN)
    @edit(_ASSIGNS_FROM_ALLOC, f"the donating function ({' or '.join(f'{k}.{f}()' for k, f in DONATING.items())}): <name> = self.{ALLOC}(...)",
          times="at least once")
    def guard_site(
        self, original_node: cst.SimpleStatementLine, updated_node: cst.SimpleStatementLine
    ) -> cst.SimpleStatementLine | cst.FlattenSentinel[cst.BaseStatement]:
        if self.skip_return is None:
            return updated_node  # a function of that name in the other cache class
        (call,) = m.findall(updated_node, _CALLS_ALLOC)
        assert isinstance(call, cst.Call) and isinstance(call.func, cst.Attribute)
        retargeted = updated_node.deep_replace(call.func.attr, cst.Name(TRY_ALLOC))
        assert isinstance(retargeted, cst.SimpleStatementLine)
        return cst.FlattenSentinel([retargeted, *GUARD.fill(name=_assigned_name(updated_node), value=self.skip_return)])

    @m.call_if_inside(_CACHE_CLASS)
    @edit(m.FunctionDef(name=m.Name(ALLOC)), f"{ALLOC}()")
    def add_try_alloc(self, original_node: cst.FunctionDef, updated_node: cst.FunctionDef) -> cst.FlattenSentinel[cst.BaseStatement]:
        return cst.FlattenSentinel([updated_node, _try_alloc(updated_node), *SKIP_METHOD.fill()])


def _assigned_name(site: cst.CSTNode) -> str:
    name = capture(site, _ASSIGNS_FROM_ALLOC, "name")
    assert isinstance(name, cst.Name)
    return name.value


def _is_none(name: str) -> m.Comparison | m.UnaryOperation | m.OneOf[m.Comparison | m.UnaryOperation]:
    return m.Comparison(left=m.Name(name), comparisons=[m.ComparisonTarget(operator=m.Is(), comparator=m.Name("None"))]) | m.UnaryOperation(
        operator=m.Not(), expression=m.Name(name))


def _try_alloc(alloc: cst.FunctionDef) -> cst.FunctionDef:
    """`_alloc_mamba_slot` renamed, with its 'Can not alloc mamba cache' assert holding only when
    the patch is switched off (`assert <test> or <switch on>, ...`: it returns None otherwise),
    its docstring replaced and its Tensor annotation dropped (Optional now)."""
    asserts = m.findall(alloc, _ASSERTS_SLOT)
    if len(asserts) != 1:
        what = "anchor not found" if not asserts else f"anchor is ambiguous ({len(asserts)} matches)"
        raise AnchorError(f'{what}: {ALLOC}(): assert ..., "Can not alloc mamba cache"')
    line = asserts[0]
    assert isinstance(line, cst.SimpleStatementLine) and isinstance(line.body[0], cst.Assert)
    check = line.body[0]
    test = check.test if m.matches(check.test, _SIMPLE_TEST) else check.test.with_changes(
        lpar=[cst.LeftParen()], rpar=[cst.RightParen()])
    switched = check.with_changes(test=cst.BooleanOperation(
        left=test, operator=cst.Or(), right=cst.parse_expression(_SWITCHED_ASSERT)))
    stripped = alloc.deep_replace(check, switched)
    assert isinstance(stripped, cst.FunctionDef) and isinstance(stripped.body, cst.IndentedBlock)
    body = list(stripped.body.body)
    if body and m.matches(body[0], _DOCSTRING):
        body[0] = body[0].with_changes(body=[cst.Expr(cst.parse_expression(_TRY_ALLOC_DOC))])
    return stripped.with_changes(
        body=stripped.body.with_changes(body=body), name=cst.Name(TRY_ALLOC), returns=None,
        leading_lines=[cst.EmptyLine(indent=False)],
    )
