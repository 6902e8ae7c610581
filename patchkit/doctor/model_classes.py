"""The weights each rank holds, from the release's own model classes.

patchkit runs in a venv of its own, without torch; the release's classes need torch and SGLang's imports. So the
doctor starts `meta_build.py` (beside this file) as a script in an interpreter that has them: the serving Python
given by `--python`, else this one where it has torch. It is given the release's tree (an installed `sglang/`'s
folder, or the wheel itself for `--version`, imported from the zip), the card's compute capability and memory, and
the launch's arguments that shape the model; it builds the target (and the draft) on the `meta` device with the
release's TP / attention-DP / PP partitioning and answers the bytes of each. Nothing here imports torch.

Where no such interpreter is at hand, or the build fails, the budget falls back to the checkpoint's headers or
index (patchkit/doctor/tp_sharding.py) and says why in a note.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import tempfile
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator

from patchkit.base.constants import PACKAGE
from patchkit.doctor.flags import FlagTable
from patchkit.doctor.launch import written
from patchkit.releases import pristine
from patchkit.releases.pristine import WheelSource
from patchkit.store.target import Target

SCRIPT = Path(__file__).with_name("meta_build.py")
RESULT_PREFIX = "patchkit-meta-build: "  # meta_build.RESULT_PREFIX (that script imports nothing of patchkit)
TIMEOUT_S = 600
# The ServerArgs fields that decide which modules the release builds and how each is split; the rest of a launch
# (memory fractions, pools, graphs, schedules) changes no weight, and leaving it out keeps one build for every fix
# the doctor checks on the same launch.
SHAPING = frozenset({
    "model_path", "tokenizer_path", "revision", "trust_remote_code", "dtype", "quantization", "load_format",
    "kv_cache_dtype", "json_model_override_args", "language_only", "enable_multimodal", "tp_size", "pp_size",
    "dp_size", "enable_dp_attention", "attn_dp_size", "ep_size", "expert_parallel_size", "moe_a2a_backend",
    "moe_runner_backend", "enable_dp_lm_head", "mm_enable_dp_encoder", "disable_shared_experts_fusion",
    "enable_ep_moe", "enable_deepep_moe", "speculative_algorithm", "speculative_draft_model_path",
    "speculative_draft_model_revision", "speculative_draft_model_quantization", "speculative_num_steps",
    "speculative_eagle_topk", "speculative_num_draft_tokens", "speculative_draft_load_format",
})


@dataclass(frozen=True)
class ClassWeights:
    """What the release's classes allocate per GPU (parameters and buffers, bytes)."""

    target_bytes: int  # the pipeline stage that holds the most
    target_class: str
    quantization: str | None
    draft_bytes: int | None  # None: no speculative decoding
    draft_own_vocab_bytes: int  # the draft's own embed/lm_head (set_embed_and_head swaps in the target's)
    draft_class: str | None
    server_args: str  # how the release's ServerArgs were had ("resolved ...", "unresolved: ...")
    # (parameter bytes, buffer bytes) of each top-level submodule: the target's largest stage, the draft's
    target_parts: dict[str, tuple[int, int]] = field(default_factory=dict)
    draft_parts: dict[str, tuple[int, int]] = field(default_factory=dict)
    draft_error: str | None = None  # the draft's class could not be built (its figure then comes from its checkpoint)


@dataclass(frozen=True)
class Unavailable:
    reason: str
    tried: bool = False  # the release's classes were built from this config and failed (not: no interpreter)


@contextmanager
def release_tree(target: Target | WheelSource) -> Iterator[str]:
    """The folder to import the release from: an installed tree's, the cached pristine install of a wheel's
    release, else the wheel's `sglang/` unpacked into a temporary folder removed after (SGLang finds some of its
    files by path, so it does not import from the zip; nothing is left in the cache)."""
    if not isinstance(target, WheelSource):
        yield str(target.package_dir.parent)
        return
    cached = pristine.cached_tree(target.version)
    if cached is not None:
        yield str(cached)
        return
    with tempfile.TemporaryDirectory(prefix="patchkit-doctor-") as folder:
        root = Path(folder).resolve()
        # The process's one open zip of this wheel (pristine.open_wheel), which the WheelSource reads on from:
        # never closed here.
        wheel = pristine.open_wheel(target.wheel)
        for info in wheel.infolist():
            dest = (root / info.filename).resolve()
            if info.is_dir() or not info.filename.startswith(PACKAGE + "/") or root not in dest.parents:
                continue  # only the package, and nothing that would land outside the folder
            dest.parent.mkdir(parents=True, exist_ok=True)
            dest.write_bytes(wheel.read(info))
        yield str(root)


