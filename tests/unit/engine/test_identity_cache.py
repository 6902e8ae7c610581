"""The identity cache (`PATCHKIT_HOME/identity.json`) is written at most once per command, after
its work, with one atomic replace: on a cold home a command computes a digest per patch module and
per rendering module of patchkit, and each used to rewrite the whole cache (16 replaces for
`apply` on a real release)."""

from __future__ import annotations

import os

import pytest

from patchkit.engine import identity
from testing import synthetic as syn
from testing.synthetic import Synthetic


@pytest.fixture
def tree(scratch) -> Synthetic:
    return Synthetic(syn.make_tree(scratch / "site"), syn.write_patches(scratch / "patches"))


@pytest.fixture
def cold(monkeypatch):
    """This process forgets every digest it computed: the next command starts as a new process."""
    def forget() -> None:
        identity._memo.clear()
        identity._loaded.cache_clear()
        identity.engine_digest.cache_clear()
    forget()
    yield forget
    forget()


@pytest.fixture
def cache_writes(monkeypatch, patchkit_home) -> list[str]:
    """The destinations of every os.replace onto the identity cache."""
    written: list[str] = []
    real = os.replace

    def counted(src, dst, *args, **kwargs):
        if os.fspath(dst) == os.fspath(patchkit_home / identity.CACHE_FILE):
            written.append(os.fspath(dst))
        return real(src, dst, *args, **kwargs)

    monkeypatch.setattr(os, "replace", counted)
    return written


def test_a_cold_home_gets_one_write_holding_every_digest(tree, cold, cache_writes, patchkit_home):
    result = tree.run("apply")
    assert result.exit_code == 0, result.stderr
    assert cache_writes == [os.fspath(patchkit_home / identity.CACHE_FILE)]
    # New processes on the warm home: every digest is read from the file, none computed, nothing written.
    for command in ("revert", "apply"):
        cold()
        assert tree.run(command).exit_code == 0
    assert len(cache_writes) == 1
