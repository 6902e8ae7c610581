"""symm-mem-kill-switch: stop torch symmetric memory before its native rendezvous crashes.

Where the switch lives, and why: in SGLang's own module that calls symmetric memory
(`triton_symm_mem_ag.py`), installed when that module is imported. Every SGLang process that
can reach `MultimemAllGatherer._build()` (the spawned rank-0 scheduler included) imports that
module first, so the switch is always in place before native code runs, for every way of
installing SGLang (venv, container image, read-only mount) with no startup hook, no
`sitecustomize.py` and no torch import in unrelated processes. `revert` removes it byte-exactly.

Automatic by default (`SGLANG_PATCH_DISABLE_SYMM_MEM` unset or `auto`): the switch wraps
`empty`/`rendezvous`, and their first call decides, once per process and before any native
symmetric-memory code runs, whether the native rendezvous would crash here: the host is WSL2
(kernel release), a visible GPU has no multicast support (torch's own
`_SymmetricMemory.has_multicast_support`, the CUDA device attribute), or two visible GPUs lack
peer access (`torch.cuda.can_device_access_peer`). Only then do they raise (so `_build()` falls
back to NCCL); on NVSwitch boxes torch's functions run. Nothing is initialised for the decision:
without an initialised CUDA device there are no facts to read and it blocks (the safe side).
`=1` always blocks, `=0` installs nothing. One log line says which way it decided and why. Every
rank sees the same host and visible GPUs, so all ranks decide alike (a rendezvous is collective).
The `--enable-torch-symm-mem` guard asks the same decision.
"""

from __future__ import annotations

from collections.abc import Callable

import libcst as cst
import libcst.matchers as m

from patchkit.anchor import Anchor
from patchkit.constants import ENV_DISABLE
from patchkit.edits import edit
from patchkit.errors import AnchorError
from patchkit.launch_trigger import Trigger
from patchkit.matchers import capture
from patchkit.patch import Patch
from patchkit.template import Snippet
from patchkit.upstream_change import MERGED, OPEN, UpstreamChange

MULTIMEM_AG = "sglang/srt/distributed/device_communicators/triton_symm_mem_ag.py"
TORCH_SYMM_MEM = "sglang/srt/distributed/device_communicators/torch_symm_mem.py"
ENV = "SGLANG_PATCH_DISABLE_SYMM_MEM"
SWITCH = "_patchkit_symm_mem_kill_switch"
DECIDE = "_patchkit_symm_mem_blocked"

KILL_SWITCH = Snippet('''
def {decide}():
    """patchkit symm-mem-kill-switch: why torch symmetric memory must not run in this process
    ("" when it may), decided once, before its first native call, from what the process already
    has (it initialises nothing). {env}=auto (the default) blocks it only where the native
    rendezvous would crash (SIGFPE, which no try/except catches): a WSL2 host, or GPUs without
    multicast or without peer access; {env}=1 always blocks it, 0 never does."""
    verdict = {decide}.__dict__
    if "reason" in verdict:
        return verdict["reason"]
    import logging
    import os
    import platform

    import torch

    setting = os.environ.get("{env}", "auto").strip().lower()
    reason, why = "", ""
    if setting == "0":
        why = "{env}=0"
    elif setting == "1":
        reason = "{env}=1"
    elif "microsoft" in platform.release().lower():
        reason = "auto: WSL2 host"
    elif not (torch.cuda.is_available() and torch.cuda.is_initialized()):
        reason = "auto: no initialised CUDA device whose facts could be read"
    else:
        count = torch.cuda.device_count()
        why = f"auto: {{count}} GPU(s) with multicast and peer access, not WSL2"
        try:
            for device in range(count):
                if not {alias}._SymmetricMemory.has_multicast_support({alias}.DeviceType.CUDA, device):
                    reason = f"auto: GPU {{device}} has no multicast support"
                    break
                blind = [peer for peer in range(count) if peer != device and not torch.cuda.can_device_access_peer(device, peer)]
                if blind:
                    reason = f"auto: GPU {{device}} has no peer access to GPU {{blind[0]}}"
                    break
        except Exception as exc:  # this torch cannot tell: the safe side
            reason = f"auto: device facts unreadable ({{type(exc).__name__}}: {{exc}})"
    logging.getLogger(__name__).warning(
        "patchkit symm-mem-kill-switch: torch symmetric memory %s (%s)",
        "blocked, SGLang falls back to NCCL" if reason else "allowed",
        reason or why,
    )
    verdict["reason"] = reason
    return reason


def {switch}():
    """patchkit symm-mem-kill-switch: torch symmetric memory's empty/rendezvous raise a Python
    error, which lets _build() fall back to NCCL, where {decide}() says the native rendezvous
    would crash. {env}=0, or {disable} listing symm-mem-kill-switch, leaves them untouched."""
    import os

    if os.environ.get("{env}", "auto").strip().lower() == "0" or "symm-mem-kill-switch" in [
        item.strip() for item in os.environ.get("{disable}", "").split(",")
    ]:
        return

    def guarded(real):
        def call(*args, **kwargs):
            reason = {decide}()
            if reason:
                raise RuntimeError(
                    "torch symmetric memory is off: patchkit's symm-mem kill switch stops it before "
                    f"its native rendezvous ({{reason}}); set {env}=0 to allow it"
                )
            return real(*args, **kwargs)

        return call

    {alias}.empty = guarded({alias}.empty)
    {alias}.rendezvous = guarded({alias}.rendezvous)


{switch}()
''', blank_lines_before=2, switch=SWITCH, decide=DECIDE, env=ENV, disable=ENV_DISABLE)

