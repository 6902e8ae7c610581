"""mamba-slot-graceful: skip a prefix donation (or its int8 checkpoint) when no slot can be had,
instead of asserting and killing the scheduler.

Which call sites change, and why:
- Donations: every `self._alloc_mamba_slot(...)` inside the function that donates a chunked
  request's prefix to the radix cache (`prepare_for_caching_req` of the unified MambaComponent,
  `cache_unfinished_req` of the legacy MambaRadixCache). The failing allocation is the first thing
  taken, so nothing needs giving back; the unified path returns 0 (callers read `<= 0` as "skip
  insert" and then give back nothing, since `insert_params.mamba_value` stays None), the legacy path
  takes its own `_skip_cache_unfinished_req()` exit. The request goes on; only that prefix is not
  cached.
- The int8 checkpoint of a donation (`--enable-int8-mamba-checkpoint`, 0.5.14+:
  `x = self._commit_int8_checkpoint(...)` in the same functions, whose `_alloc_int8_ckpt_slot`
  asserts "Can not alloc int8 mamba checkpoint slot"): the donation is skipped the same way, at the
  end of the block that holds the commit, so the statements the release runs after it (giving back
  the ping-pong slot it swapped out) still run. The swap itself needs no undoing: a donation that
  succeeds gives that slot back too, and the request keeps the fresh slot in both cases.
- The int8 checkpoint of a finished request (unified `prepare_for_caching_req`, `is_finished`):
  skipped (`return 0`, nothing inserted) only where the release's finished branch already returns
  0 itself (0.5.22+: no checkpoint to donate), which shows its callers give everything back on
  that path; elsewhere it keeps the assert.
- The external cache linker's load (`build_external_linker_transfer`, phase LOAD, 0.5.23): no slot
  -> the mamba transfer is None, which the linker reads as "abort this load" (it frees what the
  other components took and the request recomputes the prefix).
- Not changed, and why:
  - the copy-on-write of a matched prefix (`finalize_match_result_in_cache`, the legacy and
    HiCache `_match_post_processor`): the matched KV prefix is already chosen for the request,
    which cannot run it without its own state slot; degrading means rebuilding the release's match
    result and its locks as a miss, which no statement of the release does;
  - HiCache's `prepare_load_back` ("Cannot alloc mamba for load_back"): its result has no way to
    refuse the load, and `load_back` goes on to copy the host state into the request's slot;
  - the legacy `cache_finished_req`'s int8 checkpoint: the release has freed the KV tail and
    computed the insert by then, and has no exit that would give the rest back;
  - the MLX backend's auxiliary cache (Apple silicon, not a CUDA server).
- `_alloc_mamba_slot` and `_alloc_int8_ckpt_slot` keep their asserts for those callers; the sites
  above call twins, derived from them mechanically (same eviction, whatever the release does),
  that return None (the checkpoint twin of `_commit_int8_checkpoint` returns None when its slot is).
- Logged once per request, not once per chunk.
- Runtime switch: `SGLANG_PATCHKIT_DISABLE=mamba-slot-graceful` makes the twins keep the
  release's own asserts (their test `or` the switch), so a failed allocation asserts and kills the
  scheduler as the release does. Read at call time, and only when the allocation failed (the
  `or` is not evaluated while a slot is had), so the hot path pays nothing.
"""

from __future__ import annotations

import libcst as cst
import libcst.matchers as m

from patchkit.anchor import Anchor
from patchkit.edits import edit, prepend_to_block
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
INT8_ALLOC = "_alloc_int8_ckpt_slot"
TRY_INT8_ALLOC = "_patchkit_try_alloc_int8_ckpt_slot"
INT8_COMMIT = "_commit_int8_checkpoint"
TRY_INT8_COMMIT = "_patchkit_try_commit_int8_checkpoint"
LINKER = "build_external_linker_transfer"
SKIP = "_patchkit_skip_mamba_donation"
SLOT_MESSAGE = "Can not alloc mamba cache"
INT8_MESSAGE = "Can not alloc int8 mamba checkpoint slot"
# The function that donates a prefix, per class.
DONATING = {"MambaComponent": "prepare_for_caching_req", "MambaRadixCache": "cache_unfinished_req"}
# What the donating function returns when it skips: the unified path's "skip insert", the
# legacy path's own early exit.
SKIP_RETURN = {"MambaComponent": "0", "MambaRadixCache": "_skip_cache_unfinished_req(req)"}


