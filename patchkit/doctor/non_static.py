"""What a launch needs outside the static pools (issue 21.9), and the highest `--mem-fraction-static`
that leaves it.

SGLang gives the weights, the KV cache and the state pools `free at load x mem_fraction_static`;
everything else runs in the rest: the activations of the largest prefill chunk, the logits and the
sampler's buffers, the CUDA graphs' memory pools, the draft model's forward, and the attention
backend's workspace. When that rest is too small the launch starts and dies later (an OOM in the
first long prefill, at graph capture, or a CUBLAS failure), which the static budget cannot see.

The release's own defaults are read from its code (`_handle_gpu_memory_settings`, 0.5.10-0.5.18 in
`server_args.py`, from 0.5.19 `handle_gpu_memory_settings` in `arg_groups/memory_hook.py`, and the
prefill graph's capture sizes); the geometry comes from the model's config. docs/doctor.md lists
every term, where it comes from, what is assumed and how it was calibrated.
"""

from __future__ import annotations

import ast
import math
from dataclasses import dataclass, field
from typing import Callable

from patchkit.doctor.gpu import GpuFacts
from patchkit.doctor.launch import Launch
from patchkit.doctor.model import ModelFacts, model_dtype_bytes
from patchkit.doctor.release import ReleaseCode

MIB = 1 << 20
GIB = 1 << 30

MEMORY_SETTINGS = ("_handle_gpu_memory_settings", "handle_gpu_memory_settings", "reserve_for_graph_mb")
MEMORY_FILES = ("srt/server_args.py", "srt/arg_groups/memory_hook.py")
PREFILL_SIZES = ("generate_prefill_cuda_graph_batch_sizes", "_generate_prefill_cuda_graph_batch_sizes")
PREFILL_SIZE_FILES = ("srt/arg_groups/cuda_graph_hook.py", "srt/server_args.py")
# The decode graphs' capture sizes: `_generate_cuda_graph_batch_sizes` (server_args.py, 0.5.10-0.5.13),
# `_generate_decode_cuda_graph_batch_sizes` (0.5.14-0.5.18), `generate_decode_cuda_graph_batch_sizes`
# (arg_groups/cuda_graph_hook.py, 0.5.19 on).
DECODE_SIZES = ("generate_decode_cuda_graph_batch_sizes", "_generate_decode_cuda_graph_batch_sizes",
                "_generate_cuda_graph_batch_sizes")

# The full-attention backends whose decode-graph state is read (`init_cuda_graph_state` of the file's backend class):
# the launch's --decode-attention-backend / --attention-backend, else the release's default on a CUDA card that is
# neither Hopper (fa3) nor SM 10.x (trtllm_mha): flashinfer (`_get_default_attn_backend`, every release 0.5.10-0.5.23).
ATTENTION_FILES = {"flashinfer": ("srt/layers/attention/flashinfer_backend.py", "FlashInferAttnBackend"),
                   "triton": ("srt/layers/attention/triton_backend.py", "TritonAttnBackend")}
_DTYPE_BYTES = {"int64": 8, "long": 8, "int32": 4, "int": 4, "float32": 4, "float": 4, "bfloat16": 2, "float16": 2,
                "half": 2, "uint8": 1, "int8": 1, "bool": 1}

# fla's chunked gated delta rule keeps one fp32 state (value heads x key dim x value dim) per chunk
# of this many tokens during a prefill (an assumption about the kernel library, not SGLang's code).
GDN_CHUNK_TOKENS = 64
# The one fitted constant (docs/doctor.md, "The non-static memory rule"): the torch allocator's peak
# over the tensors one prefill holds at once (copies, casts, kernel temporaries, the caching
# allocator's fragmentation). The field's OOM figures need more than 1.07-2.04; the 1024-token
# launch that ran allows up to 4.1.
ALLOCATOR_FACTOR = 2.5
# The factors the field's figures allow: above 2.04 (the MTP launch that ran out on 32 GB), at most 4.1 (the
# 1024-token launch that ran): the range the estimate states.
ALLOCATOR_FACTOR_RANGE = (2.04, 4.1)


@dataclass(frozen=True)
class MemoryTier:
    """One branch of the release's GPU-memory heuristic: below `below_mib` of total memory (None:
    the last branch), the default chunked prefill size and decode CUDA-graph max batch size."""

    below_mib: int | None
    chunked_prefill_size: int | None
    max_bs_small_tp: int | None  # tp_size < 4
    max_bs_large_tp: int | None


