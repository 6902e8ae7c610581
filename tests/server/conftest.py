"""The server tier: a real SGLang server per release and test module, on this machine's CPU
(testing/server.py). Skipped, with the reason, where its Python cannot be made.

The releases: 0.5.23 by default (what `pytest` and so `.ci/run` run: four server starts, 4.6 min at
load 3-4 on the 2-core machine); PATCHKIT_SERVER_RELEASES=0.5.23,0.5.19,0.5.17 runs each of
those (each release served here; docs/runtime.md)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Callable, Iterator

import pytest

from testing import server
from testing.server import Server

RELEASES = [v.strip() for v in os.environ.get("PATCHKIT_SERVER_RELEASES", "0.5.23").split(",") if v.strip()]


@pytest.fixture(scope="session")
def layer() -> Path:
    try:
        return server.layer()
    except server.Unavailable as exc:
        pytest.skip(f"no server venv here: {exc}")


@pytest.fixture(scope="session")
def model(layer, tmp_path_factory) -> Path:
    return server.make_model(layer / "bin" / "python", tmp_path_factory.mktemp("model") / "tiny-llama")


@pytest.fixture(scope="module", params=RELEASES)
def version(request) -> str:
    return request.param


@pytest.fixture(scope="module")
def launch(model, version, tmp_path_factory) -> Iterator[Callable[..., Server]]:
    """launch(python, **start's options) -> a healthy server; every one is stopped by PID after
    the module (the teardown fails when a process of it is left)."""
    started: list[Server] = []

    def go(python: Path, **options) -> Server:
        found = server.start(python, model, version, tmp_path_factory.mktemp(f"server-{version}"), **options)
        started.append(found)
        print(f"SGLang {version} healthy after {found.healthy_after:.1f} s")
        return found

    yield go
    left = []
    for each in started:
        try:
            notes = each.stop()
        except AssertionError as exc:
            left.append(str(exc))
        else:
            print(f"SGLang {version} stopped; {'; '.join(notes) or 'by the launcher SIGTERM alone'}")
    assert not left, left


@pytest.fixture(autouse=True)
def no_kernel_called() -> Iterator[None]:
    """Every test: the stand-in sgl_kernel (testing/sgl_kernel_standin) was never called by any
    server of the session; a call means the server took a path that needs a real kernel."""
    yield
    calls = {each.version: each.kernel_events()[1] for each in server.started()}
    assert not any(calls.values()), f"the stand-in sgl_kernel was called: {calls}"