# `import os` is common; the `if` is what marks the guard.
FLAG_GUARD = Snippet('''
import os

if os.environ.get("{env}", "auto").strip().lower() != "0" and "symm-mem-kill-switch" not in [
    item.strip() for item in os.environ.get("{disable}", "").split(",")
]:
    from sglang.srt.distributed.device_communicators.triton_symm_mem_ag import {decide}

    symm_mem_off = {decide}()
    if symm_mem_off:
        raise RuntimeError(
            "--enable-torch-symm-mem needs torch symmetric memory, which patchkit's symm-mem "
            f"kill switch turns off here ({{symm_mem_off}}); set {env}=0 to use it, or drop the flag"
        )
''', mark_statement=1, env=ENV, decide=DECIDE, disable=ENV_DISABLE)
COMMUNICATOR_CLASS = Anchor("TorchSymmMemCommunicator", marks=(FLAG_GUARD,), watch=("__init__",))

_SYMM_MEM_IMPORT = m.SimpleStatementLine(
    body=[m.Import(names=[m.ImportAlias(
        name=m.Attribute(value=m.Attribute(value=m.Name("torch"), attr=m.Name("distributed")), attr=m.Name("_symmetric_memory")),
        asname=m.AsName(name=m.SaveMatchedNode(m.Name(), "alias")),
    )])]
)
_IMPORT = m.SimpleStatementLine(body=[m.Import() | m.ImportFrom()])
_DOCSTRING = m.SimpleStatementLine(body=[m.Expr(value=m.SimpleString() | m.ConcatenatedString())])
# sglang#36110 (merged): SGLANG_DISABLE_MULTIMEM_AG, a switch a user sets by hand (off by default).
_UPSTREAM_SWITCH = m.SimpleString(value=m.MatchIfTrue(lambda raw: "SGLANG_DISABLE_MULTIMEM_AG" in raw)) | m.Attribute(
    attr=m.Name("SGLANG_DISABLE_MULTIMEM_AG")
)
# sglang#40485 (open): MultimemAllGatherer turns multimem off by itself where the local GPUs have no
# peer access (torch.cuda.can_device_access_peer), outside this patch's own functions.
_ASKS_PEER_ACCESS = m.Call(func=m.Attribute(attr=m.Name("can_device_access_peer")))
_OURS = m.FunctionDef(name=m.Name(m.MatchIfTrue(lambda name: name.startswith("_patchkit_"))))


def _asks_peer_access(tree: cst.Module) -> bool:
    return any(m.findall(node, _ASKS_PEER_ACCESS) for node in tree.body if not m.matches(node, _OURS))


def _holds(found: Callable[[cst.Module], bool]) -> Callable[[Callable[[str], bytes | None]], bool]:
    """Whether a tree's multimem all-gather module holds a shape (for `track`)."""
    def check(read: Callable[[str], bytes | None]) -> bool:
        data = read(MULTIMEM_AG)
        if data is None:
            return False
        try:
            return found(cst.parse_module(data))
        except cst.ParserSyntaxError:
            return False
    return check


