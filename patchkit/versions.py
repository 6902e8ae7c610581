"""SGLang version strings, parsed once with `packaging`: a leading `v` (the Docker tag
spelling) is accepted, anything that is not a version is refused."""

from __future__ import annotations

from packaging.version import InvalidVersion, Version

from patchkit.errors import PatchkitError, UsageError


def parse(text: str, what: str = "version", error: type[PatchkitError] = UsageError) -> Version:
    """`0.5.19`, `v0.5.19`, `0.5.17.post1`, `0.5.19+cu130` -> Version; anything else -> `error`
    (exit 2 for what the user typed)."""
    try:
        return Version(str(text).strip())
    except InvalidVersion:
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
