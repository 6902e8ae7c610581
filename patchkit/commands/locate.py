"""Resolve --site-packages / --fetch / --target to the Target every command works on."""

from __future__ import annotations

from pathlib import Path

from patchkit import releases
from patchkit.constants import PACKAGE
from patchkit.errors import UsageError
from patchkit.target import Target, check_version, find_in, find_installed


def release_target(version: str) -> Target:
    """A pristine release from the package index, cached (for manifests and tracking)."""
    return find_in(releases.pristine_tree(version))


def locate(site_packages: str | None, fetch: str | None = None, version: str | None = None) -> Target:
    if site_packages and fetch:
        raise UsageError("--site-packages and --fetch are mutually exclusive")
    if fetch:
        if version is None:
            raise UsageError("--fetch DIR needs --target VERSION (the release to download)")
        folder = Path(fetch)
        if not (folder / PACKAGE).exists():
            wheel = releases.download(version)  # before touching DIR: a bad version changes nothing
            releases.install(wheel, folder)
        target = find_in(folder)
    elif site_packages:
        target = find_in(Path(site_packages))
    else:
        target = find_installed()
    check_version(target, version)
    return target
