"""`verify --url` never echoes credentials: a URL's userinfo and secret query values are masked
(patchkit/base/redact.py) in its error lines, its --json, its output and the crash log's argv; and a
URL that cannot name a server (another scheme, no host, a port out of range) is exit 2, one line."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from patchkit.base.constants import EXIT_BUG, EXIT_TARGET, EXIT_USAGE
from patchkit.base.redact import redacted
from testing.cli import run
from testing.server_info import serving

RECORDED = json.loads((Path(__file__).parents[2] / "fixtures" / "server_info_0.5.23.json").read_text())
SECRETS = ("secret", "tok123", "k3y")


def _free_port() -> int:
    with socket.socket() as sock:  # a port that nothing listens on once closed
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _patchkit(home: Path, *args: str, code: str | None = None) -> subprocess.CompletedProcess[str]:
    """patchkit in a process of its own (its real sys.argv, its own crash log under `home`)."""
    env = {**os.environ, "PATCHKIT_HOME": str(home)}
    command = [sys.executable, "-c", code, *args] if code else [sys.executable, "-m", "patchkit", *args]
    return subprocess.run(command, capture_output=True, text=True, env=env, timeout=120)


def _written(home: Path) -> str:
    return "".join(path.read_text(errors="replace") for path in home.rglob("*") if path.is_file())


@pytest.mark.parametrize("as_json", [False, True])
def test_a_refused_connection_says_the_url_without_its_credentials(tmp_path, as_json):
    url = f"http://user:secret@127.0.0.1:{_free_port()}/?token=tok123&api_key=k3y"
    result = _patchkit(tmp_path, "verify", "--url", url, *(["--json"] if as_json else []))
    assert result.returncode == EXIT_TARGET, (result.stdout, result.stderr)
    said = result.stdout + result.stderr
    assert "cannot reach http://***@127.0.0.1:" in said and "token=***" in said and "api_key=***" in said, said
    assert not [word for word in SECRETS if word in said + _written(tmp_path)], said


def test_the_crash_log_holds_argv_without_the_credentials(tmp_path):
    # An unexpected bug while auditing: exit 70 and a crash log whose header names argv.
    crash = ("import sys\nfrom patchkit.cli import app\nfrom patchkit.runtime import server_report\n"
             "def broken(*args, **kwargs):\n    raise RuntimeError('a bug')\n"
             "server_report.fetch = broken\nsys.argv[0] = 'patchkit'\napp.main()\n")
    url = f"http://user:secret@127.0.0.1:{_free_port()}/?token=tok123"
    result = _patchkit(tmp_path, "verify", "--url", url, code=crash)
    assert result.returncode == EXIT_BUG, (result.stdout, result.stderr)
    [log] = list((tmp_path / "logs").iterdir())
    text = log.read_text()
    assert "argv: patchkit verify --url http://***@127.0.0.1:" in text and "token=***" in text, text
    assert not [word for word in SECRETS if word in text + result.stdout + result.stderr], text


def test_a_served_report_names_the_url_without_its_credentials():
    with serving(RECORDED) as base:
        url = base.replace("http://", "http://user:secret@")
        text = run("verify", "--url", url)
        as_json = run("verify", "--url", url, "--json")
    assert as_json.json()["url"] == base.replace("http://", "http://***@") + "/server_info"
    assert "http://***@127.0.0.1:" in text.stdout
    assert "secret" not in text.stdout + text.stderr + as_json.stdout + as_json.stderr


@pytest.mark.parametrize("url,words", [
    ("ftp://user:secret@127.0.0.1:30000/", "give an http:// or https:// URL"),
    ("file:///etc/passwd", "give an http:// or https:// URL"),
    ("http://user:secret@:30000/", "no host in it"),
    ("http:///server_info", "no host in it"),
    ("http://user:secret@127.0.0.1:65536/", "Port out of range"),
    ("http://127.0.0.1:0/?token=tok123", "Port out of range"),
    ("http://user:secret@127.0.0.1:-1/", "Port"),
])
def test_a_url_that_names_no_server_is_exit_2_in_one_line(url, words):
    result = run("verify", "--url", url)
    assert result.exit_code == EXIT_USAGE and words in result.stderr, result.stderr
    assert len(result.stderr.strip().splitlines()) == 1 and not result.stdout, result.stderr
    assert not [word for word in SECRETS if word in result.stderr], result.stderr


@pytest.mark.parametrize("text,shown", [
    ("http://user:secret@host:1/x", "http://***@host:1/x"),
    ("https://u:p@ss@host/", "https://***@host/"),  # urlsplit takes the last @
    ("http://host/?a=1&token=t&access_token=t&X-Amz-Signature=s&monkey=2", "http://host/?a=1&token=***&access_token=***&X-Amz-Signature=***&monkey=2"),
    ("argv: patchkit verify --url=http://a:b@h/", "argv: patchkit verify --url=http://***@h/"),
    ("http://127.0.0.1:30000/server_info", "http://127.0.0.1:30000/server_info"),
])
def test_redacted_masks_userinfo_and_secret_query_values_only(text, shown):
    assert redacted(text) == shown
