"""symm-mem-kill-switch: stop torch symmetric memory before its native rendezvous crashes.

Where the switch lives, and why: in SGLang's own module that calls symmetric memory
(`triton_symm_mem_ag.py`), installed when that module is imported. Every SGLang process that
can reach `MultimemAllGatherer._build()` (the spawned rank-0 scheduler included) imports that
module first, so the switch is always in place before native code runs, for every way of
installing SGLang (venv, container image, read-only mount) with no startup hook, no
`sitecustomize.py` and no torch import in unrelated processes. `revert` removes it byte-exactly.
"""

from __future__ import annotations

import libcst as cst
import libcst.matchers as m

from patchkit.matchers import (
    classes,
    exactly_one,
    find_class,
    find_method,
    functions,
    insert_after,
    parse_statements,
    replace_method,
    string,
)
from patchkit.patch import Patch, SkipPatch

MULTIMEM_AG = "sglang/srt/distributed/device_communicators/triton_symm_mem_ag.py"
TORCH_SYMM_MEM = "sglang/srt/distributed/device_communicators/torch_symm_mem.py"
ENV = "SGLANG_PATCH_DISABLE_SYMM_MEM"
SWITCH = "_patchkit_symm_mem_kill_switch"

_SWITCH_SOURCE = f'''def {SWITCH}():
    """patchkit symm-mem-kill-switch: on PCIe-only / WSL2 multi-GPU boxes torch symmetric
    memory dies with SIGFPE inside native code, which no try/except catches. Raising a Python
    error first lets _build() fall back to NCCL. {ENV}=0 turns the switch off."""
    import os

    if os.environ.get("{ENV}", "1") == "0":
        return

    def refuse(*args, **kwargs):
        raise RuntimeError(
            "torch symmetric memory is off: patchkit's symm-mem kill switch stops it before "
            "its native rendezvous (SIGFPE on PCIe-only / WSL2 boxes); set {ENV}=0 to allow it"
        )

    {{alias}}.empty = refuse
    {{alias}}.rendezvous = refuse


{SWITCH}()
'''

_GUARD_SOURCE = f'''\
import os

if os.environ.get("{ENV}", "1") != "0":
    raise RuntimeError(
        "--enable-torch-symm-mem needs torch symmetric memory, which patchkit's symm-mem "
        "kill switch turns off; set {ENV}=0 to use it (NVLink boxes), or drop the flag"
    )
'''

_SYMM_MEM_IMPORT = m.SimpleStatementLine(
    body=[m.Import(names=[m.ImportAlias(
        name=m.Attribute(value=m.Attribute(value=m.Name("torch"), attr=m.Name("distributed")), attr=m.Name("_symmetric_memory")),
        asname=m.AsName(name=m.SaveMatchedNode(m.Name(), "alias")),
    )])]
)
_SWITCH_DEF = m.FunctionDef(name=m.Name(SWITCH))
_SWITCH_CALL = m.SimpleStatementLine(body=[m.Expr(value=m.Call(func=m.Name(SWITCH), args=[]))])
_READS_ENV = m.Call(func=m.Attribute(attr=m.Name("get")), args=[m.Arg(string(ENV)), m.ZeroOrMore()])
_GUARD = m.If(test=m.Comparison(left=_READS_ENV), body=m.IndentedBlock(body=[m.SimpleStatementLine(body=[m.Raise()])]))
_DOCSTRING = m.SimpleStatementLine(body=[m.Expr(value=m.SimpleString() | m.ConcatenatedString())])
# A future upstream switch for the multimem all-gather (issue text: SGLANG_DISABLE_MULTIMEM_AG).
_UPSTREAM_SWITCH = m.SimpleString(value=m.MatchIfTrue(lambda raw: "SGLANG_DISABLE_MULTIMEM_AG" in raw)) | m.Attribute(
    attr=m.Name("SGLANG_DISABLE_MULTIMEM_AG")
)


