"""Where patchkit keeps what it fetches and remembers (releases, wheels, verdicts, crash logs):
`PATCHKIT_HOME`, else ~/.cache/patchkit. Read at each call: tests and users point it elsewhere
per process."""

from __future__ import annotations

import os
from pathlib import Path

from patchkit.base.constants import ENV_HOME


def home() -> Path:
    return Path(os.environ.get(ENV_HOME) or Path.home() / ".cache" / "patchkit")
