"""spec-mamba-lazy-buffer: with speculative decoding on a hybrid (Mamba/GDN) model, the default
mamba radix-cache strategy `auto` resolves to `extra_buffer_lazy` instead of `extra_buffer`.

The field report (sglang#36537, Qwen3.8-Flash-Next with NEXTN): with `extra_buffer`, the default,
the accept length falls to 1.00 and stays there until a restart once the KV pool is about 60%
full (92% of samples broken at KV usage >= 0.6); with `extra_buffer_lazy` none broke, at 41.3
instead of 43.8 tok/s. The reporter's reading: `extra_buffer` materialises the Mamba state before
the verify step knows how many draft tokens were accepted, and once LRU eviction recycles a node
carrying that state the draft and the target desynchronise; the lazy strategy defers it.

What changes: `_mamba_radix_cache_resolution` (arg_groups/overrides.py), where `auto` becomes
`extra_buffer`, picks `extra_buffer_lazy` instead when a speculative algorithm is set and the
release can run lazy there: not with PD disaggregation (the validator refuses it), only with the
overlap scheduler on (the KV-cache configurator asserts "Lazy extra buffer requires overlap
schedule"), a single pipeline stage (a later pass turns overlap off for PP > 1) and a CUDA device
(the CPU path turns overlap off for speculative decoding). An explicit `extra_buffer` is left as
the user asked (`patchkit doctor` warns about it).

Where it is not needed: releases whose `auto` never becomes extra_buffer (0.5.10-0.5.13), and
releases whose own extra_buffer validator refuses extra_buffer_lazy with speculative decoding
(0.5.14-0.5.16 with any draft, 0.5.17 with DFLASH): read from that validator (`CONSULTS`,
`precondition`), never from a version list.

Runtime switch: `SGLANG_PATCHKIT_DISABLE=spec-mamba-lazy-buffer` leaves `auto` at extra_buffer,
read where the strategy is resolved (start-up).
"""

from __future__ import annotations

import ast
import textwrap
from collections.abc import Callable, Iterator

import libcst as cst
import libcst.matchers as m

from patchkit.edits import edit
from patchkit.errors import AnchorError
from patchkit.launch_trigger import Trigger
from patchkit.matchers import string
from patchkit.patch import Patch, SkipPatch
from patchkit.runtime_switch import declared, on
from patchkit.template import Snippet, walk_statements

ID = "spec-mamba-lazy-buffer"
OVERRIDES = "sglang/srt/arg_groups/overrides.py"
RESOLUTION = "_mamba_radix_cache_resolution"
# Where the release validates an extra_buffer strategy (its lazy rules among them), per file.
VALIDATORS = {
    "sglang/srt/arg_groups/mamba_hook.py": (None, "validate_mamba_extra_buffer"),  # 0.5.19+
    "sglang/srt/server_args.py": ("ServerArgs", "_validate_mamba_extra_buffer"),  # <= 0.5.18
}
STRATEGY = "mamba_radix_cache_strategy"
LAZY = "extra_buffer_lazy"

TO_LAZY = Snippet("""
    if (
        {view}.speculative_algorithm is not None
        and {view}.disaggregation_mode == "null"
        and not {view}.disable_overlap_schedule
        and {view}.pp_size == 1
        and {view}.device == "cuda"
        and {on}
    ):
        # patchkit spec-mamba-lazy-buffer: speculative decoding with the eager extra buffer loses
        # its accept length once the radix cache evicts (sglang#36537); the lazy buffer does not.
        {declared}["{key}"] = "{lazy}"
""", on=on(ID), key=STRATEGY, lazy=LAZY)

_RESOLUTION_FN = m.FunctionDef(name=m.Name(RESOLUTION))
_AUTO_BRANCH = m.If(test=m.Comparison(
    left=m.Attribute(value=m.SaveMatchedNode(m.Name(), "view"), attr=m.Name(STRATEGY)),
    comparisons=[m.ComparisonTarget(operator=m.Equal(), comparator=string("auto"))]))