def _asserts(message: str) -> m.SimpleStatementLine:
    return m.SimpleStatementLine(body=[m.Assert(msg=string(message))])


def _self_call(name: str) -> m.Call:
    return m.Call(func=m.Attribute(value=m.Name("self"), attr=m.Name(name)))


def _assigns_from(name: str) -> m.SimpleStatementLine:
    """`<target> = self.<name>(...)`, the target (a name or an attribute) saved as "target"."""
    return m.SimpleStatementLine(body=[m.Assign(
        targets=[m.AssignTarget(target=m.SaveMatchedNode(m.Name() | m.Attribute(), "target"))], value=_self_call(name))])


_ASSERTS_SLOT = _asserts(SLOT_MESSAGE)
_ASSIGNS_FROM_ALLOC = _assigns_from(ALLOC)
_ASSIGNS_FROM_COMMIT = _assigns_from(INT8_COMMIT)
_ASSIGNS_FROM_TRY_COMMIT = _assigns_from(TRY_INT8_COMMIT)
_ASSIGNS_FROM_INT8_ALLOC = _assigns_from(INT8_ALLOC)
_CALLS_ALLOC = _self_call(ALLOC)
_CALLS_COMMIT = _self_call(INT8_COMMIT)
_BLOCK_WITH_COMMIT = m.IndentedBlock(body=[m.ZeroOrMore(), _ASSIGNS_FROM_COMMIT, m.ZeroOrMore()])
_IS_FINISHED = m.If(test=m.Name("is_finished"))
_RETURNS_ZERO = m.SimpleStatementLine(body=[m.Return(value=m.Integer("0"))])
# The legacy donation's last statement, which its own skip exit does not run: the tracked state's
# length forgotten (after a skipped int8 commit the slot that held that state is given back).
_FORGETS_TRACK = m.SimpleStatementLine(body=[m.Assign(
    targets=[m.AssignTarget(target=m.Attribute(attr=m.Name("mamba_last_track_seqlen")))], value=m.Name("None"))])

SKIP_METHOD = Snippet('''
    def {skip}(self, req):
        """patchkit mamba-slot-graceful: skip this donation; log once per request."""
        if not getattr(req, "_patchkit_mamba_donation_skipped", False):
            req._patchkit_mamba_donation_skipped = True
            import logging

            logging.getLogger(__name__).warning(
                "No free mamba cache or int8 checkpoint slot to cache the prefix of request %s; not "
                "caching it (patchkit mamba-slot-graceful). Consider a larger --max-mamba-cache-size.",
                getattr(req, "rid", "?"),
            )
''', blank_lines_before=1, skip=SKIP)

GUARD = Snippet("""
    if {name} is None:
        self.{skip}(req)
        return {value}
""", skip=SKIP)
# The linker's load without a slot: no transfer, which the linker reads as "abort this load".
LINKER_GUARD = Snippet("""
    if {name} is None:
        import logging

        logging.getLogger(__name__).warning(
            "No free mamba cache slot to load an external prefix; recomputing it (patchkit mamba-slot-graceful)."
        )
        return None
""")
# The checkpoint twin's own exit when its slot could not be had.
NO_CKPT_SLOT = Snippet("""
    if {name} is None:
        return None
""")
_DOCSTRING = m.SimpleStatementLine(body=[m.Expr(value=m.SimpleString())])
# Either class, in whichever file holds it: its allocators, the methods this patch adds, its donating
# function and (MambaComponent) the linker's transfer builder.
CACHE_CLASSES = tuple(Anchor(cls, parts=(ALLOC, TRY_ALLOC, INT8_ALLOC, TRY_INT8_ALLOC, INT8_COMMIT, TRY_INT8_COMMIT, SKIP,
                                         donating, *((LINKER,) if cls == "MambaComponent" else ())),
                             watch=(ALLOC, INT8_ALLOC, donating))
                      for cls, donating in DONATING.items())
