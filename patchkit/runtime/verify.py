"""Check a patched environment without changing it: recorded bytes, compilation, imports and
runtime hooks in a fresh child interpreter of that environment."""

from __future__ import annotations

from typing import Any

import json
import os
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

from patchkit.engine import decide, patch_status, registry
from patchkit.store import state as state_mod
from patchkit.store.target import Target
from patchkit.base.util import sha256

OK, FAILED, SKIPPED = "ok", "failed", "skipped"


@dataclass(frozen=True)
class Check:
    name: str  # what was checked: a file, a module, a hook
    result: str  # ok / failed / skipped
    detail: str = ""

    def to_dict(self) -> dict:
        return {"check": self.name, "result": self.result, "detail": self.detail}


@dataclass
class Report:
    target: Target
    checks: list[Check] = field(default_factory=list)
    statuses: list[patch_status.PatchStatus] = field(default_factory=list)

    @property
    def failed(self) -> list[Check]:
        return [c for c in self.checks if c.result == FAILED]

    def not_applied(self) -> list[patch_status.PatchStatus]:
        """Patches this release needs that are not in place (what --strict refuses)."""
        return [s for s in self.statuses if s.state not in (patch_status.APPLIED, patch_status.UPSTREAM_FIXED, patch_status.NOT_APPLICABLE)]


# Runs in the child: imports modules and evaluates hooks, prints one JSON object.
_CHILD = r"""
import importlib, json, sys
job = json.loads(sys.argv[1])
out = {"modules": {}, "hooks": {}}

def attempt(module):
    try:
        importlib.import_module(module)
        return "ok", ""
    except ModuleNotFoundError as exc:
        missing = exc.name or ""
        result = ("failed", f"{type(exc).__name__}: {exc}") if missing.split(".")[0] == "sglang" else ("skipped", f"needs {missing}")
    except Exception as exc:
        result = ("failed", f"{type(exc).__name__}: {exc}")
    # A failed import leaves half-initialised sglang modules behind: drop them, so that the
    # next module is judged on its own.
    for name in [n for n in sys.modules if n == "sglang" or n.startswith("sglang.")]:
        del sys.modules[name]
    return result

for module in job["modules"]:
    out["modules"][module] = attempt(module)
for name, hook in job["hooks"].items():
    result, detail = attempt(hook["module"])
    if result == "ok":
        try:
            out["hooks"][name] = ["active" if eval(hook["active"]) else "inactive", ""]
        except Exception as exc:
            out["hooks"][name] = ["failed", f"{type(exc).__name__}: {exc}"]
    else:
        out["hooks"][name] = [result, detail]
print(json.dumps(out))
"""


def _module_name(rel: str) -> str:
    return rel[: -len(".py")].replace("/", ".").removesuffix(".__init__")


def _child(python: str, site: Path, modules: list[str], hooks: dict, extra_env: dict | None = None) -> dict:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(site), os.environ.get("PYTHONPATH")])),
           "CUDA_VISIBLE_DEVICES": os.environ.get("CUDA_VISIBLE_DEVICES", ""), **(extra_env or {})}
    proc = subprocess.run([python, "-c", _CHILD, json.dumps({"modules": modules, "hooks": hooks})],
                          capture_output=True, text=True, env=env, timeout=900)
    if proc.returncode != 0:
        tail = (proc.stderr.strip().splitlines() or ["no output"])[-1]
        return {"modules": {m: ["failed", tail] for m in modules}, "hooks": {h: ["failed", tail] for h in hooks}}
    return json.loads(proc.stdout.strip().splitlines()[-1])


def verify(target: Target, python: str) -> Report:
    report = Report(target)
    statuses, _ = decide.status(target)
    report.statuses = statuses
    recorded = state_mod.load(target.site)
    if state_mod.journal_path(target.site).exists():
        report.checks.append(Check(str(state_mod.journal_path(target.site)), FAILED,
                                   f"an unfinished patchkit run is pending; `{target.naming.command('apply')}` or "
                                   f"`{target.naming.command('revert')}` finishes it"))
    applied = {s.id for s in statuses if s.state in (patch_status.APPLIED, patch_status.DRIFTED, patch_status.OUTDATED)}

    for rel, record in sorted((recorded.files if recorded else {}).items()):
        data = target.read(rel)
        if (None if data is None else sha256(data)) != record.patched:
            report.checks.append(Check(rel, FAILED, "drifted: bytes differ from what patchkit wrote"))
            continue
        if data is None:  # a file a diff patch deletes: removed, as recorded
            report.checks.append(Check(rel, OK, "removed, as recorded"))
            continue
        if not rel.endswith(".py"):  # a diff patch's kernel source or config: its bytes are all there is to check
            report.checks.append(Check(rel, OK, "recorded bytes"))
            continue
        try:
            compile(data, rel, "exec", dont_inherit=True)
            report.checks.append(Check(rel, OK, "recorded bytes, compiles"))
        except SyntaxError as exc:
            report.checks.append(Check(rel, FAILED, f"does not compile: {exc.msg} (line {exc.lineno})"))

    if recorded is not None:
        # The runtime report (patchkit/store/runtime_plugin.py): what makes the serving processes say what they run.
        root = state_mod.runtime_root(target, recorded) or target.site
        for rel, digest in sorted(recorded.runtime.items()):
            data = (root / rel).read_bytes() if (root / rel).is_file() else None
            intact = data is not None and sha256(data) == digest
            report.checks.append(Check(f"runtime report {rel}", OK if intact else FAILED,
                                       "recorded bytes" if intact else
                                       f"missing or changed: `{target.naming.command('apply')}` writes it again"))

    patches = {cls.ID: cls for cls in registry.load_all()}
    hooks: dict[str, dict[str, Any]] = {}
    for pid in sorted(applied):
        hook = patches[pid].RUNTIME_HOOK if pid in patches else None
        if hook:
            hooks[pid] = hook
    modules = sorted({_module_name(rel) for rel, record in (recorded.files.items() if recorded else ())
                      if record.patched is not None and rel.endswith(".py")})  # (a removed module is not imported)
    if not modules and not hooks:
        return report
    on = _child(python, target.site, modules, hooks)
    for module, (result, detail) in on["modules"].items():
        report.checks.append(Check(f"import {module}", result, detail))
    for pid, hook in hooks.items():
        result, detail = on["hooks"][pid]
        if result == "active":
            off = _child(python, target.site, [], {pid: hook}, hook.get("opt_out"))["hooks"][pid][0]
            opt_out = " ".join(f"{k}={v}" for k, v in hook.get("opt_out", {}).items())
            if off == "inactive":
                report.checks.append(Check(f"hook {pid}", OK, f"active; inactive with {opt_out}"))
            else:
                report.checks.append(Check(f"hook {pid}", FAILED, f"still {off} with {opt_out}"))
        elif result == "inactive":
            report.checks.append(Check(f"hook {pid}", FAILED, f"runtime hook of {pid} is not active in {hook['module']}"))
        else:
            report.checks.append(Check(f"hook {pid}", result, detail))
    return report
