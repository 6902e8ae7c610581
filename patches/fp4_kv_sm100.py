"""fp4-kv-sm100: refuse an FP4 KV cache below SM 10.0 at start-up, naming fp8 as the remedy.

Below compute capability 10.0 (Ampere, Ada, Hopper) a GPU has no native FP4: an FP4 KV cache
(`--kv-cache-dtype fp4_e2m1` on 0.5.10-0.5.15, `fp4_mx_block16` from 0.5.16) runs, but every
decode step dequantizes it (flashinfer#4746 measured FP4 KV decode at 4.4-5.4x the time of FP8 KV
on SM 8.0). Where the release resolves the KV cache dtype to `torch.float4_e2m1fn_x2`
(`ModelRunner.configure_kv_cache_dtype` in model_runner.py on 0.5.10-0.5.15,
`configure_kv_cache_dtype` in mem_cache/kv_cache_dtype.py from 0.5.16) it now raises, in one line,
naming `--kv-cache-dtype fp8_e5m2` / `fp8_e4m3` and the switch. That is when the model runner is
set up, before any KV pool is allocated. Only CUDA devices below 10.0 are refused (SM 12.x has
native FP4; ROCm is left alone, as fp8-kv-triton-sm89 leaves it); nothing changes for any other
dtype, or where the release never makes an FP4 cache (a torch without float4_e2m1fn_x2 falls back
or refuses on its own).

What each release accepts: 0.5.10-0.5.15 take fp4_e2m1 (MXFP4); 0.5.16+ refuse fp4_e2m1 as
deprecated in the same resolver, refuse nvfp4 below SM100/SM120 in their argument checks
(server_args.py, arg_groups/kv_cache_hook.py from 0.5.19) and take fp4_mx_block16 on any GPU,
which is what this patch refuses there (nvfp4 shares its branch, so it would be refused too, were
it to get that far).

Runtime switch: `SGLANG_PATCHKIT_DISABLE=fp4-kv-sm100` lets the FP4 cache start as the release
does (half the KV bytes of FP8, at that decode cost), read where the dtype is resolved (once per
model runner, at start-up), only where the check would refuse.
"""

from __future__ import annotations

import libcst as cst
import libcst.matchers as m

from patchkit.anchor import Anchor
from patchkit.edits import edit
from patchkit.errors import AnchorError
from patchkit.matchers import string
from patchkit.patch import Patch, SkipPatch
from patchkit.runtime_switch import declared, on
from patchkit.template import Snippet, walk_statements

MODEL_RUNNER = "sglang/srt/model_executor/model_runner.py"
KV_CACHE_DTYPE = "sglang/srt/mem_cache/kv_cache_dtype.py"
RESOLVER = "configure_kv_cache_dtype"

REFUSAL = Snippet('''
    if (
        torch.cuda.is_available()
        and torch.version.hip is None
        and torch.cuda.get_device_capability() < (10, 0)
        and {on}
    ):
        # patchkit fp4-kv-sm100: no native FP4 below SM 10.0, every decode step dequantizes the cache
        requested = {requested}
        major, minor = torch.cuda.get_device_capability()
        raise ValueError(
            f"--kv-cache-dtype {{requested}} on SM{{major}}{{minor}}: below compute capability 10.0 there is no "
            f"native FP4, so every decode step dequantizes the KV cache, several times slower than an FP8 KV cache. "
            f"Use --kv-cache-dtype fp8_e5m2 (or fp8_e4m3), or set SGLANG_PATCHKIT_DISABLE=fp4-kv-sm100 to keep FP4."
        )
''', on=on("fp4-kv-sm100"))

# 0.5.10-0.5.15 resolve the dtype in the ModelRunner method; from 0.5.16 that method calls the
# module function in kv_cache_dtype.py, which does it.
RUNNER_CLASS = Anchor("ModelRunner", parts=(RESOLVER,), marks=(REFUSAL,), watch=(RESOLVER,))
_FP4_NAMES = ("fp4_e2m1", "fp4_mx_block16", "nvfp4")
_NAMES_FP4 = m.Comparison(comparisons=[m.ZeroOrMore(), m.ComparisonTarget(
    comparator=m.OneOf(*(string(name) for name in _FP4_NAMES))
    | m.Tuple(elements=[m.ZeroOrMore(), m.Element(m.OneOf(*(string(name) for name in _FP4_NAMES))), m.ZeroOrMore()])
), m.ZeroOrMore()])
# The branch of the resolver's if/elif chain that a requested FP4 dtype takes.
_FP4_BRANCH = m.If(test=_NAMES_FP4)
_FP4_DTYPE = m.Attribute(value=m.Name("torch"), attr=m.Name("float4_e2m1fn_x2"))
# `kv_cache_dtype = torch.float4_e2m1fn_x2` / `self.kv_cache_dtype = torch.float4_e2m1fn_x2`
_MAKES_FP4 = m.SimpleStatementLine(body=[m.Assign(value=_FP4_DTYPE)])
# Upstream's fix: the FP4 branch itself tests the device's capability and raises.
_BLACKWELL_TESTS = ("is_sm100", "is_sm120", "is_blackwell")
_READS_CAPABILITY = m.Call(func=m.Attribute(attr=m.Name("get_device_capability"))) | m.Name(
    m.MatchIfTrue(lambda name: name.startswith(_BLACKWELL_TESTS))
) | m.Attribute(attr=m.Name(m.MatchIfTrue(lambda name: name.startswith(_BLACKWELL_TESTS))))
_RAISES = m.SimpleStatementLine(body=[m.Raise()])


