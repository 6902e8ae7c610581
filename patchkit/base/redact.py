"""Credentials out of what patchkit echoes: a URL's userinfo (`http://user:pw@host/`) and the
values of secret-looking query parameters (`?token=...`, `api_key=...`) become `***`, in error
lines, `--json`, the crash log's argv, wherever a URL given by the user is shown again."""

from __future__ import annotations

import re

MASK = "***"
# scheme://userinfo@ : the userinfo runs to the last `@` before the path (a password's own `@`
# is percent-encoded in a URL, but urlsplit takes the last one, so this does too).
_USERINFO = re.compile(r"(?P<scheme>\b[A-Za-z][A-Za-z0-9+.-]*://)(?P<userinfo>[^/?#\s]*)@")
# ?name=value or &name=value; the value is masked when a word of the name (split at _ . -)
# speaks of a secret: token, api_key, X-Amz-Signature, password...
_QUERY_PARAMETER = re.compile(r"(?P<name>[?&;](?P<key>[^=&#;\s]*)=)(?P<value>[^&#;\s]*)")
_SECRET_WORDS = frozenset({"key", "apikey", "token", "accesstoken", "secret", "password", "passwd", "pwd", "pw",
                           "auth", "signature", "sig", "credential", "credentials"})


def _masked_parameter(found: re.Match[str]) -> str:
    words = re.split(r"[_.\-]", found["key"].lower())
    return f"{found['name']}{MASK}" if _SECRET_WORDS.intersection(words) else found[0]


def redacted(text: str) -> str:
    """`text` (a URL, or a line holding URLs) with any userinfo and secret query values masked."""
    text = _USERINFO.sub(lambda found: f"{found['scheme']}{MASK}@", text)
    return _QUERY_PARAMETER.sub(_masked_parameter, text)
