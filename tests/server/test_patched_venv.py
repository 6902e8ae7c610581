"""`patchkit apply --python` on a venv, then a real SGLang server from that venv (the CPU engine,
tests/server/conftest.py), started with `--api-key`: it serves, and reports the patches it runs
in every process that loads plugins, in `/server_info` and on `/metrics`; `verify --url` passes
with the key in PATCHKIT_API_KEY and says what to do without it."""

from __future__ import annotations

import pytest

from testing import server, server_checks
from testing.cli import run
from testing.server_checks import Served

pytestmark = pytest.mark.server

KEY = "sk-server-tier"


@pytest.fixture(scope="module")
def patched(version, launch, tmp_path_factory) -> Served:
    python = server.python_for(version, tmp_path_factory.mktemp(f"venv-{version}"))
    applied = run("apply", "--python", python)
    assert applied.exit_code == 0, applied.stderr
    site = server.site_packages(python.parents[1])
    return Served(launch(python, api_key=KEY), site, server_checks.recorded(site))


def test_it_serves_with_the_key_only(patched):
    out = server_checks.generate(patched.server)
    assert out["meta_info"]["completion_tokens"] == 8 and out["text"], out
    assert patched.server.request("POST", "/generate", {"text": "x"}, key=None).status == 401
    chat = patched.server.request("POST", "/v1/chat/completions", {
        "model": "tiny", "messages": [{"role": "user", "content": "Hello"}], "max_tokens": 4})
    assert chat.status == 200 and chat.json()["choices"][0]["message"]["content"] is not None, chat.body[:300]


def test_every_process_that_loads_plugins_logs_its_line(patched):
    server_checks.check_lines(patched)


def test_server_info_carries_the_report(patched):
    server_checks.check_server_info(patched)


def test_the_gauge_is_on_metrics(patched):
    server_checks.check_gauge(patched)


def test_verify_url_passes_with_the_key(patched, monkeypatch):
    monkeypatch.setenv("PATCHKIT_API_KEY", KEY)
    result = run("verify", "--url", patched.server.url, "--json")
    assert result.exit_code == 0, (result.stdout, result.stderr)
    [rank] = result.json()["ranks"]
    assert rank["ok"] and rank["findings"] == [] and rank["active"] == sorted(patched.digests), rank
    assert result.json()["expected"] == patched.digests
    said = run("verify", "--url", patched.server.url).stdout
    assert f"  dp0 tp0 pid {rank['pid']} (SGLang {patched.server.version}): ok, {len(patched.digests)} patch(es) active" \
        in said, said


def test_verify_url_needs_the_key(patched, monkeypatch):
    monkeypatch.delenv("PATCHKIT_API_KEY", raising=False)
    without = run("verify", "--url", patched.server.url)
    assert without.exit_code == 3 and "started with --api-key; give that key in PATCHKIT_API_KEY" in without.stderr, (
        without.stdout, without.stderr)
    monkeypatch.setenv("PATCHKIT_API_KEY", "not-the-key")
    wrong = run("verify", "--url", patched.server.url)
    assert wrong.exit_code == 3 and "it refused the key in PATCHKIT_API_KEY" in wrong.stderr, wrong.stderr
