"""git's own 3-way merge of one file (`git merge-file -p`), for `rebase` and `bump` only: where
merge3's whole-file merge (three_way.merge_whole_file) conflicts because it aligns the lines otherwise
than git does, git's may be clean, and patchkit is never worse than `git apply --3way` (issue 40
item 3). A subprocess, so never on `status` / `apply`'s path (they judge with merge3 alone)."""

from __future__ import annotations

import os
import subprocess
import tempfile
from pathlib import Path

# No user or system configuration (a merge driver, a conflict style) changes what a clean merge is.
_ENV = {"GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_GLOBAL": os.devnull, "LC_ALL": "C"}
TIMEOUT = 60  # seconds: git merges a 300 kB file in well under one


def merge_file(base: bytes, ours: bytes, theirs: bytes) -> bytes | None:
    """`ours` with the change base -> theirs merged in by git, or None where git conflicts, fails
    or is not there (the caller then keeps its own answer)."""
    with tempfile.TemporaryDirectory(prefix="patchkit-merge-") as tmp:
        paths = []
        for name, data in (("ours", ours), ("base", base), ("theirs", theirs)):
            path = Path(tmp) / name
            path.write_bytes(data)
            paths.append(str(path))
        try:
            done = subprocess.run(["git", "merge-file", "-p", *paths], capture_output=True, check=False,
                                  stdin=subprocess.DEVNULL, timeout=TIMEOUT, env={**os.environ, **_ENV})
        except (OSError, subprocess.SubprocessError):
            return None
    return done.stdout if done.returncode == 0 else None