@dataclass(frozen=True)
class GraphDefaults:
    tiers: tuple[MemoryTier, ...]
    reserve_floor_mib: float  # "Constant meta data (e.g., from attention backend)": 512
    decode_graph_mib_per_bs: float  # the release's reserve per decode max bs: 2
    prefill_graph_mib_each: float  # non-torch memory per captured prefill graph (0.5.19 on: 8), else 0
    prefill_sizes: ast.expr | None  # the release's capture-size expression (max_bs free)
    # The decode graphs' capture-size expressions (max_bs free): without and with speculative decoding.
    decode_sizes: ast.expr | None = None
    decode_sizes_spec: ast.expr | None = None
    # Per attention backend: the bytes its decode-graph state takes per (captured token row x context token) and per
    # (captured request x context token): `init_cuda_graph_state`'s buffers sized `max_num_tokens * max_context_len`
    # (flashinfer: int32 kv indices and a uint8 custom mask, 5 B) or `max_bs * max_context_len`.
    attention_graph_bytes: dict[str, tuple[int, int]] = field(default_factory=dict)
    # The free memory (GiB) below which the release skips an automatically chosen prefill graph (0.5.16-0.5.17:
    # `_MIN_AUTO_PREFILL_CUDA_GRAPH_FREE_MEMORY_GB`, 4.0); None where it has no such gate.
    auto_prefill_min_free_gib: float | None = None
    # Attention data parallel's reserve (`if enable_dp_attention` / `attn_dp_enabled_of`: `max_bs * dp_size * 3`, and
    # `* 1.5` more above a decode max bs of 300; every release 0.5.10-0.5.23): the MiB per (decode max bs x DP rank)
    # and, above `dp_large_above`, the MiB more.
    dp_mib_per_bs: float = 0.0
    dp_large_mib_per_bs: float = 0.0
    dp_large_above: int | None = None
    # DeepEP's all-to-all reserve on top of the floor (2 GiB where the decode graphs are on and --moe-a2a-backend is
    # deepep: inside the settings in 0.5.15, `reserve_for_deepep_a2a_mb` from 0.5.16), MiB; 0 where the release has
    # none (0.5.10-0.5.14).
    deepep_mib: float = 0.0


@dataclass
class NonStatic:
    needed_bytes: int
    available_bytes: int | None
    max_safe_mem_fraction_static: float | None
    chunked_prefill_size: int
    decode_graph_max_bs: int | None  # None: decode CUDA graphs off
    prefill_graphs: int
    terms: dict[str, int] = field(default_factory=dict)
    # Start-up's graph capture (sglang#35777): what it needs outside the static pools, the decode batch sizes the
    # release captures, and the largest decode max bs whose capture fits the rest (None: none, or not known).
    capture_bytes: int = 0
    capture_sizes: tuple[int, ...] = ()
    capture_max_bs_fits: int | None = None
    # The largest --chunked-prefill-size (the launch's chunk halved, down to 256) whose capture fits, where the launch
    # captures prefill graphs up to its chunk (None: none, no prefill graphs, or not known).
    capture_chunk_fits: int | None = None

    @property
    def capture_short(self) -> bool:
        return self.available_bytes is not None and self.capture_bytes > self.available_bytes

    @property
    def short(self) -> bool:
        return self.available_bytes is not None and self.needed_bytes > self.available_bytes


# --- the release's code ------------------------------------------------------------------------

def _functions(release: ReleaseCode, files: tuple[str, ...], names: tuple[str, ...]) -> list[ast.FunctionDef]:
    found = []
    for rel in files:
        tree = release.tree(rel)
        for node in ast.walk(tree) if tree is not None else []:
            if isinstance(node, ast.FunctionDef) and node.name in names:
                found.append(node)
    return found


def _name(node: ast.AST) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    return None


def _number(node: ast.AST | None) -> int | None:
    if isinstance(node, ast.Constant) and isinstance(node.value, int) and not isinstance(node.value, bool):
        return node.value
    return None


def _mib_limit(test: ast.expr) -> int | None:
    """`gpu_mem < 35 * 1024` -> 35840."""
    if (isinstance(test, ast.Compare) and _name(test.left) == "gpu_mem" and len(test.ops) == 1
            and isinstance(test.ops[0], ast.Lt)):
        right = test.comparators[0]
        if isinstance(right, ast.BinOp) and isinstance(right.op, ast.Mult):
            a, b = _number(right.left), _number(right.right)
            if a is not None and b is not None:
                return a * b
        return _number(right)
    return None


def _assigned(stmts: list[ast.stmt], names: tuple[str, ...]) -> int | None:
    """The constant a branch gives one of `names` (`self.x = 8`, `cfg.x = 8` or `declare_resolution(..., x=8)`)."""
    for stmt in stmts:
        for node in ast.walk(stmt):
            if isinstance(node, ast.Assign) and any(_name(t) in names for t in node.targets):
                if _number(node.value) is not None:
                    return _number(node.value)
            if isinstance(node, ast.Call):
                for kw in node.keywords:
                    if kw.arg in names and _number(kw.value) is not None:
                        return _number(kw.value)
    return None


