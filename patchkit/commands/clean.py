from __future__ import annotations

from patchkit import output, stale
from patchkit import state as state_mod
from patchkit.commands.locate import leftovers, note
from patchkit.constants import EXIT_OK
from patchkit.errors import PatchkitError


def clean_leftovers(left: list[stale.Leftover], as_json: bool) -> int:
    """Remove `.patchkit/` folders that no SGLang sits beside any more."""
    for item in left:
        with state_mod.locked(item.folder):
            stale.remove(item.folder)
    return _report([item.describe() for item in left], as_json)


def clean(site_packages: str | None, source: str | None, python: str | None, as_json: bool) -> int:
    """Remove patchkit state left by a release that was upgraded or uninstalled."""
    target, left = leftovers(site_packages, source, python)
    if target is None:
        return clean_leftovers(left, as_json)
    note(target)
    removed = []
    with state_mod.locked(target.site):
        recorded = stale.stale_state(target)
        if recorded is not None:
            stale.discard(target, recorded)
            removed.append(f"{state_mod.state_dir(target.site)} (left by SGLang {recorded.sglang_version})")
        elif state_mod.load(target.site) is not None or state_mod.journal_path(target.site).exists():
            raise PatchkitError(f"SGLang {target.version}'s patches recorded in {state_mod.state_dir(target.site)} "
                                "are live, not stale; `patchkit revert` restores the release's files")
    return _report(removed, as_json)


def _report(removed: list[str], as_json: bool) -> int:
    if as_json:
        output.as_json({"removed": removed})
    elif removed:
        for item in removed:
            output.line(f"removed {item}")
    else:
        output.line("nothing to clean")
    return EXIT_OK
