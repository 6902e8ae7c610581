from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

import pytest

from testing.synthetic import memory_folder


@pytest.fixture
def scratch(tmp_path):
    """A folder for synthetic trees, on a memory file system when there is one (/dev/shm):
    every patchkit write syncs its file and folder, which on a busy disk costs more than the
    rest of a unit test together. Removed after the test."""
    root = memory_folder()
    if root is None:
        yield tmp_path
        return
    folder = Path(tempfile.mkdtemp(prefix="patchkit-unit-", dir=root))
    try:
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)