class SymmMemKillSwitch(Patch):
    ID = "symm-mem-kill-switch"
    TITLE = "Stop torch symmetric memory before its native rendezvous crashes (SIGFPE) on PCIe/WSL2 boxes"
    RATIONALE = (
        "On PCIe-only / WSL2 multi-GPU boxes MultimemAllGatherer._build() calls torch symmetric-memory "
        "empty/rendezvous and rank 0 dies with SIGFPE in native code ('Rank 0 scheduler died during "
        "initialization (exit code: -8)'). _build() already falls back to NCCL on a Python exception, so "
        "empty and rendezvous raise RuntimeError before native code runs where it would crash. "
        f"{ENV}=auto (default): only on WSL2 or where the GPUs lack multicast or peer access, decided "
        "in-process on the first call, one log line; =1 always, =0 never. Where the switch blocks, "
        "--enable-torch-symm-mem fails at once with a message naming the switch."
    )
    UPSTREAM = ("sgl-project/sglang#36110 (merged 2026-08-23, in no release up to 0.5.23): SGLANG_DISABLE_MULTIMEM_AG, "
                "a switch set by hand",
                "sgl-project/sglang#40485 (open): MultimemAllGatherer off where the local GPUs have no peer access")
    DROP_WHEN = ("drop when MultimemAllGatherer turns torch symmetric memory off by itself where its rendezvous would "
                 "crash (#40485 for GPUs without peer access); #36110's SGLANG_DISABLE_MULTIMEM_AG only lets a user "
                 "turn it off by hand, which a server on such a box does not do")
    DROP_WAITS_ON = (
        UpstreamChange("sgl-project/sglang#40485", OPEN, "2026-12-03",
                       "MultimemAllGatherer asks the driver for peer access and skips multimem without it",
                       _holds(_asks_peer_access)),
        UpstreamChange("sgl-project/sglang#36110", MERGED, "2026-12-03",
                       "SGLANG_DISABLE_MULTIMEM_AG forces the NCCL all-gather (off by default: a user sets it by hand)",
                       _holds(lambda tree: bool(m.findall(tree, _UPSTREAM_SWITCH)))),
    )
    UPSTREAM_NARROWER = ("MultimemAllGatherer skips symmetric memory only where the local GPUs have no peer access: "
                         "not on a WSL2 host or where a GPU has no multicast support, and --enable-torch-symm-mem "
                         "is not refused")
    APPLIES_TO = ">=0.5.15"
    LAUNCH = Trigger(level="error", hardware=("tp>1", "pcie-or-wsl"),
                     why="symmetric memory's rendezvous dies with SIGFPE on PCIe/WSL2 with TP > 1")
    TARGETS = (MULTIMEM_AG, TORCH_SYMM_MEM)
    REQUIRES = (MULTIMEM_AG,)
    ANCHORS = {TORCH_SYMM_MEM: (COMMUNICATOR_CLASS,)}
    MARKS = {MULTIMEM_AG: ((None, KILL_SWITCH),)}
    ANCHOR_SYMBOLS = ("MultimemAllGatherer",)  # the all-gatherer's file is patched at module level
    WATCH = ("MultimemAllGatherer._build", "create_state")
    RUNTIME_HOOK = {
        "module": "sglang.srt.distributed.device_communicators.triton_symm_mem_ag",
        "active": (
            "getattr(__import__('torch.distributed._symmetric_memory', fromlist=['empty']).empty, "
            f"'__qualname__', '').startswith('{SWITCH}.')"
        ),
        "opt_out": {ENV: "0"},
    }
    RUNTIME_SWITCH = (f"{ENV_DISABLE}=symm-mem-kill-switch", f"{ENV}=0")

    def is_fixed_upstream(self, path: str, tree: cst.Module) -> bool:
        # Upstream's fix, by its shape: the all-gatherer decides by itself (#40485's peer-access
        # check). #36110's switch alone is no fix: off by default, the crash stays until set by hand.
        return path == MULTIMEM_AG and _asks_peer_access(tree)

    def is_upstream_narrower(self, path: str, tree: cst.Module) -> bool:
        return self.is_fixed_upstream(path, tree)  # a peer-access check is all upstream has proposed

    @edit(m.Module(), "the module", files=(MULTIMEM_AG,))
    def install_switch(self, original_node: cst.Module, updated_node: cst.Module) -> cst.Module:
        body: list[cst.BaseStatement] = list(updated_node.body)
        imports = [s for s in body if m.matches(s, _SYMM_MEM_IMPORT)]
        if len(imports) != 1:
            raise AnchorError(f"anchor {'not found' if not imports else 'is ambiguous'}: import torch.distributed._symmetric_memory as <alias>")
        alias = capture(imports[0], _SYMM_MEM_IMPORT, "alias")
        assert isinstance(alias, cst.Name)
        # After the last top-level import, so the module's own imports stay together.
        last_import = max(i for i, s in enumerate(body) if m.matches(s, _IMPORT))
        body[last_import + 1:last_import + 1] = KILL_SWITCH.fill(alias=alias)
        return updated_node.with_changes(body=body)

    @m.call_if_inside(COMMUNICATOR_CLASS.matcher)
    @edit(m.FunctionDef(name=m.Name("__init__")), f"{COMMUNICATOR_CLASS.name}.__init__", files=(TORCH_SYMM_MEM,))
    def guard_init(self, original_node: cst.FunctionDef, updated_node: cst.FunctionDef) -> cst.FunctionDef:
        # First in __init__, after its docstring.
        assert isinstance(updated_node.body, cst.IndentedBlock)
        body = list(updated_node.body.body)
        start = 1 if body and m.matches(body[0], _DOCSTRING) else 0
        body[start:start] = FLAG_GUARD.fill()
        return updated_node.with_changes(body=updated_node.body.with_changes(body=body))
