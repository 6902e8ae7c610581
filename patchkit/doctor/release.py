"""What one SGLang release's own code says, read from its source with `ast` (never imported).

The memory-sizing code moved between releases; each fact names the function it comes from:
- `ModelRunnerKVCacheMixin` in `model_executor/model_runner_kv_cache_mixin.py` (0.5.14-0.5.15),
  `KVCacheConfigurator` in `mem_cache/kv_cache_configurator.py` (0.5.16 on):
  `_profile_available_bytes`, `handle_max_mamba_cache` / `_handle_max_mamba_cache`,
  `_calculate_mamba_ratio` and the `MAMBA_CACHE_*` ratio constants beside them;
- `environ.py`: the defaults of the `SGLANG_*` variables the sizing reads;
- `configs/model_config.py`: `multimodal_model_archs`;
- `speculative/spec_info.py`: the `SpeculativeAlgorithm` members;
- the speculative hook (`server_args.py` / `arg_groups/speculative_hook.py`): the
  `max_running_requests` it sets when speculative decoding runs without one.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Callable, TypeVar

from patchkit.doctor.flags import FlagTable, flag_table
from patchkit.doctor.free_memory import AllReduceBuffers
from patchkit.doctor.release_files import FolderFiles, ReleaseFiles

T = TypeVar("T")

# Where `get_context_length` and its CONTEXT_LENGTH_KEYS live.
CONTEXT_FILES = ("srt/utils/hf_transformers/common.py", "srt/utils/hf_transformers_utils.py")
SIZING_FILES = (
    "srt/mem_cache/kv_cache_configurator.py",  # 0.5.16 on
    "srt/model_executor/model_runner_kv_cache_mixin.py",  # 0.5.14-0.5.15
)
POOL_CONFIGURATOR = "srt/model_executor/pool_configurator.py"
CUSTOM_AR_FILE = "srt/distributed/device_communicators/custom_all_reduce.py"
# Where DFLASH's draft KV is priced: the scaling function, and the callers of the draft-cell one.
DFLASH_UTILS = "srt/speculative/dflash_utils.py"
DFLASH_CELL_CALLERS = (
    "srt/model_executor/model_runner_components/spec_aux_hidden_state.py",  # 0.5.18-0.5.22
    "srt/mem_cache/draft_kv_budget.py",  # 0.5.23
)
RATIO_CONSTANTS = (
    "MAMBA_CACHE_SIZE_MAX_RUNNING_REQUESTS_RATIO",
    "MAMBA_CACHE_BASE_RATIO_DROP_ON_SKIP",
    "MAMBA_CACHE_V2_ADDITIONAL_RATIO_OVERLAP",
    "MAMBA_CACHE_V2_ADDITIONAL_RATIO_OVERLAP_LAZY",
    "MAMBA_CACHE_V2_ADDITIONAL_RATIO_NO_OVERLAP",
    "MAMBA_CACHE_V2_ADDITIONAL_RATIO_NO_BUFFER",
)


_PARSED: dict[str, ast.Module | None] = {}


def _parse(files: ReleaseFiles, rel: str) -> ast.Module | None:
    """Parsed modules are kept per file identity (path and mtime, or wheel member CRC): release
    trees do not change under one process."""
    identity = files.identity(rel)
    if identity == "absent":
        return None
    if identity not in _PARSED:
        if len(_PARSED) >= 64:
            _PARSED.pop(next(iter(_PARSED)))
        data = files.read(rel)
        try:
            _PARSED[identity] = None if data is None else ast.parse(data, filename=rel)
        except (SyntaxError, ValueError):
            _PARSED[identity] = None
    return _PARSED[identity]


def _functions(tree: ast.AST, names: tuple[str, ...]) -> list[ast.FunctionDef]:
    return [n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef) and n.name in names]


def _names_in(node: ast.AST) -> set[str]:
    """Every identifier and attribute name used inside a node."""
    found = set()
    for sub in ast.walk(node):
        if isinstance(sub, ast.Name):
            found.add(sub.id)
        elif isinstance(sub, ast.Attribute):
            found.add(sub.attr)
    return found


def _adds_one_to(node: ast.AST, names: tuple[str, ...]) -> bool:
    """Whether the function adds 1 to one of `names` (the pool's padding slot)."""
    for sub in ast.walk(node):
        if (isinstance(sub, ast.BinOp) and isinstance(sub.op, ast.Add)
                and isinstance(sub.right, ast.Constant) and sub.right.value == 1
                and _names_in(sub.left) & set(names)):
            return True
    return False


def _string_keys(tree: ast.AST, name: str) -> set[str]:
    """Keys of a dict literal assigned to `name` (a module or class attribute)."""
    for node in ast.walk(tree):
        if isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            if any(isinstance(t, ast.Name) and t.id == name for t in targets) and isinstance(node.value, ast.Dict):
                return {k.value for k in node.value.keys if isinstance(k, ast.Constant) and isinstance(k.value, str)}
    return set()


def _string_list(tree: ast.AST, name: str) -> set[str]:
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == name for t in node.targets):
            if isinstance(node.value, (ast.List, ast.Tuple, ast.Set)):
                return {e.value for e in node.value.elts if isinstance(e, ast.Constant) and isinstance(e.value, str)}
    return set()