def interpreter(python: str | None) -> str | None:
    """The interpreter to build in: --python, else this one where it has torch, else None. A path is made absolute
    here: the build's child runs in / (a bare name is looked up on PATH as before)."""
    if python:
        return os.path.abspath(python) if os.sep in python else python
    return sys.executable if importlib.util.find_spec("torch") is not None else None


def shaping_args(args: list[str], table: FlagTable) -> list[str]:
    """The launch's flags that shape the model (SHAPING), as written: what one build is kept for."""
    return [token for piece in written(args, table) if piece.flag is not None and piece.flag.dest in SHAPING
            for token in piece.tokens]


def known_args(args: list[str], table: FlagTable) -> list[str]:
    """The launch's flags this release has, as written (the release's parser would stop at any other): what the
    child resolves, so the release's own checks see the launch as it is."""
    return [token for piece in written(args, table) if piece.flag is not None for token in piece.tokens]


_BUILT: dict[tuple, ClassWeights | Unavailable] = {}


def _key(python: str, tree: str | None, args: list[str], sm: tuple[int, int] | None, memory_gib: float | None,
         gpus: int | None) -> tuple:
    return python, tree, tuple(args), sm, memory_gib, gpus


def _result(raw: dict) -> ClassWeights | Unavailable:
    if not raw.get("ok"):
        return Unavailable(f"the release's model classes could not be built on meta ({raw.get('stage')}: "
                           f"{raw.get('error')})", tried=True)
    draft = raw.get("draft")
    largest = max(raw["target"], key=lambda stage: stage["params"] + stage["buffers"])
    quantization = raw.get("quantization")
    if quantization and "after_loading" in raw:
        failed = raw["after_loading"].get("failed") or {}
        quantization += (", quantized online: after process_weights_after_loading" +
                         (f" (not run here for {', '.join(f'{n} {k}' for k, n in failed.items())})" if failed else ""))
    return ClassWeights(
        target_bytes=largest["params"] + largest["buffers"], target_class=raw["target_class"],
        quantization=quantization,
        draft_bytes=None if draft is None else draft["params"] + draft["buffers"],
        draft_own_vocab_bytes=0 if draft is None else draft["own_vocab"],
        draft_class=None if draft is None else draft["class"], server_args=raw.get("server_args", ""),
        target_parts={k: (v[0], v[1]) for k, v in largest.get("parts", {}).items()},
        draft_parts={k: (v[0], v[1]) for k, v in (draft or {}).get("parts", {}).items()},
        draft_error=raw.get("draft_error"))


def build(python: str, tree: str | None, launches: list[list[str]], sm: tuple[int, int] | None,
          memory_gib: float | None, gpus: int | None, table: FlagTable | None = None) -> list[ClassWeights | Unavailable]:
    """One child process builds every launch not built yet in this process. With the release's flag `table`, a
    build is kept per launch shape (the flags in SHAPING: a fix to a fraction or a pool reuses it) and the child
    gets the launch's known flags; without it, per launch as given."""
    keys = [_key(python, tree, shaping_args(args, table) if table else args, sm, memory_gib, gpus) for args in launches]
    given = {key: known_args(args, table) if table else args for key, args in zip(keys, launches)}
    missing = list(dict.fromkeys(k for k in keys if k not in _BUILT))
    if missing:
        request = {"tree": tree, "sm": list(sm) if sm else None, "gpus": gpus,
                   "gpu_memory_mib": memory_gib * 1024 if memory_gib else None,
                   "launches": [given[k] for k in missing]}
        env = {**os.environ, "CUDA_VISIBLE_DEVICES": "", "PYTHONWARNINGS": "ignore"}  # no GPU is touched
        env.pop("PYTHONPATH", None)
        try:
            done = subprocess.run([python, str(SCRIPT)], input=json.dumps(request), capture_output=True, text=True,
                                  env=env, timeout=TIMEOUT_S, check=False, cwd="/")
            line = next((ln for ln in reversed(done.stdout.splitlines()) if ln.startswith(RESULT_PREFIX)), None)
            if line is None:
                last = (done.stderr.strip().splitlines() or [f"exit status {done.returncode}"])[-1]
                raise RuntimeError(f"{python} gave no answer ({last[:300]})")
            results = json.loads(line[len(RESULT_PREFIX):])["results"]
            for key, raw in zip(missing, results):
                _BUILT[key] = _result(raw)
        except (OSError, subprocess.SubprocessError, RuntimeError, ValueError, KeyError) as exc:
            for key in missing:
                _BUILT[key] = Unavailable(f"the release's model classes could not be built in {python}: {exc}")
    return [_BUILT[k] for k in keys]
