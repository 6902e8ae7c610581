"""Files patchkit writes keep their owner and group, as they keep their mode: a tree owned by
another user stays that user's after apply and revert (the tests run as root, so they can
give the tree away first)."""

from __future__ import annotations

import os

import pytest

from testing.cli import run
from testing.releases import snapshot

pytestmark = pytest.mark.integration

OTHER = (4242, 4343)  # a uid and gid no file of the release has


def _owners(site) -> dict[str, tuple[int, int]]:
    return {p.relative_to(site).as_posix(): (p.stat().st_uid, p.stat().st_gid)
            for p in site.rglob("*") if p.is_file() and ".patchkit" not in p.parts}


@pytest.mark.skipif(os.geteuid() != 0, reason="giving a tree to another user needs root")
def test_apply_and_revert_keep_owner_and_group(release):
    site = release("0.5.17")
    for path in [site, *site.rglob("*")]:
        os.chown(path, *OTHER)
    before = snapshot(site)
    assert run("apply", "--site-packages", site).exit_code == 0
    changed = [rel for rel, digest in snapshot(site).items() if before.get(rel) != digest and not rel.startswith(".patchkit")]
    assert changed
    assert set(_owners(site).values()) == {OTHER}, {rel: o for rel, o in _owners(site).items() if o != OTHER}
    assert run("revert", "--site-packages", site).exit_code == 0
    assert snapshot(site) == before
    assert set(_owners(site).values()) == {OTHER}