@dataclass
class ReleaseCode:
    """Facts about one release, read from its `sglang/` package (a folder or its wheel)."""

    version: str
    files: ReleaseFiles
    _trees: dict[str, ast.Module | None] = field(default_factory=dict, repr=False)
    _memo: dict[str, object] = field(default_factory=dict, repr=False)

    def memoized(self, name: str, compute: Callable[["ReleaseCode"], T]) -> T:
        """`compute(self)`, once per release: what other modules read from this code (the doctor asks the
        same release again for every fraction it tries and every fix it checks)."""
        if name not in self._memo:
            self._memo[name] = compute(self)
        return self._memo[name]  # type: ignore[return-value]

    def tree(self, rel: str) -> ast.Module | None:
        """The parsed module `rel` (relative to `sglang/`), or None when the release lacks it."""
        if rel not in self._trees:
            self._trees[rel] = _parse(self.files, rel)
        return self._trees[rel]

    @cached_property
    def flags(self) -> FlagTable:
        return flag_table(self.files)

    @cached_property
    def sizing_file(self) -> str | None:
        """Where `_calculate_mamba_ratio` lives in this release."""
        for rel in SIZING_FILES:
            tree = self.tree(rel)
            if tree is not None and _functions(tree, ("_calculate_mamba_ratio",)):
                return rel
        return None

    def _sizing_function(self, *names: str) -> ast.FunctionDef | None:
        if self.sizing_file is None:
            return None
        tree = self.tree(self.sizing_file)
        found = _functions(tree, names) if tree is not None else []
        return found[0] if found else None

    @cached_property
    def ratio_constants(self) -> dict[str, int]:
        """The `MAMBA_CACHE_*` constants beside `_calculate_mamba_ratio` (defaults: 0.5.14's values)."""
        values = {RATIO_CONSTANTS[0]: 3, RATIO_CONSTANTS[2]: 2, RATIO_CONSTANTS[3]: 1, RATIO_CONSTANTS[4]: 1}
        tree = self.tree(self.sizing_file) if self.sizing_file else None
        for node in (tree.body if tree else []):
            if (isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name)
                    and node.targets[0].id in RATIO_CONSTANTS and isinstance(node.value, ast.Constant)
                    and isinstance(node.value.value, (int, float))):
                values[node.targets[0].id] = int(node.value.value)
        return values

    @cached_property
    def ratio_reads_skip_decode_lock(self) -> bool:
        """`_calculate_mamba_ratio` lowers the base under SGLANG_OPT_MAMBA_SKIP_DECODE_LOCK (0.5.19 on)."""
        fn = self._sizing_function("_calculate_mamba_ratio")
        return fn is not None and "SGLANG_OPT_MAMBA_SKIP_DECODE_LOCK" in _names_in(fn)

    @cached_property
    def padding_slot(self) -> bool:
        """`_handle_max_mamba_cache` charges each pool's +1 padding slot (later releases)."""
        fn = self._sizing_function("_handle_max_mamba_cache", "handle_max_mamba_cache")
        return fn is not None and _adds_one_to(fn, ("max_mamba_cache_size", "capped_reqs"))

    @cached_property
    def intermediate_before_pool(self) -> bool:
        """`handle_max_mamba_cache` takes the speculative intermediate state for every running request
        (max_running_requests // dp x draft tokens) off the budget before sizing the pool, with no ratio and no
        padding slot (0.5.10-0.5.12), rather than for the requests the pool can hold (0.5.13 on)."""
        fn = self._sizing_function("_handle_max_mamba_cache", "handle_max_mamba_cache")
        return fn is not None and "_calculate_mamba_ratio" not in _names_in(fn)

    @cached_property
    def eagle_draft_in_cell(self) -> bool:
        """`DefaultPoolConfigurator` scales the target's cell by (1 + draft layers / layers) for an EAGLE draft
        (`eagle_draft_num_layers`, 0.5.14 on); before, the target's pool reserves nothing for the draft's KV."""
        tree = self.tree(POOL_CONFIGURATOR)
        return tree is not None and "eagle_draft_num_layers" in _names_in(tree)

    @cached_property
    def replayssm_in_budget(self) -> bool:
        """`_handle_max_mamba_cache` skips the intermediate state under ReplaySSM."""
        fn = self._sizing_function("_handle_max_mamba_cache", "handle_max_mamba_cache")
        return fn is not None and any("replayssm" in name for name in _names_in(fn))

    @cached_property
    def replayssm_fixed_pool(self) -> bool:
        """GDN ReplaySSM rings are one fixed pool per request (`replayssm_fixed_bytes`, 0.5.19 on)
        rather than attached to every state slot (0.5.17-0.5.18)."""
        fn = self._sizing_function("_handle_max_mamba_cache", "handle_max_mamba_cache")
        return fn is not None and "replayssm_fixed_bytes" in _names_in(fn)

    @cached_property
    def replayssm_record_len_from_draft(self) -> bool:
        """The ring length is the draft-token count (0.5.17-0.5.18), not `linear_replayssm_cache_len`."""
        fn = self._sizing_function("_handle_max_mamba_cache", "handle_max_mamba_cache")
        return fn is not None and "max_speculative_num_draft_tokens" in _names_in(fn)

    @cached_property
    def multimodal_reservation(self) -> bool:
        """`_profile_available_bytes` subtracts `mm_runtime_reservation_gb(...)` from the budget."""
        fn = self._sizing_function("_profile_available_bytes")
        return fn is not None and "mm_runtime_reservation_gb" in _names_in(fn)

    @cached_property
    def env_defaults(self) -> dict[str, object]:
        """`SGLANG_X = EnvInt(100)` and the like in `srt/environ.py`; a product of int literals too
        (`EnvInt(1 * 1024)`, `SGLANG_MM_FEATURE_CACHE_MB`), which `literal_eval` refuses."""
        tree = self.tree("srt/environ.py")
        found: dict[str, object] = {}
        for node in ast.walk(tree) if tree else []:
            if (isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name)
                    and isinstance(node.value, ast.Call) and node.value.args):
                try:
                    found[node.targets[0].id] = ast.literal_eval(node.value.args[0])
                except (ValueError, TypeError, SyntaxError):
                    product = _constant_int(node.value.args[0])
                    if product is not None:
                        found[node.targets[0].id] = product
        return found

    @cached_property
    def multimodal_archs(self) -> set[str]:
        tree = self.tree("srt/configs/model_config.py")
        return _string_list(tree, "multimodal_model_archs") if tree else set()

    @cached_property
    def spec_algorithms(self) -> set[str]:
        """Names `--speculative-algorithm` accepts: `SpeculativeAlgorithm` members and aliases."""
        tree = self.tree("srt/speculative/spec_info.py")
        names: set[str] = set()
        for node in ast.walk(tree) if tree else []:
            if isinstance(node, ast.ClassDef) and node.name == "SpeculativeAlgorithm":
                names |= {t.id for stmt in node.body if isinstance(stmt, ast.Assign)
                          for t in stmt.targets if isinstance(t, ast.Name)}
        if tree is not None:
            names |= _string_list(tree, "_RESERVED_ALIASES") or {"NEXTN"}
        return names

    @cached_property
    def spec_default_max_running(self) -> int | None:
        """What the speculative hook sets `max_running_requests` to when it is unset (48)."""
        for rel in ("srt/arg_groups/speculative_hook.py", "srt/server_args.py"):
            tree = self.tree(rel)
            for node in ast.walk(tree) if tree else []:
                if (isinstance(node, ast.Assign) and len(node.targets) == 1
                        and isinstance(node.targets[0], ast.Attribute)
                        and node.targets[0].attr == "max_running_requests"
                        and isinstance(node.value, ast.Constant) and isinstance(node.value.value, int)):
                    return node.value.value
                # 0.5.19 on: `get_context().override(..., max_running_requests=48)`
                if isinstance(node, ast.Call):
                    for kw in node.keywords:
                        if (kw.arg == "max_running_requests" and isinstance(kw.value, ast.Constant)
                                and isinstance(kw.value.value, int)):
                            return kw.value.value
        return None

    @cached_property
    def tool_call_parsers(self) -> set[str]:
        tree = self.tree("srt/function_call/function_call_parser.py")
        return _string_keys(tree, "ToolCallParserEnum") if tree else set()

    @cached_property
    def reasoning_parsers(self) -> set[str]:
        tree = self.tree("srt/parser/reasoning_parser.py")
        return _string_keys(tree, "DetectorMap") if tree else set()

    @cached_property
    def requested_capped_by_estimate(self) -> bool:
        """`_resolve_max_num_reqs` caps a set --max-running-requests by its pool-size estimate
        (`min(max_num_reqs // self.dp_size, estimated)`, 0.5.10-0.5.13) rather than by half the
        token capacity (0.5.14 on)."""
        fn = self._sizing_function("_resolve_max_num_reqs", "resolve_max_num_reqs")
        for node in ast.walk(fn) if fn is not None else []:
            if (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "min"
                    and any("dp_size" in _names_in(arg) for arg in node.args)
                    and any(isinstance(arg, ast.Name) and arg.id == "estimated" for arg in node.args)):
                return True
        return False

    @cached_property
    def context_length_keys(self) -> tuple[str, ...]:
        """`CONTEXT_LENGTH_KEYS` in the order `get_context_length` tries them (the first present wins)."""
        for rel in CONTEXT_FILES:
            tree = self.tree(rel)
            for node in tree.body if tree is not None else []:
                if (isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "CONTEXT_LENGTH_KEYS"
                                                         for t in node.targets)
                        and isinstance(node.value, (ast.List, ast.Tuple))):
                    return tuple(e.value for e in node.value.elts
                                 if isinstance(e, ast.Constant) and isinstance(e.value, str))
        return ("max_position_embeddings",)

    def allreduce_buffers(self, environ: dict[str, str]) -> AllReduceBuffers:
        """What the custom all-reduce allocates per rank before the weights load: `CustomAllreduce`'s
        `meta_size() + max_size`, `max_size` and `rank_data` of `_MAX_CAR_SIZE` (the first, CUDA, value in
        custom_all_reduce.py); where `SGLANG_OPT_USE_CUSTOM_ALL_REDUCE_V2` is on, `CustomAllreduceV2`'s pull
        and push workspaces of up to `SGLANG_CUSTOM_ALL_REDUCE_V2_MAX_SIZE_KB` each."""
        v1 = 8192 * 1024
        tree = self.tree(CUSTOM_AR_FILE)
        for node in ast.walk(tree) if tree is not None else []:
            if isinstance(node, ast.ClassDef) and node.name == "CustomAllreduce":
                for stmt in node.body:
                    if (isinstance(stmt, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "_MAX_CAR_SIZE"
                                                              for t in stmt.targets)):
                        v1 = _constant_int(stmt.value) or v1
                        break
        v2 = None
        v2_kb = _int_or_none(environ.get("SGLANG_CUSTOM_ALL_REDUCE_V2_MAX_SIZE_KB")) or _int_or_none_value(
            self.env_defaults.get("SGLANG_CUSTOM_ALL_REDUCE_V2_MAX_SIZE_KB"))
        if v2_kb is not None and self.env_flag("SGLANG_OPT_USE_CUSTOM_ALL_REDUCE_V2", environ):
            v2 = 2 * int(v2_kb) * 1024
        return AllReduceBuffers(v1_bytes=3 * v1, v2_bytes=v2)

    @cached_property
    def dflash_draft_tp(self) -> str | None:
        """How the release prices a DFLASH draft's KV into the target's cell (patchkit/doctor/dflash.py):
        None without `scale_kv_cell_size_per_token_for_dflash` (no DFLASH: 0.5.10), "layers" where no
        call passes a draft cell (0.5.11-0.5.17), else the parallel size the call to
        `dflash_draft_cell_size_per_token` divides the draft's KV heads by: "tp_size" (0.5.18-0.5.21)
        or "attn_tp_size" (0.5.22 on, `get_parallel().attn_tp_size` or the draft's attention-TP size)."""
        utils = self.tree(DFLASH_UTILS)
        if utils is None or not _functions(utils, ("scale_kv_cell_size_per_token_for_dflash",)):
            return None
        for rel in DFLASH_CELL_CALLERS:
            tree = self.tree(rel)
            for node in ast.walk(tree) if tree is not None else []:
                if (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
                        and node.func.id == "dflash_draft_cell_size_per_token"):
                    for kw in node.keywords:
                        if kw.arg == "tp_size":
                            named = kw.value.attr if isinstance(kw.value, ast.Attribute) else getattr(kw.value, "id", "")
                            return "tp_size" if named == "tp_size" else "attn_tp_size"
        return "layers"

    @cached_property
    def longer_context_raises(self) -> bool:
        """`ModelConfig._derive_context_length` raises on a --context-length above the model's own
        unless SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN is set (rather than only warning)."""
        tree = self.tree("srt/configs/model_config.py")
        fn = _functions(tree, ("_derive_context_length",)) if tree is not None else []
        return bool(fn) and "SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN" in _names_in(fn[0]) \
            and any(isinstance(node, ast.Raise) for node in ast.walk(fn[0]))

    def env_flag(self, name: str, environ: dict[str, str]) -> bool:
        """An `EnvBool` (or a plain variable read as one) as the release reads it."""
        value = self.env(name, environ)
        if isinstance(value, str):
            return value.strip().lower() in ("1", "true", "yes", "on")
        return bool(value)

    @cached_property
    def mamba_strategy_dest(self) -> str:
        """The field the mamba radix-cache strategy lands in: `mamba_radix_cache_strategy` (0.5.14 on,
        where `--mamba-scheduler-strategy` is a deprecated alias of it), `mamba_scheduler_strategy`
        before (0.5.10-0.5.13, its only spelling)."""
        dests = self.flags.dests()
        return "mamba_radix_cache_strategy" if "mamba_radix_cache_strategy" in dests else "mamba_scheduler_strategy"

    def _argument_trees(self) -> list[ast.Module]:
        rels = ["srt/server_args.py", *self.files.python_files("srt/arg_groups")]
        return [tree for tree in (self.tree(rel) for rel in rels) if tree is not None]

    @cached_property
    def mamba_auto_always_no_buffer(self) -> bool:
        """The strategy's `auto` always becomes no_buffer (0.5.10-0.5.13: `if ... == "auto":
        self.mamba_scheduler_strategy = "no_buffer"`), rather than extra_buffer where overlap or
        paging is wanted and the architecture supports it (0.5.14 on)."""
        branches = [b for tree in self._argument_trees() for b in _strategy_auto_branches(tree)]
        if not branches:
            return False
        return all("extra_buffer" not in _string_constants(b) and "no_buffer" in _string_constants(b)
                   for b in branches)

    @cached_property
    def no_buffer_asserts_overlap(self) -> bool:
        """An explicit no_buffer with the overlap scheduler on asserts at startup ("no_buffer do not
        support overlap schedule", 0.5.14 on); earlier releases turn overlap off themselves."""
        return any(any("no_buffer do not support overlap" in text for text in _string_constants(tree))
                   for tree in self._argument_trees())

    def defines_class(self, folder: str, name: str) -> bool:
        """Whether a module under `sglang/<folder>` defines class `name` (e.g. a model architecture)."""
        needle = f"class {name}".encode()
        for rel in self.files.python_files(folder):
            data = self.files.read(rel)
            if data is None or needle not in data:  # cheap pre-filter; the parse below decides
                continue
            tree = self.tree(rel)
            if tree is not None and any(isinstance(n, ast.ClassDef) and n.name == name for n in ast.walk(tree)):
                return True
        return False

    def env(self, name: str, environ: dict[str, str]) -> object:
        """An `SGLANG_*` variable as the release reads it: the environment, else its default."""
        default = self.env_defaults.get(name)
        raw = environ.get(name)
        if raw is None:
            return default
        if isinstance(default, bool):
            return raw.strip().lower() in ("1", "true", "yes", "on")
        if isinstance(default, int):
            try:
                return int(raw)
            except ValueError:
                return default
        return raw

    def env_number(self, name: str, environ: dict[str, str]) -> int | float | None:
        """`env(name)` when it is a number (an `EnvInt`/`EnvFloat` and a readable value), else None."""
        value = self.env(name, environ)
        return value if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def _int_or_none(text: str | None) -> int | None:
    try:
        return None if text is None else int(text)
    except ValueError:
        return None


