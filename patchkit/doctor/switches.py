"""Patches switched off at run time: an applied patch that `SGLANG_PATCHKIT_DISABLE` lists in the launch's
environment takes the release's own path (patchkit/authoring/runtime_switch.py), so the doctor counts it off
(`disabled`), and switching it back on is a fix like applying a pending patch.

The launch's environment is the user's: the doctor's own environment with the pasted line's leading `NAME=value`
pairs over it (patchkit/doctor/__init__.py). Only a patch that declares the switch (`RUNTIME_SWITCH`) is counted
off; `eagle3-capture-hook`, which cannot be switched off, stays applied whatever the variable lists.
"""

from __future__ import annotations

from patchkit.base.constants import ENV_DISABLE

DISABLED = "disabled"  # the runtime report's name for a patch switched off (patchkit/runtime/server_report.py)
# A patch in one of these states is not in force where the launch runs: its fix is `patchkit apply` (pending,
# failed, drifted) or switching it back on (disabled).
NOT_IN_PLACE = ("pending", "failed", "drifted", DISABLED)


def listed(environ: dict[str, str]) -> list[str]:
    """The ids `SGLANG_PATCHKIT_DISABLE` lists, in order, as the patched snippet reads them (comma-separated,
    whitespace around an id ignored)."""
    return [item.strip() for item in environ.get(ENV_DISABLE, "").split(",") if item.strip()]


def switchable() -> set[str]:
    """The loaded patches (built-in and `--patches` sets) whose written code honours the switch."""
    from patchkit.engine import registry

    return {cls.ID for cls in registry.load_all() if f"{ENV_DISABLE}={cls.ID}" in cls.RUNTIME_SWITCH}


def with_switches(states: dict[str, str], environ: dict[str, str]) -> dict[str, str]:
    """`states` with each applied, switchable patch the launch's environment switches off as `disabled`."""
    off = set(listed(environ))
    if not off & {pid for pid, state in states.items() if state == "applied"}:
        return states
    can = switchable()
    return {pid: DISABLED if state == "applied" and pid in off and pid in can else state
            for pid, state in states.items()}


def switch_on(environ: dict[str, str], patch_ids: tuple[str, ...] | list[str]) -> tuple[str, ...]:
    """The shell command, run before the launch, that switches `patch_ids` back on: `export
    SGLANG_PATCHKIT_DISABLE=` the ids it lists less those, or `unset SGLANG_PATCHKIT_DISABLE` where none is left."""
    rest = [pid for pid in listed(environ) if pid not in patch_ids]
    return ("export", f"{ENV_DISABLE}={','.join(rest)}") if rest else ("unset", ENV_DISABLE)


def switched_on_by(environ: dict[str, str], command: tuple[str, ...]) -> list[str]:
    """The ids a `switch_on` command (up to any `&&`) takes off the list the launch's environment holds."""
    if command[:1] == ("unset",):
        return listed(environ)
    if command[:1] == ("export",) and len(command) > 1:
        kept = set(listed({ENV_DISABLE: command[1].partition("=")[2]}))
        return [pid for pid in listed(environ) if pid not in kept]
    return []