_MAX_BS = ("cuda_graph_max_bs", "max_bs")


def _max_bs(stmts: list[ast.stmt]) -> tuple[int | None, int | None]:
    """(tp < 4, tp >= 4) decode max bs of one tier."""
    for stmt in stmts:
        for node in ast.walk(stmt):
            if isinstance(node, ast.If) and "tp_size" in {_name(n) for n in ast.walk(node.test)}:
                return _assigned(node.body, _MAX_BS), _assigned(node.orelse, _MAX_BS)
    value = _assigned(stmts, _MAX_BS)
    return value, value


def _tiers(fn: ast.FunctionDef) -> tuple[MemoryTier, ...]:
    chain = next((n for n in ast.walk(fn) if isinstance(n, ast.If) and _mib_limit(n.test) is not None), None)
    tiers: list[MemoryTier] = []
    while chain is not None:
        small, large = _max_bs(chain.body)
        tiers.append(MemoryTier(_mib_limit(chain.test), _assigned(chain.body, ("chunked_prefill_size",)), small, large))
        rest = chain.orelse
        if len(rest) == 1 and isinstance(rest[0], ast.If) and _mib_limit(rest[0].test) is not None:
            chain = rest[0]
            continue
        if rest:
            small, large = _max_bs(rest)
            tiers.append(MemoryTier(None, _assigned(rest, ("chunked_prefill_size",)), small, large))
        chain = None
    return tuple(tiers)


def _times_constant(fn: ast.AST, left: Callable[[ast.AST], bool]) -> float | None:
    """The constant `k` in `<left> * k` inside `fn` (the release's MiB per graph)."""
    for node in ast.walk(fn):
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mult) and left(node.left):
            if isinstance(node.right, ast.Constant) and isinstance(node.right.value, (int, float)):
                return float(node.right.value)
    return None


def _is_prefill_count(node: ast.AST) -> bool:
    return (isinstance(node, ast.Call) and _name(node.func) == "len" and len(node.args) == 1
            and any("prefill" in (_name(n) or "") for n in ast.walk(node.args[0])))


def _is_decode_max_bs(node: ast.AST) -> bool:
    return _name(node) in _MAX_BS and not any("prefill" in (_name(n) or "") for n in ast.walk(node))


def graph_defaults(release: ReleaseCode) -> GraphDefaults:
    fns = _functions(release, MEMORY_FILES, MEMORY_SETTINGS)
    settings = next((fn for fn in fns if fn.name != "reserve_for_graph_mb"), None)
    tiers = _tiers(settings) if settings is not None else ()
    floors = [n.value.value for fn in fns for n in ast.walk(fn)
              if isinstance(n, ast.Assign) and any(_name(t) == "reserved_mem" for t in n.targets)
              and isinstance(n.value, ast.Constant) and isinstance(n.value.value, (int, float)) and n.value.value > 0]
    # The smallest positive constant: 512 (0.5.23's 1536 is the post-capture-sizing branch's).
    per_bs = next((k for fn in fns if (k := _times_constant(fn, _is_decode_max_bs)) is not None), 2.0)
    per_prefill = next((k for fn in fns if (k := _times_constant(fn, _is_prefill_count)) is not None), 0.0)
    sizes_fn = next(iter(_functions(release, PREFILL_SIZE_FILES, PREFILL_SIZES)), None)
    sizes = None
    for node in ast.walk(sizes_fn) if sizes_fn is not None else []:
        if isinstance(node, ast.Assign) and any(_name(t) == "capture_sizes" for t in node.targets) \
                and isinstance(node.value, ast.BinOp):
            sizes = node.value
            break
    decode, decode_spec = _decode_size_expressions(release)
    dp, dp_large, dp_above = _dp_reserve(fns)
    deepep = _deepep_reserve(fns + _functions(release, MEMORY_FILES, ("reserve_for_deepep_a2a_mb",)))
    return GraphDefaults(tiers=tiers, reserve_floor_mib=float(min(floors, default=512)),
                         decode_graph_mib_per_bs=per_bs, prefill_graph_mib_each=per_prefill, prefill_sizes=sizes,
                         decode_sizes=decode, decode_sizes_spec=decode_spec,
                         attention_graph_bytes=_attention_graph_bytes(release),
                         auto_prefill_min_free_gib=_auto_prefill_gate(release), dp_mib_per_bs=dp,
                         dp_large_mib_per_bs=dp_large, dp_large_above=dp_above, deepep_mib=deepep)