def _int_or_none_value(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _constant_int(node: ast.AST) -> int | None:
    """An int literal or a product/sum of them (`8192 * 1024`), else None."""
    if isinstance(node, ast.Constant) and isinstance(node.value, int) and not isinstance(node.value, bool):
        return node.value
    if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Mult, ast.Add)):
        left, right = _constant_int(node.left), _constant_int(node.right)
        if left is None or right is None:
            return None
        return left * right if isinstance(node.op, ast.Mult) else left + right
    return None


def _strategy_auto_branches(tree: ast.AST) -> list[ast.If]:
    """`if self.mamba_*_strategy == "auto":` blocks (the strategy's own resolution)."""
    found = []
    for node in ast.walk(tree):
        if (isinstance(node, ast.If) and isinstance(node.test, ast.Compare) and len(node.test.comparators) == 1
                and isinstance(node.test.left, ast.Attribute) and node.test.left.attr.endswith("_strategy")
                and node.test.left.attr.startswith("mamba_")
                and isinstance(node.test.comparators[0], ast.Constant) and node.test.comparators[0].value == "auto"):
            found.append(node)
    return found


def _string_constants(node: ast.AST) -> set[str]:
    return {sub.value for sub in ast.walk(node) if isinstance(sub, ast.Constant) and isinstance(sub.value, str)}


def read(version: str, source: "Path | ReleaseFiles") -> ReleaseCode:
    """A release from its `sglang/` folder or any `ReleaseFiles` (a wheel: `WheelFiles`)."""
    return ReleaseCode(version=version, files=FolderFiles(source) if isinstance(source, Path) else source)
