"""`patchkit bump --to V [--from V0] [-o DIR] [--launch "ARGS"]... [--json | --markdown]`, and
`bump --continue DIR`: the whole patch set moved to release V (patchkit/engine/bump.py)."""

from __future__ import annotations

import shlex
from pathlib import Path

from patchkit.base.constants import EXIT_OK, EXIT_PLAN, EXIT_USAGE
from patchkit.base.errors import FetchError, UsageError
from patchkit.commands import output
from patchkit.commands.doctor import check_overrides
from patchkit.doctor.gpu import Overrides
from patchkit.commands.locate import locate, release_source
from patchkit.engine import bump as bumping
from patchkit.releases import versions

DEFAULT_FOLDER = "patchkit-bump-{}"


def bump(to: str | None, first: str | None, out: str | None, launches: tuple[str, ...], fmt: str,
         resume: str | None, latest: bool, site_packages: str | None, source: str | None, python: str | None,
         overrides: Overrides | None = None) -> int:
    if resume is not None:
        if to or first or out or launches or latest or site_packages or source or python:
            raise UsageError("--continue DIR takes no --to, --from, -o, --launch, --latest or tree option: DIR's "
                             "record names them")
        return _continue(Path(resume), fmt)
    if bool(to) == latest:
        raise UsageError("bump needs --to V or --latest (one of them), or --continue DIR")
    lines = [_launch_argv(text) for text in launches]
    if overrides is not None:
        check_overrides(overrides)
    first = versions.normalise(first, "--from") if first else None
    to = _newest() if latest else _on_the_index(versions.normalise(str(to), "--to"))
    folder = Path(out or DEFAULT_FOLDER.format(to))
    bumping.check_folder(folder)  # before any download
    if first is None:
        first = _first(site_packages, source, python, to)
    elif site_packages or source or python:
        locate(site_packages, source=source, python=python, quiet=True)  # the tree named must be there
    if versions.parse(first) == versions.parse(to):
        raise UsageError(f"--to {to} is the release the patches are for already; name a newer one")
    if versions.parse(first) > versions.parse(to):
        raise UsageError(f"--to {to} is older than {first}, the release the patches are for (V0); bump moves a set "
                         "to a newer release: name one, or the set's own release with --from V0")
    from patchkit.engine.verdicts import VerdictCache
    from patchkit.releases import pristine

    sources = release_source(first), release_source(to)
    changes = []
    if lines:  # before the patches: a launch doctor refuses (no model folder) is exit 2 with nothing written
        from patchkit.doctor.launch_change import compare

        given = overrides or Overrides()
        for argv in lines:
            output.progress(f"doctor on SGLang {first} and {to}: {' '.join(argv)}")
            changes.append(compare(*sources, argv, given))
    found = bumping.plan(*sources, folder, output.progress, VerdictCache(pristine.home()), tuple(changes))
    bumping.write(found)
    return _show(found, fmt)


def _launch_argv(text: str) -> list[str]:
    try:
        argv = shlex.split(text)
    except ValueError as exc:
        raise UsageError(f"--launch {text!r}: {exc}") from None
    if not argv:
        raise UsageError("--launch needs the sglang.launch_server arguments, e.g. --launch \"--model-path DIR\"")
    return argv


def _newest() -> str:
    from packaging.version import Version

    from patchkit.releases import index

    found = [v for v in index.listed() if not Version(v).is_prerelease]
    if not found:  # never the newest release patchkit knows: a scheduled job would not hear of a new one
        raise FetchError("--latest: the package index cannot be asked for SGLang's releases (`pip index versions "
                         "sglang` failed: offline?); nothing written; name the release with --to V")
    return found[-1]


def _on_the_index(version: str) -> str:
    """Exit 3 before any download for a release the package index does not have (where the index
    cannot be asked, the download says whether it has it; a release in the wheel cache needs none)."""
    from packaging.version import Version

    from patchkit.releases import index

    known = index.listed()

    if known and Version(version) not in {Version(v) for v in known}:
        raise FetchError(f"SGLang {version} is not on the package index (newest: {known[-1]}); nothing written")
    return version


def _first(site_packages: str | None, source: str | None, python: str | None, to: str) -> str:
    """V0 where --from does not say it: the tree's release (its state file's, else its installed
    version), else the release the loaded diffs were made for (their index hashes)."""
    from patchkit.engine import registry
    from patchkit.store import state

    named = site_packages or source or python
    diffs = [pid for pid in registry.patch_ids() if registry.is_diff(pid)]
    if named or not diffs:
        target = locate(site_packages, source=source, python=python, quiet=True)
        recorded = state.load(target.site)
        return versions.normalise(recorded.sglang_version if recorded else target.version, "the tree's release")
    from patchkit.diffs import rebase as rebasing, release_blobs, unidiff

    for pid in diffs:  # the cached releases first, then those the index has (fetched as rebase does)
        made_for = next(p for p in registry.load_all() if p.ID == pid).made_for() or []
        if made_for:
            return str(made_for[0].version)
    for pid in diffs:
        path = registry.source_file(pid)
        matches = release_blobs.find_base(rebasing.load(unidiff.read_file(path), path.name), to, output.progress)
        if matches:
            return str(matches[0].version)
    raise UsageError("the loaded diffs name no release they were made for (their index hashes match no release); "
                     "pass --from V0")


def _continue(folder: Path, fmt: str) -> int:
    found = bumping.read(folder)
    done = bumping.resume(found, release_source(found.to), output.progress)
    bumping.write(done, fresh=False)
    return _show(done, fmt)


def _show(found: bumping.Bump, fmt: str) -> int:
    # A patch file left out (it cannot be loaded): the set in DIR is not complete, exit 2 as for any
    # command that ran without it (cli.error_handler names each file with its cause).
    code = EXIT_PLAN if found.blocked else EXIT_USAGE if found.left_out else EXIT_OK
    if fmt == "json":
        output.as_json(found.to_dict())
        return code
    if fmt == "markdown":
        output.text(found.markdown())
        return code
    output.line(f"SGLang {found.first} -> {found.to}")
    width = max((len(row.id) for row in found.patches), default=5)
    for row in found.patches:
        output.line(f"  {row.id:<{width}}  {row.on_from:<15} {row.on_to:<15} {row.action}")
    for pid, conflict in found.conflicts:
        output.warn(f"conflict: {pid}: {conflict.name}: {conflict.detail}")
    for launch in found.launches:
        changed = sum(map(len, (launch.removed, launch.renamed, launch.appeared, launch.disappeared, launch.changed)))
        output.line(f"  launch: {' '.join(launch.line)}: {changed} change(s) on {found.to} (REPORT.md lists them)")
        if launch.budget_note:
            output.line(f"  launch: budget not compared: {launch.budget_note}")
    output.line(f"wrote {found.folder / bumping.REPORT}")
    for step in found.next_steps():
        output.line(f"next: {step}")
    return code
