"""Which releases a bump moves the set between (bump's policy, in the library: issue 44.2): V, the
newest final release on the package index (`--latest`) or a named one the index has; V0 where
`--from` does not say it, the tree's release, else the release the loaded diffs were made for:
of the releases whose files hold every diff's pre-images (their index hashes), the oldest, with
the range said (a file the same in 0.5.16, 0.5.17 and 0.5.23 is a diff for 0.5.16 moved to
0.5.17, never one for 0.5.23 moved backwards).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from packaging.version import Version

from patchkit.base.errors import FetchError, UsageError
from patchkit.engine import registry

if TYPE_CHECKING:
    from patchkit.diffs.release_blobs import Match
    from patchkit.diffs.unidiff import DiffPatchFile


@dataclass(frozen=True)
class Base:
    """V0 and why: the tree's release, or the diffs' (with every release that holds their pre-images)."""

    version: str
    matching: tuple[str, ...] = ()  # the releases found holding every diff's pre-images, oldest first

    def note(self) -> str:
        """Said on stderr and in REPORT.md where more than one release could be V0."""
        if len(self.matching) < 2:
            return ""
        return (f"V0 is {self.version}: the loaded diffs' files are the same in {', '.join(self.matching)} "
                "(the releases patchkit has looked at), and the oldest of them is taken; --from V0 names another")


def newest() -> str:
    """V for `--latest`: the newest final release the package index lists (never one patchkit merely
    knows: a scheduled job would not hear of a new one); FetchError (exit 3) where it cannot be asked."""
    from patchkit.releases import index

    found = [v for v in index.listed() if not Version(v).is_prerelease]
    if not found:
        raise FetchError("--latest: the package index cannot be asked for SGLang's releases (`pip index versions "
                         "sglang` failed: offline?); nothing written; name the release with --to V")
    return found[-1]


def on_the_index(version: str) -> str:
    """`version`, checked before any download against the package index (where it cannot be asked,
    the download says whether it has it; a release in the wheel cache needs none): exit 3 otherwise."""
    from patchkit.releases import index

    known = index.listed()
    if known and Version(version) not in {Version(v) for v in known}:
        raise FetchError(f"SGLang {version} is not on the package index (newest: {known[-1]}); nothing written")
    return version


def first(to: str, progress: Callable[[str], None], tree: Callable[[], str], tree_named: bool) -> Base:
    """V0 where --from does not say it: the tree's release (`tree()`: its state file's, else its
    installed version) where a tree option names one or no diff is loaded, else the diffs'."""
    diffs = [pid for pid in registry.patch_ids() if registry.is_diff(pid)]
    if tree_named or not diffs:
        return Base(tree())
    return diffs_base(diffs, to, progress)


def diffs_base(ids: list[str], to: str, progress: Callable[[str], None]) -> Base:
    """The release the diffs `ids` were made for: the oldest cached release holding every file's
    pre-image of the most diffs (a diff stacked on another holds the lower one's post-image in the
    files they share, and matches no release fully); where no cached release matches any of them,
    the index's releases up to V are fetched as needed (`release_blobs.find_base`, never past V:
    V0 is older)."""
    from patchkit.diffs import release_blobs, unidiff

    diffs = []
    for pid in ids:
        path = registry.source_file(pid)
        diff = unidiff.load(unidiff.read_file(path), path.name)
        if not unidiff.nothing_inside(diff):  # (a diff of files outside the package names no release)
            diffs.append(diff)
    found = _base(diffs, release_blobs.made_for)
    if found is None:  # fetched as rebase does, each diff on its own files (not those stacked on another)
        release_blobs.find_bases(diffs, to, progress, last=to)
        found = _base(diffs, release_blobs.made_for)
    if found is None:
        raise UsageError("the loaded diffs name no release they were made for (their index hashes match no release); "
                         "pass --from V0")
    return found


def _base(diffs: list[DiffPatchFile], made_for: Callable[[DiffPatchFile], list[Match]]) -> Base | None:
    """The oldest release holding every pre-image of the most diffs; where none holds a whole
    diff's, the best partial match of the first diff that has one (its newest); None: no match."""
    full: dict[str, int] = {}  # release -> how many diffs it holds every pre-image of
    partial: str | None = None
    for diff in diffs:
        matches = made_for(diff)
        complete = [m.version for m in matches if m.matched == m.total]
        for version in complete:
            full[version] = full.get(version, 0) + 1
        if matches and partial is None:
            partial = matches[0].version
    if full:
        most = max(full.values())
        matching = sorted((v for v, n in full.items() if n == most), key=Version)
        return Base(matching[0], tuple(matching))
    return None if partial is None else Base(partial)
