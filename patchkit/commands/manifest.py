from __future__ import annotations

from pathlib import Path

from patchkit import engine, output
from patchkit import manifest as manifest_mod
from patchkit.constants import EXIT_OK, EXIT_PLAN
from patchkit.commands.locate import release_source
from patchkit.errors import UsageError
from patchkit.util import atomic_write


def _describe(version: str) -> manifest_mod.Manifest:
    return engine.describe(release_source(version))


def update(versions: tuple[str, ...], out: str | None = None) -> int:
    """Regenerate <folder>/<version>.json from the real release files: `out`, or the checkout's
    manifests/ (never the copy inside an installed patchkit)."""
    folder = Path(out) if out else manifest_mod.checkout_folder()
    if folder is None:
        raise UsageError("patchkit is not running from a checkout: pass --out DIR (an installed copy's manifests are never rewritten)")
    if not folder.is_dir():
        raise UsageError(f"--out {folder}: not a folder")
    for version in versions:
        fresh = _describe(version)
        atomic_write(folder / f"{version}.json", fresh.to_json().encode())
        verdicts = ", ".join(f"{pid}={e.verdict}" for pid, e in sorted(fresh.patches.items()))
        output.line(f"{folder / f'{version}.json'}: {verdicts}")
    return EXIT_OK


def check(versions: tuple[str, ...]) -> int:
    """Fail when a committed manifest disagrees with the release it describes."""
    bad = 0
    for version in versions or tuple(manifest_mod.available()):
        committed = manifest_mod.load(version)
        fresh = _describe(version)
        if committed == fresh:
            output.line(f"ok        manifests/{version}.json")
        else:
            bad += 1
            output.line(f"MISMATCH  manifests/{version}.json (run `patchkit manifest update {version}`)")
    return EXIT_PLAN if bad else EXIT_OK
