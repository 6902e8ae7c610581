"""The multimodal feature-transport pool: GPU memory a release allocates after its KV pool is sized (sglang#35777).

With CUDA-IPC feature transport, the tokenizer manager's multimodal processor (built in the main process while the
scheduler starts) allocates one pool of `SGLANG_MM_FEATURE_CACHE_MB` on `base_gpu_id`
(`multimodal/processors/base_processor.py`, `MmItemMemoryPool`). The scheduler's memory profiling does not see it: it
lands in the rest `(1 - mem_fraction_static) x free` that start-up's CUDA-graph capture runs in (sglang#34141's
account, which from 0.5.18 reserves it out of the KV budget instead: `mm_runtime_reservation_gb`). The transport is
what the release's resolver gives the launch (`_handle_multimodal_feature_transport` in `server_args.py`,
`handle_multimodal_feature_transport` in `arg_groups/serving_hook.py`): `--mm-feature-transport`, else
`--keep-mm-feature-on-device` (where the resolver maps it to cuda_ipc), else `SGLANG_USE_CUDA_IPC_TRANSPORT` where set,
else the resolver's own choice: 0.5.17 picks cuda_ipc for a single-node CUDA launch without disaggregation (later
releases pick cpu). Read from the release's code; docs/doctor.md states it.
"""

from __future__ import annotations

import ast

from patchkit.doctor.launch import Launch
from patchkit.doctor.model import ModelFacts
from patchkit.doctor.release import ReleaseCode

MIB = 1 << 20

RESOLVERS = (("srt/server_args.py", "_handle_multimodal_feature_transport"),
             ("srt/arg_groups/serving_hook.py", "handle_multimodal_feature_transport"))
TRANSPORT = "requested_transport"


def is_multimodal(release: ReleaseCode, launch: Launch, model: ModelFacts) -> bool:
    """The release treats the model as multimodal (its `multimodal_model_archs`, or a vision/audio tower in the
    config) and the launch is not `--language-only`."""
    return (model.arch in release.multimodal_archs or model.has_vision) and not launch.get("language_only", False)


def _resolver(release: ReleaseCode) -> ast.FunctionDef | None:
    for rel, name in RESOLVERS:
        tree = release.tree(rel)
        for node in ast.walk(tree) if tree is not None else []:
            if isinstance(node, ast.FunctionDef) and node.name == name:
                return node
    return None


def _names(node: ast.AST) -> set[str]:
    return {n.id if isinstance(n, ast.Name) else n.attr for n in ast.walk(node) if isinstance(n, (ast.Name, ast.Attribute))}


def _sets_cuda_ipc(stmts: list[ast.stmt]) -> bool:
    return any(isinstance(s, ast.Assign) and any(isinstance(t, ast.Name) and t.id == TRANSPORT for t in s.targets)
               and isinstance(s.value, ast.Constant) and s.value.value == "cuda_ipc" for s in stmts)


def _single_node_test(test: ast.expr) -> bool:
    """`... nnodes == 1 ...`."""
    return any(isinstance(c, ast.Compare) and "nnodes" in _names(c.left) and isinstance(c.ops[0], ast.Eq)
               and isinstance(c.comparators[0], ast.Constant) and c.comparators[0].value == 1 for c in ast.walk(test))


def auto_cuda_ipc(release: ReleaseCode) -> bool:
    """The release's resolver gives an unset transport cuda_ipc on a single-node launch (0.5.17): a branch tested on
    `nnodes == 1` that assigns `requested_transport = "cuda_ipc"`."""
    fn = release.memoized("mm_feature_resolver", _resolver)
    return fn is not None and any(isinstance(n, ast.If) and _single_node_test(n.test) and _sets_cuda_ipc(n.body)
                                  for n in ast.walk(fn))


def transport(release: ReleaseCode, launch: Launch, environ: dict[str, str]) -> str:
    """The feature transport the release resolves for this launch: cuda_ipc, cuda_vmm or cpu."""
    named = launch.get("mm_feature_transport")
    if named:
        return str(named)
    resolver = release.memoized("mm_feature_resolver", _resolver)
    if resolver is not None and launch.get("keep_mm_feature_on_device", False):
        return "cuda_ipc"
    if "SGLANG_USE_CUDA_IPC_TRANSPORT" in environ:
        return "cuda_ipc" if release.env("SGLANG_USE_CUDA_IPC_TRANSPORT", environ) is True else "cpu"
    single_node = (launch.int_value("nnodes") or 1) == 1
    if (auto_cuda_ipc(release) and single_node and str(launch.get("disaggregation_mode") or "null") == "null"
            and not launch.get("encoder_only", False)):
        return "cuda_ipc"
    return "cpu"


def late_pool_bytes(release: ReleaseCode, launch: Launch, model: ModelFacts, environ: dict[str, str]) -> int:
    """The feature pool that lands in the rest after the KV pool is sized: `SGLANG_MM_FEATURE_CACHE_MB` (the launch's
    environment, else the release's default) on a multimodal launch whose transport is cuda_ipc, in a release that
    does not reserve it in the KV budget; 0 otherwise."""
    if release.multimodal_reservation or not is_multimodal(release, launch, model):
        return 0
    if transport(release, launch, environ) != "cuda_ipc":
        return 0
    mb = release.env_number("SGLANG_MM_FEATURE_CACHE_MB", environ)
    return int(mb * MIB) if mb else 0