def _sets_strategy(value: m.BaseExpression | m.MatchIfTrue[cst.BaseExpression]) -> m.SimpleStatementLine:
    """`<declared>["mamba_radix_cache_strategy"] = <value>`, the dict saved as "declared"."""
    return m.SimpleStatementLine(body=[m.Assign(
        targets=[m.AssignTarget(target=m.Subscript(
            value=m.SaveMatchedNode(m.Name(), "declared"),
            slice=[m.SubscriptElement(slice=m.Index(value=string(STRATEGY)))]))],
        value=value)])


_TO_EXTRA_BUFFER = _sets_strategy(string("extra_buffer"))
# Upstream's own choice of the lazy buffer: the strategy set to a value that names it.
_TO_LAZY = _sets_strategy(m.MatchIfTrue[cst.BaseExpression](lambda value: bool(m.findall(value, string(LAZY)))))


def _resolution(tree: cst.Module) -> list[cst.FunctionDef]:
    return [node for node in tree.body if isinstance(node, cst.FunctionDef) and m.matches(node, _RESOLUTION_FN)]


class SpecMambaLazyBuffer(Patch):
    ID = ID
    TITLE = "Speculative decoding on a hybrid model resolves the mamba cache strategy to extra_buffer_lazy"
    RATIONALE = (
        "With NEXTN/MTP/EAGLE on a hybrid (GDN + attention) model the default mamba radix-cache strategy "
        "resolves to extra_buffer, and once the KV pool is about 60% full the accept length falls to 1.00 "
        "until a restart (sglang#36537: 92% of samples broken at KV usage >= 0.6; extra_buffer_lazy 0%, "
        "41.3 vs 43.8 tok/s). `auto` now resolves to extra_buffer_lazy under speculative decoding where "
        "the release runs it (no PD disaggregation, overlap scheduler on, one pipeline stage, CUDA)."
    )
    UPSTREAM = ("sgl-project/sglang#36537 (open; the extra_buffer_lazy measurements are in its comments)",
                "sgl-project/sglang#30437 (merged: speculative decoding with extra_buffer_lazy)")
    DROP_WHEN = "drop when auto resolves to extra_buffer_lazy under speculative decoding, or #36537 is fixed in extra_buffer"
    APPLIES_TO = ">=0.5.18"
    LAUNCH = Trigger(level="warning", model=("hybrid-gdn",), flags=("speculative_algorithm", "!disable_radix_cache"),
                     why="the default extra_buffer strategy loses the accept length once the radix cache evicts (sglang#36537)")
    TARGETS = (OVERRIDES,)
    CONSULTS = tuple(VALIDATORS)
    RUNTIME_SWITCH = declared(ID)
    PARTS = {OVERRIDES: (RESOLUTION,)}
    MARKS = {OVERRIDES: ((None, TO_LAZY),)}

    def check(self, path: str, tree: cst.Module) -> None:
        if not _resolution(tree):
            raise SkipPatch(f"{path} has no {RESOLUTION}()")

    def is_fixed_upstream(self, path: str, tree: cst.Module) -> bool:
        # Upstream's fix, by its shape: the resolution itself chooses extra_buffer_lazy somewhere.
        return any(not TO_LAZY.present_in(fn) and any(m.matches(s, _TO_LAZY) for s in walk_statements(fn))
                   for fn in _resolution(tree))

    def precondition(self, read: Callable[[str], bytes | None]) -> str | None:
        for rel, (cls, name) in VALIDATORS.items():
            data = read(rel)
            validator = None if data is None else _validator(data, cls, name)
            if validator is not None:
                where = f"{rel}: {f'{cls}.' if cls else ''}{name}()"
                return (f"the release refuses {LAZY} with speculative decoding ({where}), so auto stays extra_buffer"
                        if refuses_lazy_with_spec(validator) else None)
        names = " or ".join(f"{rel}: {f'{cls}.' if cls else ''}{name}()" for rel, (cls, name) in VALIDATORS.items())
        raise AnchorError(f"anchor not found: the release's extra_buffer validator ({names})")

    view_name: str | None = None

    @m.call_if_inside(_RESOLUTION_FN)
    @m.visit(_AUTO_BRANCH)
    def enter_auto_branch(self, node: cst.If) -> None:
        found = m.extract(node, _AUTO_BRANCH)
        view = None if found is None else found.get("view")
        self.view_name = view.value if isinstance(view, cst.Name) else None

    @m.call_if_inside(_RESOLUTION_FN)
    @m.call_if_inside(_AUTO_BRANCH)
    @edit(_TO_EXTRA_BUFFER, f'{RESOLUTION}(), where auto resolves: <declared>["{STRATEGY}"] = "extra_buffer"')
    def resolve_to_lazy(
        self, original_node: cst.SimpleStatementLine, updated_node: cst.SimpleStatementLine
    ) -> cst.FlattenSentinel[cst.BaseStatement]:
        found = m.extract(original_node, _TO_EXTRA_BUFFER)
        assert found is not None and isinstance(found["declared"], cst.Name) and self.view_name is not None
        return cst.FlattenSentinel([updated_node, *TO_LAZY.fill(view=self.view_name, declared=found["declared"].value)])


