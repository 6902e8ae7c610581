"""Container image references (`name[:tag][@digest]`), checked against the grammar of the
distribution reference that docker, podman and buildah accept.

Written from the grammar (distribution/reference, "Grammar"):

    reference        := name [ ":" tag ] [ "@" digest ]
    name             := [domain "/"] remote-name
    domain           := host [":" port-number]
    host             := domain-name | IPv4address | "[" IPv6address "]"
    domain-name      := domain-component ("." domain-component)*
    domain-component := [a-zA-Z0-9] | [a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9]
    port-number      := [0-9]+
    remote-name      := path-component ("/" path-component)*
    path-component   := alpha-numeric (separator alpha-numeric)*
    alpha-numeric    := [a-z0-9]+
    separator        := [_.] | "__" | "-"+
    tag              := [A-Za-z0-9_][A-Za-z0-9_.-]{0,127}
    digest           := algorithm ":" hex
    algorithm        := [A-Za-z][A-Za-z0-9]* ([+._-] [A-Za-z][A-Za-z0-9]*)*
    hex              := [0-9a-fA-F]{32,}

and a name of at most 255 characters. Nothing outside this alphabet (no whitespace, newline,
quote, `$` or backslash) can pass, which is what keeps a reference from ending a Dockerfile
instruction or starting another.
"""

from __future__ import annotations

import re

_DOMAIN_COMPONENT = r"(?:[a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9])"
_HOST = rf"(?:{_DOMAIN_COMPONENT}(?:\.{_DOMAIN_COMPONENT})*|\[[0-9a-fA-F:.]+\])"
_DOMAIN = rf"{_HOST}(?::[0-9]+)?"
_PATH_COMPONENT = r"[a-z0-9]+(?:(?:[_.]|__|-+)[a-z0-9]+)*"
_REMOTE_NAME = rf"{_PATH_COMPONENT}(?:/{_PATH_COMPONENT})*"
_TAG = r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}"
_DIGEST = r"[A-Za-z][A-Za-z0-9]*(?:[-_+.][A-Za-z][A-Za-z0-9]*)*:[0-9a-fA-F]{32,}"

# The domain is optional and can look like a path component: the regex backtracks between both.
_REFERENCE = re.compile(rf"(?P<name>(?:{_DOMAIN}/)?{_REMOTE_NAME})(?::(?P<tag>{_TAG}))?(?:@{_DIGEST})?", re.ASCII)
NAME_MAX = 255


def is_reference(text: str) -> bool:
    """Whether `text` is a whole image reference (`lmsysorg/sglang:v0.5.17`, `host:5000/a/b@sha256:...`)."""
    found = _REFERENCE.fullmatch(text)
    return found is not None and len(found.group("name")) <= NAME_MAX


def tag(text: str) -> str | None:
    """The tag of an image reference (`v0.5.17` of `lmsysorg/sglang:v0.5.17`), None when it has none."""
    found = _REFERENCE.fullmatch(text)
    return found.group("tag") if found else None