_CACHE_CLASS = m.ClassDef(name=m.OneOf(*(m.Name(kind) for kind in DONATING)))
_DONATING_FN = m.FunctionDef(name=m.OneOf(*(m.Name(fn) for fn in DONATING.values())))
_LINKER_FN = m.FunctionDef(name=m.Name(LINKER))
_TWIN_DOC = ('"""patchkit mamba-slot-graceful: like {name}, but None when no slot can be had '
             '(it asserts as {name} does when SGLANG_PATCHKIT_DISABLE lists mamba-slot-graceful)."""')
_COMMIT_TWIN_DOC = ('"""patchkit mamba-slot-graceful: like {name}, but None (nothing stored) when no '
                    'int8 checkpoint slot can be had."""')
# The assert's test, kept, or the switch: true (no assert) unless the patch is switched off.
_SWITCHED_ASSERT = on(ID)
_SIMPLE_TEST = m.Comparison() | m.Name() | m.Attribute() | m.Call() | m.UnaryOperation()


def _methods(cls: cst.ClassDef, name: str) -> list[cst.FunctionDef]:
    return methods(cls, name)


class MambaSlotGraceful(Patch):
    ID = ID
    TITLE = "Skip a prefix donation when no mamba slot is free instead of killing the server"
    RATIONALE = (
        "When chunked prefill donates a prefix to the radix cache and no mamba state slot (or, with "
        "--enable-int8-mamba-checkpoint, no int8 checkpoint slot) can be freed, SGLang asserts 'Can not "
        "alloc mamba cache' / 'Can not alloc int8 mamba checkpoint slot', the scheduler dies and the whole "
        "server exits (2 x 60K concurrent prompts, 16 slots). The donation is skipped instead: the request "
        "goes on, that prefix is not cached, and it is logged once per request. A finished request's int8 "
        "checkpoint (where the release has a no-checkpoint exit) and an external-cache load are skipped "
        "the same way."
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
        (cls,) = found
        if bool(_methods(cls, INT8_ALLOC)) != bool(_methods(cls, INT8_COMMIT)):
            raise AnchorError(f"{path}: anchor not found: {cls.name.value} has one of {INT8_ALLOC}() and {INT8_COMMIT}() without the other")

    def is_applied(self, path: str, tree: cst.Module) -> bool:
        # The try-alloc twins are derived from the release's own allocators (no snippet to compare
        # with), the skip method is this patch's snippet.
        return any(_methods(cls, TRY_ALLOC) and SKIP_METHOD.present_in(cls)
                   and (not _methods(cls, INT8_COMMIT) or (_methods(cls, TRY_INT8_COMMIT) and _methods(cls, TRY_INT8_ALLOC)))
                   for cls in self._classes(path, tree))

    def is_fixed_upstream(self, path: str, tree: cst.Module) -> bool:
        # Upstream's fix, by its shape: the allocations no longer assert (the int8 one included,
        # where the class has it) AND the donating function handles a failed allocation itself
        # (`if <slot> is None` after the call).
        for cls in self._classes(path, tree):
            if _methods(cls, TRY_ALLOC) or any(m.matches(s, _ASSERTS_SLOT | _asserts(INT8_MESSAGE))
                                               for name in (ALLOC, INT8_ALLOC) for fn in _methods(cls, name) for s in walk_statements(fn)):
                continue
            for fn in _methods(cls, DONATING[cls.name.value]):
                targets = [_target(s, _ASSIGNS_FROM_ALLOC) for s in walk_statements(fn) if m.matches(s, _ASSIGNS_FROM_ALLOC)]
                names = [target.value for target in targets if isinstance(target, cst.Name)]
                if names and any(m.matches(s, m.If(test=_is_none(name))) for name in names for s in walk_statements(fn)):
                    return True
        return False

    # Which donating function the pass is in, and what it returns when it skips (None outside);
    # the int8 commits of that function the patch guards.
    skip_return: str | None = None
    guarded_commits: tuple[cst.CSTNode, ...] = ()
    forgets_track: tuple[cst.BaseStatement, ...] = ()

    @m.call_if_inside(_CACHE_CLASS)
    @m.visit(_DONATING_FN)
    def enter_donating(self, node: cst.FunctionDef) -> None:
        kind = self.kind
        self.skip_return = SKIP_RETURN[kind] if node.name.value == DONATING[kind] else None
        self.guarded_commits = ()
        if self.skip_return is None:
            return
        for shape, call, name in ((_ASSIGNS_FROM_ALLOC, _CALLS_ALLOC, ALLOC), (_ASSIGNS_FROM_COMMIT, _CALLS_COMMIT, INT8_COMMIT)):
            sites = [s for s in walk_statements(node) if m.matches(s, shape)]
            if sites and len(m.findall(node, call)) != len(sites):
                # A call in another shape (nested in an expression) would escape the guard.
                raise AnchorError(f"anchor is ambiguous: {kind}.{DONATING[kind]}() calls self.{name}() outside `<target> = self.{name}(...)`")
        self.guarded_commits = tuple(_commits_to_guard(node))
        if self.guarded_commits and not self.has_commit:
            raise AnchorError(f"anchor not found: {kind}.{DONATING[kind]}() calls self.{INT8_COMMIT}(), which {kind} does not define")
        assert isinstance(node.body, cst.IndentedBlock)
        self.forgets_track = tuple(s for s in node.body.body if m.matches(s, _FORGETS_TRACK))

    @m.visit(_CACHE_CLASS)
    def enter_cache_class(self, node: cst.ClassDef) -> None:
        self.kind = node.name.value
        self.has_commit = bool(_methods(node, INT8_COMMIT))

    @m.call_if_inside(_CACHE_CLASS)
    @m.call_if_inside(_DONATING_FN)
    @edit(_ASSIGNS_FROM_ALLOC, f"the donating function ({' or '.join(f'{k}.{f}()' for k, f in DONATING.items())}): <name> = self.{ALLOC}(...)",
          times="at least once")
    def guard_site(
        self, original_node: cst.SimpleStatementLine, updated_node: cst.SimpleStatementLine
    ) -> cst.SimpleStatementLine | cst.FlattenSentinel[cst.BaseStatement]:
        if self.skip_return is None:
            return updated_node  # a function of that name in the other cache class
        return cst.FlattenSentinel([_retarget(updated_node, ALLOC, TRY_ALLOC),
                                    *GUARD.fill(name=_target(updated_node, _ASSIGNS_FROM_ALLOC), value=self.skip_return)])

    @m.call_if_inside(_CACHE_CLASS)
    @m.call_if_inside(_DONATING_FN)
    @edit(_ASSIGNS_FROM_COMMIT, f"the donating function: <target> = self.{INT8_COMMIT}(...)", times="any")
    def retarget_commit(self, original_node: cst.SimpleStatementLine, updated_node: cst.SimpleStatementLine) -> cst.SimpleStatementLine:
        if self.skip_return is None or not any(original_node is site for site in self.guarded_commits):
            return updated_node  # the finished branch of a release that has no exit there: keeps the assert
        return _retarget(updated_node, INT8_COMMIT, TRY_INT8_COMMIT)

    @m.call_if_inside(_CACHE_CLASS)
    @m.call_if_inside(_DONATING_FN)
    @edit(_BLOCK_WITH_COMMIT, f"the block of self.{INT8_COMMIT}(...)", times="any")
    def guard_commit_block(self, original_node: cst.IndentedBlock, updated_node: cst.IndentedBlock) -> cst.IndentedBlock:
        # At the block's end: what the release does after the commit (giving back the ping-pong
        # slot it swapped out) still runs. None of it may read the checkpoint.
        body = list(updated_node.body)
        found = [i for i, stmt in enumerate(body) if m.matches(stmt, _ASSIGNS_FROM_TRY_COMMIT)]
        if self.skip_return is None or not found:
            return updated_node  # a commit left as the release has it (retarget_commit says which)
        (index,) = found
        target = _target(body[index], _ASSIGNS_FROM_TRY_COMMIT)
        reads: m.MatchIfTrue[cst.CSTNode] = m.MatchIfTrue(lambda node: isinstance(node, type(target)) and node.deep_equals(target))
        if any(m.findall(stmt, reads) for stmt in body[index + 1:]):
            raise AnchorError(f"anchor is ambiguous: the statements after self.{INT8_COMMIT}() in its block read {cst.Module(body=[]).code_for_node(target)}")
        # The unified component's cleanup forgets the tracked length after a skip; the legacy exit
        # does not, so its own statement that does is run first (the state's slot is gone).
        (guard,) = GUARD.fill(name=target, value=self.skip_return)
        return updated_node.with_changes(body=[*body, prepend_to_block(guard, list(self.forgets_track))])

    @m.call_if_inside(_CACHE_CLASS)
    @m.call_if_inside(_LINKER_FN)
    @edit(_ASSIGNS_FROM_ALLOC, f"MambaComponent.{LINKER}(): <transfer>.device_indices = self.{ALLOC}()", times="any")
    def guard_linker_load(
        self, original_node: cst.SimpleStatementLine, updated_node: cst.SimpleStatementLine
    ) -> cst.FlattenSentinel[cst.BaseStatement]:
        return cst.FlattenSentinel([_retarget(updated_node, ALLOC, TRY_ALLOC),
                                    *LINKER_GUARD.fill(name=_target(updated_node, _ASSIGNS_FROM_ALLOC))])

    @m.call_if_inside(_CACHE_CLASS)
    @edit(m.FunctionDef(name=m.Name(ALLOC)), f"{ALLOC}()")
    def add_try_alloc(self, original_node: cst.FunctionDef, updated_node: cst.FunctionDef) -> cst.FlattenSentinel[cst.BaseStatement]:
        return cst.FlattenSentinel([updated_node, _twin(updated_node, SLOT_MESSAGE, TRY_ALLOC), *SKIP_METHOD.fill()])

    @m.call_if_inside(_CACHE_CLASS)
    @edit(m.FunctionDef(name=m.Name(INT8_ALLOC)), f"{INT8_ALLOC}()", times="any")
    def add_try_int8_alloc(self, original_node: cst.FunctionDef, updated_node: cst.FunctionDef) -> cst.FlattenSentinel[cst.BaseStatement]:
        return cst.FlattenSentinel([updated_node, _twin(updated_node, INT8_MESSAGE, TRY_INT8_ALLOC)])

    @m.call_if_inside(_CACHE_CLASS)
    @edit(m.FunctionDef(name=m.Name(INT8_COMMIT)), f"{INT8_COMMIT}()", times="any")
    def add_try_commit(self, original_node: cst.FunctionDef, updated_node: cst.FunctionDef) -> cst.FlattenSentinel[cst.BaseStatement]:
        return cst.FlattenSentinel([updated_node, _commit_twin(updated_node)])


def _target(site: cst.CSTNode, shape: m.SimpleStatementLine) -> cst.BaseExpression:
    target = capture(site, shape, "target")
    assert isinstance(target, (cst.Name, cst.Attribute))
    return target


def _retarget(line: cst.SimpleStatementLine, name: str, twin: str) -> cst.SimpleStatementLine:
    """The assignment with its `self.<name>(...)` call made a call of the twin."""
    (call,) = m.findall(line, _self_call(name))
    assert isinstance(call, cst.Call) and isinstance(call.func, cst.Attribute)
    retargeted = line.deep_replace(call.func.attr, cst.Name(twin))
    assert isinstance(retargeted, cst.SimpleStatementLine)
    return retargeted


def _commits_to_guard(donating: cst.FunctionDef) -> list[cst.CSTNode]:
    """The int8 commits of a donating function the patch guards: those of a donation, and those of
    a finished request where the release's finished branch has an exit of its own (`return 0`)."""
    finished = [s for s in walk_statements(donating) if isinstance(s, cst.If) and m.matches(s, _IS_FINISHED)]
    in_finished = {id(s) for branch in finished for s in walk_statements(branch.body)}
    finished_exits = any(m.matches(s, _RETURNS_ZERO) for branch in finished for s in walk_statements(branch.body))
    return [s for s in walk_statements(donating)
            if m.matches(s, _ASSIGNS_FROM_COMMIT) and (id(s) not in in_finished or finished_exits)]


def _is_none(name: str) -> m.Comparison | m.UnaryOperation | m.OneOf[m.Comparison | m.UnaryOperation]:
    return m.Comparison(left=m.Name(name), comparisons=[m.ComparisonTarget(operator=m.Is(), comparator=m.Name("None"))]) | m.UnaryOperation(
        operator=m.Not(), expression=m.Name(name))


def _with_doc(fn: cst.FunctionDef, name: str, doc: str) -> cst.FunctionDef:
    """`fn` renamed, its docstring (where it has one) replaced, its annotation dropped (Optional now)."""
    assert isinstance(fn.body, cst.IndentedBlock)
    body = list(fn.body.body)
    if body and m.matches(body[0], _DOCSTRING):
        body[0] = body[0].with_changes(body=[cst.Expr(cst.parse_expression(doc))])
    return fn.with_changes(body=fn.body.with_changes(body=body), name=cst.Name(name), returns=None,
                           leading_lines=[cst.EmptyLine(indent=False)])


def _twin(alloc: cst.FunctionDef, message: str, name: str) -> cst.FunctionDef:
    """An allocator renamed, with its `message` assert holding only when the patch is switched off
    (`assert <test> or <switch on>, ...`: it returns None otherwise), its docstring replaced and its
    Tensor annotation dropped (Optional now)."""
    asserts = m.findall(alloc, _asserts(message))
    if len(asserts) != 1:
        what = "anchor not found" if not asserts else f"anchor is ambiguous ({len(asserts)} matches)"
        raise AnchorError(f'{what}: {alloc.name.value}(): assert ..., "{message}"')
    line = asserts[0]
    assert isinstance(line, cst.SimpleStatementLine) and isinstance(line.body[0], cst.Assert)
    check = line.body[0]
    test = check.test if m.matches(check.test, _SIMPLE_TEST) else check.test.with_changes(
        lpar=[cst.LeftParen()], rpar=[cst.RightParen()])
    switched = check.with_changes(test=cst.BooleanOperation(
        left=test, operator=cst.Or(), right=cst.parse_expression(_SWITCHED_ASSERT)))
    stripped = alloc.deep_replace(check, switched)
    assert isinstance(stripped, cst.FunctionDef)
    return _with_doc(stripped, name, _TWIN_DOC.format(name=alloc.name.value))


def _commit_twin(commit: cst.FunctionDef) -> cst.FunctionDef:
    """`_commit_int8_checkpoint` renamed, taking its slot from the int8 allocator's twin and
    returning None, before storing anything, when that gives none."""
    assert isinstance(commit.body, cst.IndentedBlock)
    body = list(commit.body.body)
    sites = [i for i, stmt in enumerate(body) if m.matches(stmt, _ASSIGNS_FROM_INT8_ALLOC)]
    if len(sites) != 1 or len(m.findall(commit, _self_call(INT8_ALLOC))) != 1:
        what = "anchor not found" if not sites else "anchor is ambiguous"
        raise AnchorError(f"{what}: {INT8_COMMIT}(): <slot> = self.{INT8_ALLOC}(), in its body")
    (index,) = sites
    site = body[index]
    assert isinstance(site, cst.SimpleStatementLine)
    body[index:index + 1] = [_retarget(site, INT8_ALLOC, TRY_INT8_ALLOC), *NO_CKPT_SLOT.fill(name=_target(site, _ASSIGNS_FROM_INT8_ALLOC))]
    twin = commit.with_changes(body=commit.body.with_changes(body=body))
    return _with_doc(twin, TRY_INT8_COMMIT, _COMMIT_TWIN_DOC.format(name=INT8_COMMIT))