class SymmMemKillSwitch(Patch):
    ID = "symm-mem-kill-switch"
    TITLE = "Stop torch symmetric memory before its native rendezvous crashes (SIGFPE) on PCIe/WSL2 boxes"
    RATIONALE = (
        "On PCIe-only / WSL2 multi-GPU boxes MultimemAllGatherer._build() calls torch symmetric-memory "
        "empty/rendezvous and rank 0 dies with SIGFPE in native code ('Rank 0 scheduler died during "
        "initialization (exit code: -8)'). _build() already falls back to NCCL on a Python exception, so "
        "empty and rendezvous are replaced by functions raising RuntimeError before native code runs. "
        f"On by default; {ENV}=0 turns it off at run time (NVLink boxes). With the switch on, "
        "--enable-torch-symm-mem fails at once with a message naming the switch."
    )
    UPSTREAM = ("no upstream switch up to 0.5.23",)
    DROP_WHEN = "drop when a release honours SGLANG_DISABLE_MULTIMEM_AG (an upstream switch for the multimem all-gather)"
    APPLIES_TO = ">=0.5.15"
    TARGETS = (MULTIMEM_AG, TORCH_SYMM_MEM)
    REQUIRES = (MULTIMEM_AG,)
    ANCHOR_SYMBOLS = ("MultimemAllGatherer",)
    WATCH = ("MultimemAllGatherer._build", "create_state", "TorchSymmMemCommunicator.__init__")
    RUNTIME_HOOK = {
        "module": "sglang.srt.distributed.device_communicators.triton_symm_mem_ag",
        "active": (
            "getattr(__import__('torch.distributed._symmetric_memory', fromlist=['empty']).empty, "
            f"'__qualname__', '').startswith('{SWITCH}.')"
        ),
        "opt_out": {ENV: "0"},
    }

    def is_applied(self, path: str, tree: cst.Module) -> bool:
        if path == MULTIMEM_AG:
            return any(m.matches(s, _SWITCH_DEF) for s in tree.body) and any(m.matches(s, _SWITCH_CALL) for s in tree.body)
        return any(
            _guard_in(fn) for cls in classes(tree, "TorchSymmMemCommunicator") for fn in functions(cls)
            if fn.name.value == "__init__"
        )

    def is_fixed_upstream(self, path: str, tree: cst.Module) -> bool:
        if path != MULTIMEM_AG:
            return False
        return bool(m.findall(tree, _UPSTREAM_SWITCH))

    def transform(self, path: str, tree: cst.Module) -> cst.Module:
        if self.is_applied(path, tree):
            return tree
        if path == MULTIMEM_AG:
            return self._install_switch(path, tree)
        return self._guard_torch_symm_mem(path, tree)

    def _install_switch(self, path: str, tree: cst.Module) -> cst.Module:
        imports = [(s, m.extract(s, _SYMM_MEM_IMPORT)) for s in tree.body if m.matches(s, _SYMM_MEM_IMPORT)]
        _, captured = exactly_one(imports, "import torch.distributed._symmetric_memory as <alias>", path)
        alias = captured["alias"].value  # type: ignore[index,union-attr]
        # After the last top-level import, so the module's own imports stay together.
        last_import = [s for s in tree.body if m.matches(s, m.SimpleStatementLine(body=[m.Import() | m.ImportFrom()]))][-1]
        body = list(tree.body)
        position = body.index(last_import) + 1
        new = parse_statements(_SWITCH_SOURCE.replace("{alias}", alias), blank_lines_before=2)
        return tree.with_changes(body=[*body[:position], *new, *body[position:]])

    def _guard_torch_symm_mem(self, path: str, tree: cst.Module) -> cst.Module:
        if not classes(tree, "TorchSymmMemCommunicator"):
            raise SkipPatch(f"{path} has no TorchSymmMemCommunicator")
        cls = find_class(tree, "TorchSymmMemCommunicator", path)
        init = find_method(cls, "__init__", path)
        statements = list(init.body.body)
        guard = parse_statements(_GUARD_SOURCE)
        if statements and m.matches(statements[0], _DOCSTRING):
            new_init = insert_after(init, statements[0], guard)
        else:
            new_init = init.with_changes(body=init.body.with_changes(body=[*guard, *statements]))
        return replace_method(tree, cls, init, new_init)


def _guard_in(fn: cst.FunctionDef) -> bool:
    return any(m.matches(s, _GUARD) for s in fn.body.body)
