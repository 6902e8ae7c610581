"""The read-only overlay way: `patchkit apply --target V --fetch DIR` writes a patched copy of the
release, and a venv that has the pristine release installed serves from it with DIR on
PYTHONPATH: the overlay shadows the venv's own SGLang, and every process reports the overlay's
patches (its line, `/server_info`, the gauge); `verify --url` passes."""

from __future__ import annotations

import pytest

from testing import server, server_checks
from testing.cli import run
from testing.releases import HOME, pristine
from testing.server_checks import Served

pytestmark = pytest.mark.server


@pytest.fixture(scope="module")
def overlaid(version, launch, tmp_path_factory) -> Served:
    python = server.python_for(version, tmp_path_factory.mktemp(f"venv-{version}"))
    overlay = tmp_path_factory.mktemp(f"overlay-{version}") / "sglang-overlay"
    pristine(version)  # the wheel is in the tests' cache: --fetch installs from it, nothing downloaded
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("PATCHKIT_HOME", str(HOME))
        fetched = run("apply", "--target", version, "--fetch", overlay)
    assert fetched.exit_code == 0, fetched.stderr
    assert not (server.site_packages(python.parents[1]) / ".patchkit").exists()  # the venv's own SGLang: pristine
    return Served(launch(python, pythonpath=(overlay,)), overlay, server_checks.recorded(overlay))


def test_it_serves(overlaid):
    assert server_checks.generate(overlaid.server)["meta_info"]["completion_tokens"] == 8


def test_every_process_that_loads_plugins_logs_the_overlay(overlaid):
    server_checks.check_lines(overlaid)


def test_server_info_reports_the_overlay(overlaid):
    server_checks.check_server_info(overlaid)


def test_the_gauge_is_on_metrics(overlaid):
    server_checks.check_gauge(overlaid)


def test_verify_url_passes(overlaid):
    result = run("verify", "--url", overlaid.server.url, "--json")
    assert result.exit_code == 0, (result.stdout, result.stderr)
    [rank] = result.json()["ranks"]
    assert rank["ok"] and rank["active"] == sorted(overlaid.digests), rank
