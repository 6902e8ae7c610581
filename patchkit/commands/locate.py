"""Resolve --site-packages / --source / --python / --fetch / --target to the Target every
command works on."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from patchkit.base.lean_typing import TYPE_CHECKING
from patchkit.commands import output
from patchkit.engine import registry
from patchkit.releases import versions
from patchkit.store.naming import Naming
from patchkit.base.constants import PACKAGE
from patchkit.base.errors import NotFoundError, UsageError
from patchkit.store.target import (EDITABLE, SOURCE, Target, check_version, find_for_python, find_in, find_installed,
                             find_source, usage_conflict)

if TYPE_CHECKING:
    from patchkit.releases import pristine as releases

# The wheel cache (patchkit.releases.pristine: zipfile, shutil) and the leftover search
# (patchkit.store.stale) are imported where they are used: a plain `status` needs neither.


def release_source(version: str) -> releases.WheelSource:
    """A pristine release from the package index (for manifests, track and matrix), read straight
    from its cached wheel: only the files needed are inflated, nothing is unpacked on disk."""
    from patchkit.releases import pristine as releases

    return releases.WheelSource(versions.normalise(version), output.progress)


# What a command that finds no SGLang suggests: the targeting options it has (only apply fetches).
TARGET_OPTIONS = "pass --site-packages DIR, --source DIR or --python PATH"
APPLY_TARGET_OPTIONS = TARGET_OPTIONS + " (or --target V --fetch DIR to install that release there first)"


def locate(
    site_packages: str | None,
    fetch: str | None = None,
    version: str | None = None,
    source: str | None = None,
    python: str | None = None,
    quiet: bool = False,
    dry_run: bool = False,
    options: str = TARGET_OPTIONS,
) -> Target:
    for flag, value in (("--site-packages", site_packages), ("--fetch", fetch), ("--source", source), ("--python", python)):
        if value is not None and not value.strip():
            raise UsageError(f"{flag} needs a {'file' if flag == '--python' else 'folder'}, got an empty string")
    usage_conflict(site_packages=site_packages, fetch=fetch, source=source, python=python)
    if version is not None:
        versions.parse(version, what="--target")  # exit 2 before anything is looked at
    if fetch:
        from patchkit.releases import pristine as releases

        if version is None:
            raise UsageError("--fetch DIR needs --target VERSION (the release to download)")
        folder = Path(fetch)
        if not (folder / PACKAGE).exists():
            registry.check_known(version)  # before downloading: a release patchkit knows nothing of
            if dry_run:
                # A dry run writes nothing, DIR included: judge the pristine release patchkit
                # keeps in its cache (read only), which is what --fetch would install there.
                pristine = releases.pristine_tree(versions.normalise(version), output.progress)
                output.note(f"dry run: nothing was installed into {folder}; showing what apply would change "
                            f"on the pristine SGLang release --fetch would install there (cached in {pristine})")
                target = replace(find_in(pristine), naming=naming(fetch, None, None, version))  # DIR, as the real run
                check_version(target, version)
                return target
            wheel = releases.download(versions.normalise(version), output.progress)  # before touching DIR
            releases.install(wheel, folder)
        target = find_in(folder)
    else:
        try:
            target = _find(site_packages, source, python)
        except NotFoundError as exc:
            from patchkit.store import stale

            left = stale.orphans(list(exc.searched))
            if not left:
                if site_packages or source or python:
                    raise
                raise NotFoundError(f"{exc}; {options}", exc.searched) from None
            clean = naming(site_packages, source, python).command("clean")
            raise NotFoundError(f"{exc}; patchkit state is left behind in {left[0].describe()}: "
                                f"`{clean}` removes it", exc.searched) from None
    check_version(target, version)
    target = replace(target, naming=replace(target.naming, version=version, patches=registry.given_folders()))
    if not quiet:
        note(target)
    return target


def naming(site_packages: str | None, source: str | None, python: str | None, version: str | None = None) -> Naming:
    """The targeting options as given (where no Target was found to carry them: a folder that only
    holds the state an uninstalled SGLang left), with this run's --patches."""
    option, value = next(((flag, given) for flag, given in (("--site-packages", site_packages), ("--source", source),
                                                            ("--python", python)) if given), (None, None))
    return Naming(option, value, version, registry.given_folders())


def _find(site_packages: str | None, source: str | None, python: str | None) -> Target:
    if site_packages:
        return find_in(Path(site_packages))
    if source:
        return find_source(Path(source))
    if python:
        return find_for_python(python)
    return find_installed()


def leftovers(site_packages: str | None, source: str | None, python: str | None) -> tuple[Target | None, list]:
    """(the target, None) when SGLang is there, else (None, the `.patchkit/` folders left behind)."""
    usage_conflict(site_packages=site_packages, source=source, python=python)
    try:
        return _find(site_packages, source, python), []
    except NotFoundError as exc:
        from patchkit.store import stale

        return None, stale.orphans(list(exc.searched))


def note(target: Target) -> None:
    """Say where an editable install or a checkout is patched (on stderr: output stays parseable)."""
    if target.kind == EDITABLE:
        output.note(f"SGLang is installed editable: patching its source in {target.package_dir}")
    elif target.kind == SOURCE and target.checkout is None:
        output.note(f"patching the source tree {target.package_dir}")
    if target.checkout is not None:
        output.note(f"{target.package_dir} is in the git checkout {target.checkout}: files patchkit changes "
                    "show as modified in `git status` (patchkit never touches .git)")