def _resolvers(path: str, tree: cst.Module) -> list[cst.FunctionDef]:
    if path == MODEL_RUNNER:
        return [fn for cls in RUNNER_CLASS.find(tree) for fn in cls.body.body
                if isinstance(fn, cst.FunctionDef) and fn.name.value == RESOLVER]
    return [fn for fn in tree.body if isinstance(fn, cst.FunctionDef) and fn.name.value == RESOLVER]


def _fp4_branches(resolver: cst.FunctionDef) -> list[cst.If]:
    """The branches for an FP4 dtype that make an FP4 cache (a branch that only raises, as
    0.5.16+'s deprecated fp4_e2m1, makes none)."""
    return [stmt for stmt in walk_statements(resolver) if m.matches(stmt, _FP4_BRANCH) and isinstance(stmt, cst.If)
            and any(m.matches(line, _MAKES_FP4) for line in walk_statements(stmt.body))]


def _refuses_below_sm100(branch: cst.If) -> bool:
    ours = {id(node) for refusal in REFUSAL.find(branch.body) for node in [refusal, *walk_statements(refusal)]}
    return any(
        isinstance(stmt, cst.If) and id(stmt) not in ours and bool(m.findall(stmt.test, _READS_CAPABILITY))
        and any(m.matches(line, _RAISES) for line in walk_statements(stmt))
        for stmt in walk_statements(branch.body)
    )


class Fp4KvSm100(Patch):
    ID = "fp4-kv-sm100"
    TITLE = "Refuse an FP4 KV cache below SM 10.0 at start-up, naming --kv-cache-dtype fp8_e5m2 / fp8_e4m3"
    RATIONALE = (
        "Below compute capability 10.0 there is no native FP4: an FP4 KV cache (--kv-cache-dtype fp4_e2m1 on "
        "0.5.10-0.5.15, fp4_mx_block16 from 0.5.16) runs, but every decode step dequantizes it, several times "
        "slower than an FP8 KV cache (flashinfer#4746: FP4 KV decode 4.4-5.4x FP8 KV on SM 8.0 before its change; "
        "a field report of 11.6 vs 48.8 tok/s on an RTX 3090 was not found upstream). Where the release resolves "
        "the KV dtype to FP4 it now raises at start-up naming --kv-cache-dtype fp8_e5m2 / fp8_e4m3, unless "
        "SGLANG_PATCHKIT_DISABLE=fp4-kv-sm100."
    )
    UPSTREAM = (
        "no upstream refusal up to 0.5.23 (nvfp4 alone is refused below SM100/SM120 from 0.5.16)",
        "flashinfer-ai/flashinfer#4746 (merged): NVFP4 KV decode 4.41-5.36x FP8 KV on SM 8.0 before it, "
        "1.52-1.72x after (split-KV still off for NVFP4)",
        "flashinfer-ai/flashinfer#4775 (open): NVFP4 KV prefill on SM80, repeated in-loop dequantization",
        "the 11.6 vs 48.8 tok/s field report (RTX 3090) was not found upstream",
    )
    DROP_WHEN = "drop when the release refuses an FP4 KV cache below SM 10.0 itself, or decodes it there as fast as FP8"
    APPLIES_TO = ">=0.5.10"
    STACK_AFTER = ("mtp-draft-kv-budget",)
    TARGETS = (MODEL_RUNNER, KV_CACHE_DTYPE)
    ANCHORS = {MODEL_RUNNER: (RUNNER_CLASS,)}
    RUNTIME_SWITCH = declared(ID)
    PARTS = {KV_CACHE_DTYPE: (RESOLVER,)}
    MARKS = {KV_CACHE_DTYPE: ((None, REFUSAL),)}
    ANCHOR_SYMBOLS = (RESOLVER, RUNNER_CLASS.name)
    WATCH = (RESOLVER,)

    def is_fixed_upstream(self, path: str, tree: cst.Module) -> bool:
        branches = [branch for fn in _resolvers(path, tree) for branch in _fp4_branches(fn)]
        return bool(branches) and all(_refuses_below_sm100(branch) for branch in branches)

    def check(self, path: str, tree: cst.Module) -> None:
        super().check(path, tree)
        if not any(_fp4_branches(fn) for fn in _resolvers(path, tree)):
            # From 0.5.16 ModelRunner.configure_kv_cache_dtype calls kv_cache_dtype.py's resolver.
            raise SkipPatch(f"{path}: no {RESOLVER}() here makes an FP4 KV cache")

    @m.visit(_FP4_BRANCH)
    def read_requested(self, node: cst.If) -> None:
        """The expression holding the requested dtype name (the fp4 branch's compared value)."""
        assert isinstance(node.test, cst.Comparison)
        self.requested = node.test.left

    @m.call_if_inside(m.FunctionDef(name=m.Name(RESOLVER)))
    @m.call_if_inside(_FP4_BRANCH)
    @edit(_MAKES_FP4, f"{RESOLVER}(): the FP4 branch's ... = torch.float4_e2m1fn_x2")
    def refuse_fp4(
        self, original_node: cst.SimpleStatementLine, updated_node: cst.SimpleStatementLine
    ) -> cst.FlattenSentinel[cst.BaseStatement]:
        if getattr(self, "requested", None) is None:
            raise AnchorError(f"anchor not found: {RESOLVER}(): the FP4 branch's dtype name")
        return cst.FlattenSentinel([updated_node, *REFUSAL.fill(requested=self.requested.deep_clone())])