def _deepep_reserve(fns: list[ast.FunctionDef]) -> float:
    """DeepEP's decode-side reserve, MiB: `reserve_for_deepep_a2a_mb`'s `return 2 * 1024` (0.5.16 on), or 0.5.15's
    `if ... moe_a2a_backend == "deepep": reserved_mem += 2 * 1024` inside the settings; not the prefill breakable
    graphs' DeepEP delta (`if ... == Backend.BREAKABLE and ... == "deepep"`, 0.5.19 on: a prefill backend doctor does
    not pick); 0 where the release has none (0.5.10-0.5.14)."""
    for fn in fns:
        if fn.name == "reserve_for_deepep_a2a_mb":
            for node in ast.walk(fn):
                if isinstance(node, ast.Return) and node.value is not None and _constant(node.value):
                    return _constant(node.value)
            continue
        for node in ast.walk(fn):
            if not isinstance(node, ast.If):
                continue
            test = list(ast.walk(node.test))
            if not any(isinstance(n, ast.Constant) and n.value == "deepep" for n in test) \
                    or any(_name(n) == "BREAKABLE" for n in test):
                continue
            for stmt in node.body:
                if isinstance(stmt, ast.AugAssign) and _name(stmt.target) == "reserved_mem" and _constant(stmt.value):
                    return _constant(stmt.value)
    return 0.0


_DP_SIZES = ("dp_size", "attn_dp_size")


def _constant(node: ast.AST) -> float:
    """A number written as constants (`2 * 1024`, `1.5`); 0 for anything else."""
    if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)) and not isinstance(node.value, bool):
        return float(node.value)
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mult):
        return _constant(node.left) * _constant(node.right)
    return 0.0


def _dp_reserve(fns: list[ast.FunctionDef]) -> tuple[float, float, int | None]:
    """Attention DP's terms of the release's reserve: the constants `k` of `<max_bs> * <dp_size> * k` in the order
    written (the first always, the second above the decode max bs that the `if <max_bs> > N` around it names)."""
    found: list[tuple[float, int | None]] = []
    for fn in fns:
        parents = {child: node for node in ast.walk(fn) for child in ast.iter_child_nodes(node)}
        for node in ast.walk(fn):
            if not (isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mult) and _constant(node.right)
                    and isinstance(node.left, ast.BinOp) and isinstance(node.left.op, ast.Mult)
                    and _name(node.left.right) in _DP_SIZES and _name(node.left.left) in _MAX_BS):
                continue
            above = None
            up = parents.get(node)
            while up is not None and above is None:
                test = up.test if isinstance(up, ast.If) else None
                if isinstance(test, ast.Compare) and isinstance(test.ops[0], ast.Gt) \
                        and _name(test.left) in _MAX_BS and _constant(test.comparators[0]):
                    above = int(_constant(test.comparators[0]))
                up = parents.get(up)
            found.append((_constant(node.right), above))
    base = next((k for k, above in found if above is None), 0.0)
    large = next(((k, above) for k, above in found if above is not None), (0.0, None))
    return base, large[0], large[1]


CAPTURE_SETUP = "srt/model_executor/model_runner_components/cuda_graph_setup.py"


def _auto_prefill_gate(release: ReleaseCode) -> float | None:
    """The module constant `_MIN_AUTO_PREFILL_CUDA_GRAPH_FREE_MEMORY_GB` of the release's graph set-up, where its
    `should_skip_auto_prefill_cuda_graph_for_memory` reads it (0.5.16-0.5.17; sglang#31204)."""
    tree = release.tree(CAPTURE_SETUP)
    body = tree.body if tree is not None else []
    if not any(isinstance(n, ast.FunctionDef) and n.name == "should_skip_auto_prefill_cuda_graph_for_memory"
               for n in body):
        return None
    for node in body:
        if isinstance(node, ast.Assign) and any(_name(t) == "_MIN_AUTO_PREFILL_CUDA_GRAPH_FREE_MEMORY_GB"
                                                for t in node.targets):
            if isinstance(node.value, ast.Constant) and isinstance(node.value.value, (int, float)):
                return float(node.value.value)
    return None