def _validator(data: bytes, cls: str | None, name: str) -> cst.FunctionDef | None:
    """The validator function, parsed alone (found with `ast`: the file is a large module)."""
    try:
        module = ast.parse(data)
    except SyntaxError:
        return None
    scope: list[ast.stmt] = module.body
    if cls is not None:
        classes = [node for node in module.body if isinstance(node, ast.ClassDef) and node.name == cls]
        scope = classes[0].body if len(classes) == 1 else []
    found = [node for node in scope if isinstance(node, ast.FunctionDef) and node.name == name]
    if len(found) != 1:
        return None
    lines = data.decode("utf-8").splitlines(keepends=True)
    start = found[0].decorator_list[0].lineno if found[0].decorator_list else found[0].lineno
    source = textwrap.dedent("".join(lines[start - 1:found[0].end_lineno]))
    parsed = cst.parse_module(source).body[0]
    return parsed if isinstance(parsed, cst.FunctionDef) else None


_MENTIONS_LAZY = string(LAZY) | m.Name("enable_mamba_extra_buffer_lazy") | m.Attribute(attr=m.Name("enable_mamba_extra_buffer_lazy"))
_SPECULATIVE_FIELD = m.Attribute(attr=m.Name(m.MatchIfTrue(lambda name: name.startswith("speculative_"))))


def refuses_lazy_with_spec(validator: cst.FunctionDef) -> bool:
    """Whether the validator asserts against extra_buffer_lazy under speculative decoding: an
    assert that mentions the lazy strategy (in its test or an enclosing `if`) and a speculative
    field (in the same, or through a name assigned from one: 0.5.17's `algo != "DFLASH"`)."""
    derived = {target.target.value for assign in m.findall(validator, m.Assign()) if isinstance(assign, cst.Assign)
               if m.findall(assign.value, _SPECULATIVE_FIELD)
               for target in assign.targets if isinstance(target.target, cst.Name)}
    speculative = _SPECULATIVE_FIELD | m.Name(m.MatchIfTrue(lambda name: name in derived))
    for check, conditions in _asserts(validator.body, ()):
        seen = (check.test, *conditions)
        if any(m.findall(node, _MENTIONS_LAZY) for node in seen) and any(m.findall(node, speculative) for node in seen):
            return True
    return False


def _asserts(block: cst.BaseSuite, conditions: tuple[cst.BaseExpression, ...]) -> Iterator[tuple[cst.Assert, tuple[cst.BaseExpression, ...]]]:
    """Every assert in `block`, with the tests of the `if`s it is inside."""
    statements = block.body if isinstance(block, cst.IndentedBlock) else ()
    for stmt in statements:
        if isinstance(stmt, cst.SimpleStatementLine):
            yield from ((small, conditions) for small in stmt.body if isinstance(small, cst.Assert))
        elif isinstance(stmt, cst.If):
            branch: cst.If | cst.Else | None = stmt
            while isinstance(branch, cst.If):
                yield from _asserts(branch.body, (*conditions, branch.test))
                branch = branch.orelse
            if isinstance(branch, cst.Else):
                yield from _asserts(branch.body, conditions)
        elif isinstance(stmt, (cst.For, cst.While, cst.With, cst.Try)):
            yield from _asserts(stmt.body, conditions)
