"""SGLang version strings, parsed once with `packaging`: a leading `v` (the Docker tag
spelling) is accepted, anything that is not a version is refused.

A plain release or post release, spelled as SGLang's releases and patchkit's manifests are
(`0.5.17`, `0.5.15.post1`), is also compared without packaging (`plain`): `status` and a no-op
`apply` compare only such versions, and importing packaging.version (its grammar compiled with
it) was 3% of the instructions a `status` runs (issue 43.3)."""

from __future__ import annotations

import re

from patchkit.base.lean_typing import TYPE_CHECKING
from patchkit.base.errors import PatchkitError, UsageError

if TYPE_CHECKING:
    from packaging.version import Version

MAX_LENGTH = 64  # the longest real spellings (0.5.19.post1.dev3+cu130.torch2.9) are under 40
_PLAIN = re.compile(r"([0-9]+(?:\.[0-9]+)*)(?:\.post([0-9]+))?")


def plain(text: str) -> tuple[tuple[int, ...], int] | None:
    """For a plain release or post release as SGLang spells them (digits and dots, then perhaps
    `.postN`; nothing around them), a key that orders and equates it with any other such key as
    packaging's `Version` orders and equates the two: the release without its trailing zeros
    (0.5.17.0 is 0.5.17), then the post number (-1 for none, before post0). None for any other
    spelling (`v0.5.17`, a local build, a pre-release, a space around it): packaging decides those."""
    found = _PLAIN.fullmatch(text) if len(text) <= MAX_LENGTH else None
    if found is None:
        return None
    release = [int(part) for part in found[1].split(".")]
    while release and release[-1] == 0:
        release.pop()
    return tuple(release), -1 if found[2] is None else int(found[2])


def check(text: str, what: str = "version", error: type[PatchkitError] = UsageError) -> None:
    """Refuse what `parse` refuses (`error`), without packaging for a plain spelling."""
    if plain(text) is None:
        parse(text, what, error)


def same(a: str, b: str) -> bool:
    """Whether `a` and `b` are one version (`Version(a) == Version(b)`, packaging's InvalidVersion
    for what is not a version)."""
    mine, theirs = plain(a), plain(b)
    if mine is not None and theirs is not None:
        return mine == theirs
    from packaging.version import Version

    return Version(a) == Version(b)


def ordered(texts: list[str]) -> list[str]:
    """`texts` in the order of the versions they spell (`sorted(texts, key=Version)`)."""
    keys = [key for key in map(plain, texts) if key is not None]
    if len(keys) == len(texts):  # (sorted by key alone: stable, as sorted(key=Version) is, where two are equal)
        return [text for _, text in sorted(zip(keys, texts), key=lambda pair: pair[0])]
    from packaging.version import Version

    return sorted(texts, key=Version)


def parse(text: str, what: str = "version", error: type[PatchkitError] = UsageError) -> Version:
    """`0.5.19`, `v0.5.19`, `0.5.17.post1`, `0.5.19+cu130` -> Version; anything else -> `error`
    (exit 2 for what the user typed)."""
    spelled = str(text).strip()
    if len(spelled) > MAX_LENGTH:  # 5000 digits would pass the grammar, then fail int() (exit 70)
        raise error(f"{what}: {spelled[:20]!r}... ({len(spelled)} characters) is not a version (at most "
                    f"{MAX_LENGTH} characters, e.g. 0.5.17)")
    from packaging.version import InvalidVersion, Version

    try:
        return Version(spelled)
    except (InvalidVersion, ValueError):
        raise error(f"{what}: {text!r} is not a version (expected something like 0.5.17)") from None


def normalise(text: str, what: str = "version") -> str:
    """The canonical spelling (`v0.5.17` -> `0.5.17`); versions are compared as `Version`s."""
    return str(parse(text, what))


def spelled(text: str) -> str:
    """One spelling per release, for a name made from it: `normalise`, less the zeros a release's
    fourth part on adds (`0.5.21.0` -> `0.5.21`, as `v0.5.21` and `0.5.21` are; `0.6.0` stays)."""
    version = parse(text, "version")
    release = list(version.release)
    while len(release) > 3 and release[-1] == 0:
        release.pop()
    canonical = str(version)
    head = ".".join(str(part) for part in version.release)
    return canonical.replace(head, ".".join(str(part) for part in release), 1)


def public(version: Version) -> Version:
    """The public release of a local build: 0.5.19+cu130 -> 0.5.19."""
    from packaging.version import Version

    return Version(version.public)


def release_of(version: Version) -> Version:
    """The release a post, dev or local build belongs to: 0.5.17.post1 -> 0.5.17."""
    from packaging.version import Version

    return Version(version.base_version)


def runs(versions: list[str], chosen: set[str]) -> str:
    """The chosen releases as runs of neighbours in `versions`' order: '0.5.10-0.5.17, 0.5.20'."""
    spans: list[list[str]] = []
    previous = False
    for version in versions:
        if version in chosen:
            if previous:
                spans[-1][1] = version
            else:
                spans.append([version, version])
        previous = version in chosen
    return ", ".join(a if a == b else f"{a}-{b}" for a, b in spans) or "-"