def _attention_graph_bytes(release: ReleaseCode) -> dict[str, tuple[int, int]]:
    """Per backend (ATTENTION_FILES), the bytes of the buffers its `init_cuda_graph_state` sizes by the context: a
    `torch.zeros/empty/full` whose shape is `max_num_tokens * self.max_context_len` (per token row) or `max_bs *
    self.max_context_len` (per request), by its dtype; 0.5.10-0.5.23's flashinfer: int32 kv indices and a uint8 custom
    mask per token row (the target's backend prefills too), triton: int64 kv indices."""
    found: dict[str, tuple[int, int]] = {}
    for backend, (rel, cls_name) in ATTENTION_FILES.items():
        tree = release.tree(rel)
        cls = next((n for n in (tree.body if tree is not None else []) if isinstance(n, ast.ClassDef)
                    and n.name == cls_name), None)
        fn = next((n for n in (cls.body if cls is not None else []) if isinstance(n, ast.FunctionDef)
                   and n.name == "init_cuda_graph_state"), None)
        per_row = per_bs = 0
        for node in ast.walk(fn) if fn is not None else []:
            if not (isinstance(node, ast.Call) and _name(node.func) in ("zeros", "empty", "full") and node.args):
                continue
            shape = node.args[0]
            if isinstance(shape, ast.Tuple) and len(shape.elts) == 1:
                shape = shape.elts[0]
            if not (isinstance(shape, ast.BinOp) and isinstance(shape.op, ast.Mult)
                    and {_name(shape.left), _name(shape.right)} & {"max_context_len"}):
                continue
            rows = ({_name(shape.left), _name(shape.right)} - {"max_context_len"}).pop()
            dtype = next((_name(k.value) for k in node.keywords if k.arg == "dtype"), None)
            size = _DTYPE_BYTES.get(dtype or "", 0)
            if rows == "max_num_tokens":
                per_row += size
            elif rows == "max_bs":
                per_bs += size
        if per_row or per_bs:
            found[backend] = (per_row, per_bs)
    return found


def attention_backend(launch: Launch, sm: tuple[int, int] | None) -> str:
    """The full-attention backend of the decode graphs: the launch's, else the release's default for the card."""
    named = launch.get("decode_attention_backend") or launch.get("attention_backend")
    if named:
        return str(named)
    if sm is not None and sm[0] == 9:
        return "fa3"
    if sm is not None and sm[0] == 10:
        return "trtllm_mha"
    return "flashinfer"


def _decode_size_expressions(release: ReleaseCode) -> tuple[ast.expr | None, ast.expr | None]:
    """The release's two `capture_bs = ...` lists of the decode graphs: the normal case (`speculative_algorithm is
    None`) and the speculative one (its `else`), read from its batch-size function."""
    fn = next(iter(_functions(release, PREFILL_SIZE_FILES, DECODE_SIZES)), None)
    for node in ast.walk(fn) if fn is not None else []:
        if isinstance(node, ast.If) and isinstance(node.test, ast.Compare) and \
                _name(node.test.left) == "speculative_algorithm" and isinstance(node.test.ops[0], ast.Is):
            def assigned(stmts: list[ast.stmt]) -> ast.expr | None:
                return next((s.value for s in stmts if isinstance(s, ast.Assign)
                             and any(_name(t) == "capture_bs" for t in s.targets)), None)
            return assigned(node.body), assigned(node.orelse)
    return None, None


def decode_capture_sizes(defaults: GraphDefaults, max_bs: int, speculative: bool, padding: bool = True) -> list[int]:
    """The decode batch sizes the release captures for `max_bs`: its list up to max_bs, max_bs appended where the
    list misses it (every release 0.5.10-0.5.23); every size from 1 with --disable-cuda-graph-padding."""
    if not padding:
        return list(range(1, max_bs + 1))
    expr = defaults.decode_sizes_spec if speculative else defaults.decode_sizes
    sizes = _evaluate_sizes(expr, max_bs) if expr is not None else []
    return sorted(set(sizes) | {max_bs})


def _evaluate_sizes(node: ast.expr, max_bs: int) -> list[int]:
    """The release's `list(range(4, 33, 4)) + ... + list(range(4608, max_bs + 1, 512))`, evaluated
    on its literals only (nothing of the release is run)."""
    def value(n: ast.AST) -> int | list[int]:
        if isinstance(n, ast.Constant) and isinstance(n.value, int):
            return n.value
        if isinstance(n, (ast.Name, ast.Attribute)):
            return max_bs  # max_bs, self.piecewise_cuda_graph_max_tokens: the largest size captured
        if isinstance(n, ast.List):
            return [int(value(e)) for e in n.elts]  # type: ignore[arg-type]
        if isinstance(n, ast.BinOp):
            a, b = value(n.left), value(n.right)
            if isinstance(n.op, ast.Add):
                return a + b  # type: ignore[operator]
            if isinstance(n.op, ast.Sub) and isinstance(a, int) and isinstance(b, int):
                return a - b
            if isinstance(n.op, ast.Mult) and isinstance(a, int) and isinstance(b, int):
                return a * b
        if isinstance(n, ast.Call) and _name(n.func) == "list" and len(n.args) == 1:
            return value(n.args[0])
        if isinstance(n, ast.Call) and _name(n.func) == "range":
            bounds = [value(a) for a in n.args]
            if all(isinstance(x, int) for x in bounds):
                return list(range(*bounds))  # type: ignore[arg-type]
        raise ValueError(ast.dump(n)[:80])
    try:
        result = value(node)
    except (ValueError, TypeError):
        return []
    return [s for s in result if s <= max_bs] if isinstance(result, list) else []


