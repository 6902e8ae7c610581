from __future__ import annotations

import contextlib
from typing import Iterator

from patchkit.commands import output
from patchkit.diffs import release_blobs
from patchkit.releases import pristine as releases
from patchkit.engine import upstream
from patchkit.releases import versions as version_strings
from patchkit.commands.locate import release_source
from patchkit.base.constants import EXIT_OK, EXIT_PLAN
from patchkit.base.errors import UsageError


def track(first: str, last: str, git_path: str | None, as_json: bool) -> int:
    if not git_path:  # release versions (a git revision is any name git knows)
        first, last = version_strings.normalise(first, "--from"), version_strings.normalise(last, "--to")
    sources: tuple[upstream.Source, upstream.Source]
    if git_path:
        sources = upstream.GitSource(git_path, first), upstream.GitSource(git_path, last)
    else:
        sources = release_source(first), release_source(last)
    report = upstream.track(*sources)
    # A patch whose own code raised on either side is a failure of the run (exit 1).
    code = EXIT_PLAN if any(row[side]["state"] == upstream.FAILED for row in report.patches for side in ("from", "to")) \
        else EXIT_OK
    if as_json:
        output.as_json(report.to_dict())
        return code
    output.line(f"SGLang {sources[0].label} -> {sources[1].label}")
    for row in report.patches:
        old, new = row["from"], row["to"]
        output.line(f"  {row['id']}: {old['state']} -> {new['state']}")
        for side, verdict in (("from", old), ("to", new)):
            if verdict["state"] in (upstream.MOVED, upstream.BROKEN, upstream.FAILED) or verdict["detail"]:
                output.line(f"      {side}: {verdict['detail'] or verdict['file']}")
        if row["drop_when"]:
            output.line(f"      {row['drop_when']}")
        for change in row["waits_on"]:
            output.line(f"      {waits_on(change, sources[1].version)}")
    for row in report.patches:
        if row["diff"]:
            output.line()
            output.line(f"# {row['id']}: upstream changes under the patch")
            output.text(row["diff"])
    return code


def waits_on(change: dict, release: str) -> str:
    """One line on an upstream change a drop condition waits on, for the release `track` reaches:
    a change merged upstream but not in that release is said as such (the condition is not met)."""
    looked_up = f"{change['state']} upstream when looked up on {change['checked']}"
    if change["in_to"]:
        return f"{change['ref']} ({looked_up}) is in {release}: {change['what']}"
    if change["state"] == "merged":
        return f"{change['ref']} ({looked_up}) is not in {release} yet, so the drop condition is not met: {change['what']}"
    return f"{change['ref']} ({looked_up}), not in {release}: {change['what']}"


def matrix(first: str | None, last: str | None, fmt: str, with_post: bool = False) -> int:
    first = version_strings.normalise(first, "--from") if first else None
    last = version_strings.normalise(last, "--to") if last else None
    if first and last and version_strings.parse(first) > version_strings.parse(last):
        raise UsageError(f"--from {first} is newer than --to {last}; swap them (the range runs oldest to newest)")
    versions = upstream.versions_between(first, last)
    if not versions:
        raise UsageError("no release in that range")
    from patchkit.engine.verdicts import VerdictCache

    with _prefetched(versions) as sources:
        table = upstream.matrix(_and_post_releases(sources, versions, with_post), VerdictCache(releases.home()))
    table["versions"].sort(key=version_strings.parse)
    code = EXIT_PLAN if table["failed"] else EXIT_OK
    if fmt == "json":
        output.as_json(table)
        return code
    for failure in table["failed"]:  # the table says `failed`; why is on stderr
        output.warn(f"SGLang {failure['version']}: {failure['detail']}")
    # A cell whose verdict says more (upstream's fix narrower than the patch) is starred, the
    # detail follows the table.
    def cell(row: dict, version: str) -> str:
        return row["states"][version] + ("*" if version in row["details"] else "")

    if fmt == "markdown":
        output.line("| patch | " + " | ".join(table["versions"]) + " |")
        output.line("| --- |" + " --- |" * len(table["versions"]))
        for row in table["patches"]:
            output.line(f"| `{row['id']}` | " + " | ".join(cell(row, v) for v in table["versions"]) + " |")
    else:
        width = max(len(row["id"]) for row in table["patches"])
        output.line(f"{'patch':<{width}}  " + "  ".join(f"{v:<15}" for v in table["versions"]))
        for row in table["patches"]:
            output.line(f"{row['id']:<{width}}  " + "  ".join(f"{cell(row, v):<15}" for v in table["versions"]))
    for note in upstream.detail_notes(table["patches"], table["versions"]):
        output.line(f"* {note}")
    for row in table["patches"]:
        if "made_for" in row:
            output.line(f"{row['id']}: {release_blobs.made_for_text(row['made_for'])}")
            for pid in row["stacked_on"]:
                output.line(f"{row['id']}: stacked on {pid} (Patchkit-After, or its pre-image is {pid}'s "
                            "post-image): judged on top of it, as apply stacks them")
    stacked: dict[tuple[str, str, tuple[str, ...]], list[str]] = {}
    for clash in table.get("clashes", ()):
        stacked.setdefault((clash["id"], clash["file"], tuple(clash["under"])), []).append(clash["version"])
    for (pid, rel, under), where in stacked.items():
        output.line(f"{pid}: broken on {', '.join(where)} only on top of {', '.join(under)} ({rel}; "
                    "`patchkit status` says why)")
    return code


def _and_post_releases(sources: Iterator[releases.WheelSource], versions: list[str],
                       with_post: bool) -> Iterator[releases.WheelSource]:
    """The releases of the range, then (every final release cached by then) the post releases the
    index has in the range (`--with-post`) and those a loaded diff was made for (its base, named
    from its index hashes: `release_blobs.find_base` fetches the post releases near it)."""
    from packaging.version import Version

    from patchkit.diffs import release_blobs
    from patchkit.engine import registry
    from patchkit.releases import index

    yield from sources
    extra: set[str] = set()
    if with_post:
        extra.update(v for v in index.in_range(versions[0], versions[-1]) if Version(v).is_postrelease)
    for patch in registry.load_all():
        if registry.is_diff(patch.ID):
            extra.update(m.version for m in release_blobs.find_base(patch.DIFF, versions[-1], output.progress, versions[0])  # type: ignore[attr-defined]
                         if Version(m.version).is_postrelease and Version(versions[0]) <= Version(m.version)
                         and Version(Version(m.version).base_version) <= Version(versions[-1]))
    for version in sorted(extra - set(versions), key=Version):
        yield release_source(version)


@contextlib.contextmanager
def _prefetched(versions: list[str]) -> Iterator[Iterator[releases.WheelSource]]:
    """The releases in order; every wheel is downloaded in a background thread, one after the
    other from the start, while the main thread loads the patches and judges the releases already
    there (pip runs as a child process: downloading and judging overlap). Leaving the block
    cancels the downloads not yet started and waits for the one running."""
    from concurrent.futures import ThreadPoolExecutor

    pool = ThreadPoolExecutor(max_workers=1)
    try:
        futures = [pool.submit(release_source, version) for version in versions]
        yield (future.result() for future in futures)
    finally:
        pool.shutdown(wait=True, cancel_futures=True)
