"""A patched venv whose patched file was edited by hand, served again (a restart) with another
patch switched off by SGLANG_PATCHKIT_DISABLE: the edited patch is `drifted` and the switched-off
one `disabled` in every plugin-loading process's line, in `/server_info` and on the gauge;
`verify --url` fails naming the drifted patch, and lists the disabled one without failing on it."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from testing import server, server_checks
from testing.cli import run
from testing.server_checks import Served

pytestmark = pytest.mark.server

EDITED = "autoround-packed-mapping"
SWITCHED_OFF = "fp8-kv-triton-sm89"


@dataclass
class Drifted(Served):
    edited_file: str

    @property
    def states(self) -> dict[str, str]:
        states = super().states
        states.update({EDITED: server_checks.DRIFTED, SWITCHED_OFF: server_checks.DISABLED})
        return states

    @property
    def drifted(self) -> list[str]:
        return [self.edited_file]


@pytest.fixture(scope="module")
def drifted(version, launch, tmp_path_factory) -> Drifted:
    python = server.python_for(version, tmp_path_factory.mktemp(f"venv-{version}"))
    assert run("apply", "--python", python).exit_code == 0
    site = server.site_packages(python.parents[1])
    digests = server_checks.recorded(site)
    [edited] = server_checks.files_of(site, EDITED)
    with open(site / edited, "a") as handle:  # the file patchkit wrote (a copy of its own, not the cache's)
        handle.write("# edited by hand on the server\n")
    served = launch(python, env={"SGLANG_PATCHKIT_DISABLE": SWITCHED_OFF})
    return Drifted(served, site, digests, edited)


def test_it_still_serves(drifted):
    assert server_checks.generate(drifted.server)["meta_info"]["completion_tokens"] == 8


def test_every_line_says_drifted_and_disabled(drifted):
    server_checks.check_lines(drifted)


def test_server_info_says_drifted_and_disabled(drifted):
    server_checks.check_server_info(drifted)


def test_the_gauge_is_0_for_both(drifted):
    server_checks.check_gauge(drifted)


def test_verify_url_fails_naming_the_drifted_patch_only(drifted):
    result = run("verify", "--url", drifted.server.url)
    assert result.exit_code == 1, (result.stdout, result.stderr)
    assert f"    drifted   {EDITED}: {drifted.edited_file} of {EDITED} holds other bytes" in result.stdout, result.stdout
    assert f"    disabled  {SWITCHED_OFF}: {SWITCHED_OFF} is switched off by SGLANG_PATCHKIT_DISABLE" in result.stdout
    [rank] = run("verify", "--url", drifted.server.url, "--json").json()["ranks"]
    assert {(f["patch"], f["problem"]) for f in rank["findings"]} == {(EDITED, "drifted"), (SWITCHED_OFF, "disabled")}
    assert rank["active"] == sorted(p for p, s in drifted.states.items() if s == server_checks.ACTIVE)
