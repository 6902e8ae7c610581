"""Helpers for the integrity tests: run patchkit as a child that is killed or interrupted at the
N-th call of an `os` function, reuse rendered bytes in-process, compare whole trees."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

from patchkit.engine import view as view_mod
from patchkit.base.util import sha256

REPO = Path(__file__).resolve().parents[1]

# Kill (or Ctrl-C) the child at the N-th call of os.<function>, before (or after) the call.
_CHILD = textwrap.dedent("""
    import os, signal, sys
    name, at, how = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    real = getattr(os, name)
    calls = 0
    def wrapper(*args, **kwargs):
        global calls
        calls += 1
        if calls == at and how == "kill-before":
            os.kill(os.getpid(), signal.SIGKILL)
        result = real(*args, **kwargs)
        if calls == at and how == "kill-after":
            os.kill(os.getpid(), signal.SIGKILL)
        if calls == at and how == "interrupt-after":
            raise KeyboardInterrupt
        if calls == at and how == "eio-after":
            raise OSError(5, "Input/output error", args[-1] if args else None)
        return result
    setattr(os, name, wrapper)
    sys.argv = ["patchkit", *sys.argv[4:]]
    from patchkit.cli.app import main
    main()
""")


def run_faulted(function: str, at: int, how: str, *args: str | Path, timeout: float = 300) -> subprocess.CompletedProcess:
    """patchkit ARGS in a child whose `at`-th os.<function> call is faulted (`how`)."""
    return subprocess.run([sys.executable, "-c", _CHILD, function, str(at), how, *map(str, args)],
                          capture_output=True, text=True, timeout=timeout, cwd=REPO)



def warm_home(site: Path) -> None:
    """Fill the caches a child keeps in PATCHKIT_HOME, as any earlier command would: a faulted
    child then makes no os.replace but the transaction's (a cold identity cache is written with
    one os.replace after the command's work, which would add one call to the count)."""
    proc = run_faulted("replace", 0, "kill-after", "status", "--site-packages", site)
    assert proc.returncode == 0, proc.stderr

_RENDERED: dict[tuple, bytes | None] = {}


def cache_renders(monkeypatch) -> None:
    """In this process, render each (file, pristine bytes, patch ids) once across tests: the
    transaction and recovery are under test here, not the transforms (tested on their own)."""
    real = view_mod.render_file

    def cached(view, rel, ids):
        base = view.pristine(rel)
        key = (rel, None if base is None else sha256(base), tuple(ids))
        if key not in _RENDERED:
            _RENDERED[key] = real(view, rel, ids)
        return _RENDERED[key]

    monkeypatch.setattr(view_mod, "render_file", cached)
