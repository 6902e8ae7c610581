from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Iterator

from patchkit.store import lock
from patchkit.commands import output
from patchkit.store import stale, transaction
from patchkit.store import state as state_mod
from patchkit.commands.locate import leftovers, naming, note
from patchkit.store.naming import Naming
from patchkit.base.constants import DEFAULT_LOCK_TIMEOUT, EXIT_OK, JOURNAL_FILE, STATE_FILE
from patchkit.base.errors import Interrupted, PatchkitError


@contextlib.contextmanager
def _interruptible(removed: list[str], named: Naming) -> Iterator[list[Path]]:
    """A Ctrl-C says what was removed: yields the list of folders being removed now."""
    removing: list[Path] = []
    try:
        yield removing
    except KeyboardInterrupt:
        if removing and any((removing[-1] / name).exists() for name in (STATE_FILE, JOURNAL_FILE)):
            raise Interrupted(f"interrupted while {removing[-1]} was being removed; its record is removed last, so "
                              f"`{named.command('clean')}` again removes the rest") from None
        if removing:  # interrupted after its last record was gone: nothing of it is left
            removed.append(str(removing.pop()))
        if removed:
            raise Interrupted(f"interrupted after removing {'; '.join(removed)}") from None
        raise Interrupted("interrupted before anything was removed; every file was left as it was") from None


def clean_leftovers(left: list[stale.Leftover], as_json: bool, named: Naming,
                    lock_timeout: float = DEFAULT_LOCK_TIMEOUT) -> int:
    """Remove `.patchkit/` folders that no SGLang sits beside any more (`named`: how this run named them)."""
    removed: list[str] = []
    with _interruptible(removed, named) as removing:
        for item in left:
            with lock.locked(item.folder, lock_timeout, output.warn):
                removing.append(item.state_dir)
                stale.remove(item.folder)
                removing.pop()
                removed.append(item.describe())
        return _report(removed, as_json)


def clean(site_packages: str | None, source: str | None, python: str | None, as_json: bool,
          lock_timeout: float = DEFAULT_LOCK_TIMEOUT) -> int:
    """Remove patchkit state left by a release that was upgraded or uninstalled."""
    target, left = leftovers(site_packages, source, python)
    named = naming(site_packages, source, python)
    if target is None:
        return clean_leftovers(left, as_json, named, lock_timeout)
    note(target)
    removed: list[str] = []
    where = state_mod.state_dir(target.site)
    with _interruptible(removed, named) as removing:
        with lock.locked(target.site, lock_timeout, output.warn):
            journal = transaction.stale_journal(target)
            recorded = stale.stale_state(target)
            if journal is not None:
                # An unfinished run for the release installed before (checked for patchkit's bytes first).
                removing.append(where)
                output.warn(transaction.discard_stale_journal(target, journal))
                removing.pop()
                removed.append(f"{where} (an unfinished run for SGLang {journal['sglang_version']})")
            elif recorded is not None:
                removing.append(where)
                stale.discard(target, recorded)
                removing.pop()
                removed.append(f"{where} (left by SGLang {recorded.sglang_version})")
            elif state_mod.load(target.site) is not None or state_mod.journal_path(target.site).exists():
                raise PatchkitError(f"SGLang {target.version}'s patches recorded in {where} "
                                    f"are live, not stale; `{named.command('revert')}` restores the release's files")
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
