"""SGLang version strings, parsed once with `packaging`: a leading `v` (the Docker tag
spelling) is accepted, anything that is not a version is refused."""

from __future__ import annotations

from packaging.version import InvalidVersion, Version

from patchkit.base.errors import PatchkitError, UsageError

MAX_LENGTH = 64  # the longest real spellings (0.5.19.post1.dev3+cu130.torch2.9) are under 40


def parse(text: str, what: str = "version", error: type[PatchkitError] = UsageError) -> Version:
    """`0.5.19`, `v0.5.19`, `0.5.17.post1`, `0.5.19+cu130` -> Version; anything else -> `error`
    (exit 2 for what the user typed)."""
    spelled = str(text).strip()
    if len(spelled) > MAX_LENGTH:  # 5000 digits would pass the grammar, then fail int() (exit 70)
        raise error(f"{what}: {spelled[:20]!r}... ({len(spelled)} characters) is not a version (at most "
                    f"{MAX_LENGTH} characters, e.g. 0.5.17)")
    try:
        return Version(spelled)
    except (InvalidVersion, ValueError):
        raise error(f"{what}: {text!r} is not a version (expected something like 0.5.17)") from None


def normalise(text: str, what: str = "version") -> str:
    """The canonical spelling (`v0.5.17` -> `0.5.17`); versions are compared as `Version`s."""
    return str(parse(text, what))


def public(version: Version) -> Version:
    """The public release of a local build: 0.5.19+cu130 -> 0.5.19."""
    return Version(version.public)


def release_of(version: Version) -> Version:
    """The release a post, dev or local build belongs to: 0.5.17.post1 -> 0.5.17."""
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
