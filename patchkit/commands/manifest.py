from __future__ import annotations

from importlib import resources

from patchkit import engine, output
from patchkit import manifest as manifest_mod
from patchkit.constants import EXIT_OK, EXIT_PLAN
from patchkit.commands.locate import release_source
from patchkit.util import atomic_write


def _describe(version: str) -> manifest_mod.Manifest:
    return engine.describe(release_source(version))


def update(versions: tuple[str, ...]) -> int:
    """Regenerate manifests/<version>.json from the real release files."""
    folder = resources.files(manifest_mod.MANIFESTS_PACKAGE)
    for version in versions:
        fresh = _describe(version)
        atomic_write(folder / f"{version}.json", fresh.to_json().encode())  # type: ignore[arg-type]
        verdicts = ", ".join(f"{pid}={e.verdict}" for pid, e in sorted(fresh.patches.items()))
        output.line(f"manifests/{version}.json: {verdicts}")
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