def default_for(defaults: GraphDefaults, gpu_total_gib: float | None, tp: int) -> tuple[int, int]:
    """(chunked prefill size, decode max bs) the release picks for this card; its fallback without
    a known card (4096, 160)."""
    if gpu_total_gib is None:
        return 4096, 160
    mem_mib = gpu_total_gib * 1024
    for tier in defaults.tiers:
        if tier.below_mib is None or mem_mib < tier.below_mib:
            bs = tier.max_bs_small_tp if tp < 4 else tier.max_bs_large_tp
            return tier.chunked_prefill_size or 4096, bs or 160
    return 4096, 160


# --- the model's geometry ----------------------------------------------------------------------

def _geometry(text: dict) -> dict[str, int]:
    hidden = int(text.get("hidden_size") or 0)
    heads = int(text.get("num_attention_heads") or 1)
    inter = int(text.get("intermediate_size") or 4 * hidden)
    experts_per_token = int(text.get("num_experts_per_tok") or 0)
    if experts_per_token and text.get("moe_intermediate_size"):
        inter = experts_per_token * int(text["moe_intermediate_size"]) + int(text.get("shared_expert_intermediate_size") or 0)
    return {"hidden": hidden, "heads": heads, "kv_heads": int(text.get("num_key_value_heads") or heads),
            "head_dim": int(text.get("head_dim") or (hidden // heads if heads else 0)), "inter": inter,
            "vocab": int(text.get("vocab_size") or 0)}


def activation_bytes_per_token(text: dict, tp: int, act_bytes: int) -> int:
    """The tensors one token holds at the peak of one layer's forward, per TP rank: the residual
    stream (hidden states, residual, the layer's output: 3 x hidden, whole on every rank) plus the
    largest layer's working set, split by TP: a dense MLP's gate_up and activation (3 x intermediate),
    a Gated DeltaNet layer's projections (qkvz, ba, the conv output, the core and gated-norm outputs)
    and its fp32 chunk states, or an attention layer's q (with Qwen3.5's output gate), k, v and output."""
    g = _geometry(text)
    mlp = 3 * g["inter"] // tp * act_bytes
    gate = 2 if text.get("attn_output_gate", True) and "linear_num_value_heads" in text else 1
    attention = ((gate + 1) * g["heads"] * g["head_dim"] + 2 * g["kv_heads"] * g["head_dim"]) // tp * act_bytes
    gdn = 0
    if text.get("linear_num_value_heads"):
        hk, hv = int(text["linear_num_key_heads"]), int(text["linear_num_value_heads"])
        dk, dv = int(text["linear_key_head_dim"]), int(text["linear_value_head_dim"])
        qkvz = 2 * hk * dk + 2 * hv * dv
        conv = 2 * hk * dk + hv * dv
        gdn = (qkvz + 2 * hv + conv + 2 * hv * dv) // tp * act_bytes + hv // max(1, min(tp, hv)) * dk * dv * 4 // GDN_CHUNK_TOKENS
    return 3 * g["hidden"] * act_bytes + max(mlp, attention, gdn)


def logits_bytes(vocab: int, rows: int, act_bytes: int) -> int:
    """`LogitsProcessor`: the lm_head matmul in the model dtype, gathered to the whole vocab on every
    rank, then `.float()` (fp32); the sampler's softmax probabilities (fp32) beside them."""
    return rows * vocab * (act_bytes + 4 + 4)


def max_safe_fraction(needed_bytes: int, free_gib: float) -> float | None:
    """The highest `--mem-fraction-static`, to 0.01, whose rest `(1 - f) x free` holds `needed_bytes`
    (rounded down, so the rest is never short); None without free memory, or where no fraction above 0
    leaves enough (the need is the whole free memory or more)."""
    free = free_gib * GIB
    if free <= 0:
        return None
    fraction = math.floor((1 - needed_bytes / free) * 100) / 100
    while fraction > 0 and (1 - fraction) * free < needed_bytes:  # float rounding at the boundary
        fraction = round(fraction - 0.01, 2)
    return fraction if fraction > 0 else None


# --- the estimate ------------------------------------------------------------------------------

def _int(value: object) -> int | None:
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        return None
    try:
        return int(value)
    except ValueError:
        return None


def graphs_off(launch: Launch, phase: str) -> bool:
    if launch.get("disable_cuda_graph", False):
        return True
    backend = launch.get(f"cuda_graph_backend_{phase}")
    if backend == "disabled":
        return True
    return phase == "prefill" and bool(launch.get("disable_prefill_cuda_graph", False))


def estimate(release: ReleaseCode, launch: Launch, model: ModelFacts, draft: ModelFacts | None, gpu: GpuFacts,
             *, tp: int, act_bytes: int, free_gib: float | None, mem_fraction_static: float | None,
             speculative_algorithm: str | None, draft_tokens: int | None,
             max_running_requests: int | None, running_requests: int | None,
             context_length: int | None = None, late_bytes: int = 0) -> NonStatic:
    """What this launch needs outside the static pools on one GPU (bytes, each term named).
    `max_running_requests` is the ServerArgs value (the flag, or the speculative default) the release
    caps the graphs' batch size with; `running_requests` what the scheduler really runs at once; `late_bytes` what
    the release allocates in the rest after the KV pool is sized (the multimodal feature pool, mm_feature_pool.py),
    before its graphs are captured."""
    defaults = release.memoized("graph_defaults", graph_defaults)
    chunk_default, bs_default = default_for(defaults, gpu.total_gib, tp)
    chunk = _int(launch.get("chunked_prefill_size")) or chunk_default
    if chunk <= 0:  # chunked prefill off: the largest prefill is --max-prefill-tokens
        chunk = _int(launch.get("max_prefill_tokens")) or 16384
    explicit_bs = _int(launch.get("cuda_graph_max_bs_decode") or launch.get("cuda_graph_max_bs"))
    listed = launch.get("cuda_graph_bs_decode") or launch.get("cuda_graph_bs")
    if isinstance(listed, list) and listed:
        explicit_bs = max(int(x) for x in listed)
    max_bs = explicit_bs or bs_default
    if max_running_requests:
        # Every release's `get_batch_sizes_to_capture` drops the sizes above `req_to_token_pool.size`
        # (the max running requests), an explicit --cuda-graph-max-bs included (0.5.22 on also lowers
        # the default itself, to the same effect).
        max_bs = min(max_bs, max_running_requests)
    decode_graphs = None if graphs_off(launch, "decode") else max_bs
    explicit_prefill_tokens = _int(launch.get("cuda_graph_max_bs_prefill"))
    captures_prefill = bool(defaults.prefill_graph_mib_each and defaults.prefill_sizes is not None
                            and not graphs_off(launch, "prefill"))
    available = None
    if free_gib is not None and mem_fraction_static is not None:
        available = int(free_gib * GIB * (1 - mem_fraction_static))
    gate = defaults.auto_prefill_min_free_gib
    # 0.5.16-0.5.17 skip an automatically chosen prefill graph where less than the gate is free before its capture
    # (after the weights, the pools, the attention backend's constant metadata and what landed after the sizing: the
    # multimodal feature pool). Read for start-up's capture only:
    # the non-static terms keep the prefill graphs their fitted factor was calibrated with (docs/doctor.md).
    gated = bool(gate is not None and available is not None and not launch.get("cuda_graph_backend_prefill")
                 and available - defaults.reserve_floor_mib * MIB - late_bytes < (gate or 0) * GIB)

    def prefill_graph_count(chunk_tokens: int, at_startup: bool = False) -> int:
        # The release's prefill capture sizes up to --cuda-graph-max-bs-prefill, else up to the chunk.
        if not captures_prefill or defaults.prefill_sizes is None or (at_startup and gated):
            return 0
        return len(_evaluate_sizes(defaults.prefill_sizes, explicit_prefill_tokens or chunk_tokens))

    prefill_graphs = prefill_graph_count(chunk)

    text = model.text
    vocab = _geometry(text)["vocab"]
    hidden = _geometry(text)["hidden"]
    per_token = activation_bytes_per_token(text, tp, act_bytes)
    algo = speculative_algorithm
    # Tokens each running request puts through one decode step: 1, or the verify's draft tokens.
    step_tokens = (draft_tokens or 1) if algo else 1
    running = max(1, running_requests or max_running_requests or max_bs)
    draft_text = (draft.text if draft is not None and draft.path.resolve() != model.path.resolve() else text)
    draft_per_token = activation_bytes_per_token(draft_text, tp, act_bytes) if algo else 0
    topk = max(1, _int(launch.get("speculative_eagle_topk")) or 1)

    terms: dict[str, int] = {}
    terms["fixed"] = int(defaults.reserve_floor_mib * MIB)
    # The largest prefill: the target's (or the draft's extend, which follows it) peak, plus the
    # hidden states the target hands the draft (EAGLE-3: three layers, DFlash: its target layers).
    carried = 0
    if algo:
        layers = 3 if algo == "EAGLE3" else 1
        if algo in ("DFLASH", "DSPARK") and draft is not None:
            # `DFlashDraftConfig.resolve_target_layer_ids`: the listed ids, else one per draft layer.
            ids = (draft.config.get("dflash_config") or {}).get("target_layer_ids")
            layers = len(ids) if isinstance(ids, list) and ids else int(draft.text.get("num_hidden_layers") or 1)
        carried = layers * hidden * act_bytes
    def prefill_activations(chunk_tokens: int) -> int:
        return int(chunk_tokens * (max(per_token, draft_per_token) + carried) * ALLOCATOR_FACTOR)

    terms["prefill_activations"] = prefill_activations(chunk)
    # Logits and sampler: every running request's decode (or verify) rows, eager or graphed.
    terms["logits_sampler"] = logits_bytes(vocab, running * step_tokens, act_bytes)
    per_row, per_request = defaults.attention_graph_bytes.get(attention_backend(launch, gpu.sm), (0, 0))

    def decode_graph_bytes(bs: int, at_startup: bool = False) -> int:
        # The largest graph's rows (the release captures largest first into one shared pool: an assumption that
        # its tensors bound the pool) and the release's own reserve of `max_bs * 2` MiB; at start-up's capture also
        # the attention backend's graph state, sized by the context (`init_cuda_graph_state(max_bs, max_bs x tokens
        # per request)`; left out of the non-static terms, whose factor was fitted without it).
        rows = bs * step_tokens
        state = (rows * per_row + bs * per_request) * (context_length or 0) if at_startup else 0
        return (int(defaults.decode_graph_mib_per_bs * bs * MIB) + rows * per_token
                + logits_bytes(vocab, rows, act_bytes) - rows * vocab * 4 + state)  # no sampler inside

    def draft_bytes(rows: int) -> int:
        # The draft's decode (topk candidates per request; DFlash: its whole block) and its extend over the
        # verified tokens, each with the draft's own logits.
        per_step = step_tokens if algo in ("DFLASH", "DSPARK") else topk
        return (rows * per_step * draft_per_token + logits_bytes(vocab, rows * per_step, act_bytes)
                + rows * step_tokens * draft_per_token + logits_bytes(vocab, rows, act_bytes))

    prefill_graph_bytes = int(prefill_graphs * defaults.prefill_graph_mib_each * MIB)
    terms["cuda_graphs"] = (decode_graph_bytes(decode_graphs) if decode_graphs is not None else 0) + prefill_graph_bytes
    if algo:
        # Graphed at the graph's max batch size, eager at the running requests beyond it.
        terms["draft_forward"] = draft_bytes(max(decode_graphs or 0, running))

    def capture_at(bs: int | None, chunk_tokens: int = chunk) -> int:
        # Start-up's capture (after the static pools are allocated): the release's constant metadata, the prefill
        # graphs (each capture runs the forward at its size, the largest first: the prefill chunk's activations,
        # and their non-torch memory), the decode graphs at their largest batch and the draft's graphs; and what the
        # release allocated in the rest after the KV pool was sized (the multimodal feature pool). Left out of the
        # non-static terms, as the attention state: their factor was fitted without it.
        graphs = prefill_graph_count(chunk_tokens, at_startup=True)
        need = (terms["fixed"] + late_bytes + int(graphs * defaults.prefill_graph_mib_each * MIB)
                + (prefill_activations(chunk_tokens) if graphs else 0))
        if bs is not None:
            need += decode_graph_bytes(bs, at_startup=True) + (draft_bytes(bs) if algo else 0)
        return need

    needed = sum(terms.values())

    max_safe = max_safe_fraction(needed, free_gib) if free_gib is not None else None
    capture = capture_at(decode_graphs)
    fits = chunk_fits = None
    if decode_graphs is not None and available is not None and capture > available:
        fits = next((bs for bs in range(decode_graphs - 1, 0, -1) if capture_at(bs) <= available), None)
    startup_prefill_graphs = prefill_graph_count(chunk, at_startup=True)
    if startup_prefill_graphs and available is not None and capture > available:
        # The prefill graphs are captured up to the chunk: a smaller chunk captures fewer and smaller ones.
        halves = (chunk >> k for k in range(1, chunk.bit_length()))
        chunk_fits = next((c for c in halves if c >= 256 and capture_at(decode_graphs, c) <= available), None)
    sizes = () if decode_graphs is None else tuple(decode_capture_sizes(
        defaults, decode_graphs, bool(algo), padding=not launch.get("disable_cuda_graph_padding", False)))
    if isinstance(listed, list) and listed and decode_graphs is not None:
        sizes = tuple(sorted({int(x) for x in listed if int(x) <= decode_graphs}))
    return NonStatic(needed_bytes=needed, available_bytes=available, max_safe_mem_fraction_static=max_safe,
                     chunked_prefill_size=chunk, decode_graph_max_bs=decode_graphs,
                     prefill_graphs=startup_prefill_graphs,
                     terms=terms, capture_bytes=capture, capture_sizes=sizes, capture_max_bs_fits=fits,
                     capture_chunk_fits=chunk_fits)

