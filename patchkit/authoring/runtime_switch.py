"""The runtime switch: how a patch's written code takes the release's own (pristine) path when
`SGLANG_PATCHKIT_DISABLE` lists its id, so that one patched image can serve with a patch off.

A patch that can do so tests `on(ID)` where its change acts (in the snippet it inserts) and
declares `RUNTIME_SWITCH = declared(ID)`; the runtime report then lists it as `disabled` when
it is switched off. The expression reads the environment each time it is evaluated (where the
patched code runs) and needs nothing from the patched file's imports.
"""

from __future__ import annotations

from patchkit.base.constants import ENV_DISABLE


def on(patch_id: str) -> str:
    """Source of an expression that is true unless SGLANG_PATCHKIT_DISABLE lists `patch_id`
    (comma-separated; whitespace around an id ignored). `__import__("os")`: the snippet must
    not depend on what the patched module imports."""
    return f'"{patch_id}" not in map(str.strip, __import__("os").environ.get("{ENV_DISABLE}", "").split(","))'


def declared(patch_id: str) -> tuple[str, ...]:
    """A switchable patch's RUNTIME_SWITCH: the setting that switches it off."""
    return (f"{ENV_DISABLE}={patch_id}",)
