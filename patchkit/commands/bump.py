"""`patchkit bump --to V [--from V0] [-o DIR] [--launch "ARGS"]... [--json | --markdown]`, and
`bump --continue DIR`: the whole patch set moved to release V (patchkit/engine/bump.py)."""

from __future__ import annotations

import shlex
from dataclasses import fields, replace
from pathlib import Path

from patchkit.base.constants import EXIT_OK, EXIT_PLAN, EXIT_USAGE
from patchkit.base.errors import UsageError
from patchkit.commands import output
from patchkit.commands.doctor import check_overrides
from patchkit.doctor.gpu import Overrides
from patchkit.commands.locate import locate, release_source
from patchkit.engine import bump as bumping, bump_releases as releasing
from patchkit.releases import versions

DEFAULT_FOLDER = "patchkit-bump-{}"


def bump(to: str | None, first: str | None, out: str | None, launches: tuple[str, ...], fmt: str,
         resume: str | None, latest: bool, site_packages: str | None, source: str | None, python: str | None,
         overrides: Overrides | None = None) -> int:
    if resume is not None:
        _continue_takes_nothing_else(to=to, first=first, out=out, launches=launches, latest=latest,
                                     site_packages=site_packages, source=source, python=python, overrides=overrides)
        return _continue(Path(resume), fmt)
    if bool(to) == latest:
        raise UsageError("bump needs --to V or --latest (one of them), or --continue DIR")
    lines = [_launch_argv(text) for text in launches]
    if lines:  # each launch's model folder, before any download (a hub id: exit 2 with the two files to fetch)
        from patchkit.doctor.launch_change import check_models

        check_models(lines)
    if overrides is not None:
        check_overrides(overrides)
    first = versions.normalise(first, "--from") if first else None
    to = releasing.newest() if latest else releasing.on_the_index(versions.normalise(str(to), "--to"))
    folder = Path(out or DEFAULT_FOLDER.format(versions.spelled(to)))  # 0.5.21.0: patchkit-bump-0.5.21
    bumping.check_folder(folder)  # before any download
    base = None
    if first is None:
        base = releasing.first(to, output.progress, lambda: _tree_release(site_packages, source, python),
                               bool(site_packages or source or python))
        first = base.version
        if base.note():
            output.progress(base.note())
    elif site_packages or source or python:
        locate(site_packages, source=source, python=python, quiet=True)  # the tree named must be there
    if latest and versions.parse(first) >= versions.parse(to):  # a scheduled job: no new release is no failure
        return _nothing_to_do(first, to, fmt)
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
    found = bumping.plan(*sources, folder, output.progress, VerdictCache(pristine.home()), tuple(changes), python)
    if base is not None and base.note():
        found = replace(found, notes=(base.note(), *found.notes))
    named = [(option, value) for option, value in zip(bumping.TREE_OPTIONS, (site_packages, source, python)) if value]
    if named:
        found = replace(found, tree=named[0])
    bumping.write(found)
    return _show(found, fmt)


def _continue_takes_nothing_else(**given: object) -> None:
    """`--continue DIR` reads V0, V and the launch lines from DIR's record: any other option it
    would ignore (a release, a tree, a GPU fact) is a usage error naming it, never dropped in silence."""
    names = {"to": "--to", "first": "--from", "out": "-o", "launches": "--launch", "latest": "--latest",
             "site_packages": "--site-packages", "source": "--source", "python": "--python"}
    named = [names[key] for key, value in given.items() if key in names and value]
    overrides = given.get("overrides")
    if isinstance(overrides, Overrides):
        named += [f"--{field.name.replace('_', '-')}" for field in fields(overrides)
                  if getattr(overrides, field.name) not in (None, False)]
    if named:
        raise UsageError(f"--continue DIR takes no {', '.join(named)}: DIR's record names the releases and the launch "
                         "lines; run it with --continue DIR alone (and --json or --markdown)")


def _nothing_to_do(first: str, to: str, fmt: str) -> int:
    """`--latest` on a set already on the newest release: exit 0, nothing written."""
    where = ("the newest release on the package index" if versions.parse(first) == versions.parse(to)
             else f"newer than the newest release on the package index ({to})")
    said = f"SGLang {first}, the release the patches are for, is {where}: nothing to do; nothing written"
    if fmt == "json":
        output.as_json({"from": first, "to": to, "nothing_to_do": True})
    elif fmt == "markdown":
        output.text(f"# patchkit bump: SGLang {first}\n\n{said}.\n")
    else:
        output.line(said)
    return EXIT_OK


def _launch_argv(text: str) -> list[str]:
    try:
        argv = shlex.split(text)
    except ValueError as exc:
        raise UsageError(f"--launch {text!r}: {exc}") from None
    if not argv:
        raise UsageError("--launch needs the sglang.launch_server arguments, e.g. --launch \"--model-path DIR\"")
    return argv


def _tree_release(site_packages: str | None, source: str | None, python: str | None) -> str:
    """The tree's release: its state file's, else its installed version."""
    from patchkit.store import state

    target = locate(site_packages, source=source, python=python, quiet=True)
    recorded = state.load(target.site)
    return versions.normalise(recorded.sglang_version if recorded else target.version, "the tree's release")


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
