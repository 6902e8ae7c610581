"""The one rule for a patch id, shared by the registry (at load), the state file's schema, diff
patches (`Patchkit-Id:`) and `capture`: lower-case letters, digits and dashes, starting with a
letter or digit. Module files spell the dashes as underscores."""

from __future__ import annotations

import re

_PATCH_ID = re.compile(r"[a-z0-9][a-z0-9-]*\Z")
PATCH_ID_RULE = "lower-case letters, digits and dashes, starting with a letter or digit"


def is_patch_id(value: object) -> bool:
    """Whether `value` is a valid patch id (see PATCH_ID_RULE)."""
    return isinstance(value, str) and bool(_PATCH_ID.match(value))
