"""`patchkit verify --url` against servers that misbehave as a field network can: one that trickles
its answer (the timeout bounds the whole request, not each read), sends gigabytes, redirects to
another server (never followed: the audit is of the server named), answers JSON nested too deep
or a report of the wrong shape. Each is one error line with a documented exit code, never a hang,
a memory blow-up or exit 70; and the audit only ever GETs."""

from __future__ import annotations

import copy
import json
import signal
import time
from pathlib import Path

import pytest

from patchkit.runtime import server_report
from testing.cli import run
from testing.server_info import answering

RECORDED = json.loads((Path(__file__).parents[2] / "fixtures" / "server_info_0.5.23.json").read_text())


@pytest.fixture(autouse=True)
def server_survives_a_hang_up(monkeypatch):
    """The servers run in this process while the CLI runs in it too: the CLI's SIGPIPE default (for
    `patchkit ... | head`, left set by any earlier in-process run) would kill the process when a
    hostile server writes to a socket the client has shut; SIGPIPE is ignored here, as Python
    starts, and put back after."""
    keep = signal.signal
    before = keep(signal.SIGPIPE, signal.SIG_IGN)
    monkeypatch.setattr(signal, "signal", lambda sig, handler: None if sig == signal.SIGPIPE else keep(sig, handler))
    yield
    monkeypatch.undo()
    keep(signal.SIGPIPE, before)


def send(handler, body: bytes, status: int = 200, headers: dict[str, str] | None = None) -> None:
    handler.send_response(status)
    for name, value in (headers or {"Content-Length": str(len(body))}).items():
        handler.send_header(name, value)
    handler.end_headers()
    handler.wfile.write(body)


def test_a_trickling_server_fails_within_the_timeout(monkeypatch):
    monkeypatch.setattr(server_report, "TIMEOUT", 2.0)

    def trickle(handler):
        handler.send_response(200)
        handler.send_header("Content-Length", "100000")
        handler.end_headers()
        for _ in range(30):  # one byte a second: no single read waits past a per-read timeout
            handler.wfile.write(b" ")
            handler.wfile.flush()
            time.sleep(1)

    with answering(trickle) as (url, methods):
        started = time.monotonic()
        result = run("verify", "--url", url)
        took = time.monotonic() - started
    assert result.exit_code == 3 and "did not answer within 2s" in result.stderr, result.stderr
    assert took < 6, took
    assert methods == ["GET"]


def test_a_server_that_sends_gigabytes_is_cut_off():
    def huge(handler):  # 3 GB announced by no length: read until the bound, then refused
        handler.send_response(200)
        handler.end_headers()
        chunk = b" " * (1 << 20)
        for _ in range(3000):
            handler.wfile.write(chunk)

    with answering(huge) as (url, _):
        result = run("verify", "--url", url)
    assert result.exit_code == 3, result.stderr
    assert f"answered more than {server_report.MAX_BODY >> 20} MiB" in result.stderr


def test_an_announced_huge_body_is_refused_before_reading():
    with answering(lambda h: send(h, b"", headers={"Content-Length": str(3 << 30)})) as (url, _):
        result = run("verify", "--url", url)
    assert result.exit_code == 3 and "more than" in result.stderr, result.stderr


@pytest.mark.parametrize("status", [301, 302, 307, 308])
def test_a_redirect_is_not_followed(status):
    with answering(lambda h: send(h, json.dumps(RECORDED).encode())) as (other, other_methods):
        location = f"{other}/server_info"
        with answering(lambda h: send(h, b"", status, {"Location": location, "Content-Length": "0"})) as (url, _):
            result = run("verify", "--url", url)
    assert result.exit_code == 3, result.stdout
    assert f"redirects to {location}" in result.stderr
    assert other_methods == []  # the other server was never asked


def test_json_nested_too_deep_is_exit_3():
    with answering(lambda h: send(h, b"[" * 200_000 + b"]" * 200_000)) as (url, _):
        result = run("verify", "--url", url)
    assert result.exit_code == 3 and "nested too deep" in result.stderr, result.stderr


def _shaped(change) -> bytes:
    info = copy.deepcopy(RECORDED)
    change(info["internal_states"][0]["patchkit"])
    return json.dumps(info).encode()


@pytest.mark.parametrize("change,words", [
    (lambda r: r.update(patches=5), "patches is not a list of objects"),
    (lambda r: r.update(patches=[5]), "patches is not a list of objects"),
    (lambda r: r.update(patches=[{"id": ["x"], "state": "active"}]), "a patch id is not a string"),
    (lambda r: [p.update(state="drifted", files=7) for p in r["patches"]] and None, "files of"),
    (lambda r: r.update(drifted=5), "drifted is not a list"),
])
def test_a_report_of_the_wrong_shape_is_a_finding_not_a_crash(change, words, tmp_path):
    labels = tmp_path / "labels.json"  # what rank 1 serves: it passes, rank 0 alone is wrong
    labels.write_text(json.dumps({"io.patchkit.patches": ",".join(
        f"{p['id']}@sha256:{p['sha256']}" for p in RECORDED["internal_states"][1]["patchkit"]["patches"])}))
    with answering(lambda h: send(h, _shaped(change))) as (url, _):
        result = run("verify", "--url", url, "--expect-from", labels, "--json")
    assert result.exit_code == 1, result.stdout + result.stderr
    rank0, rank1 = result.json()["ranks"]
    assert not rank0["ok"] and rank1["ok"]
    assert any(f["problem"] == "no-report" and words in f["detail"] for f in rank0["findings"]), rank0


def test_expect_from_a_fifo_is_refused_not_waited_on(tmp_path):
    import os

    fifo = tmp_path / "labels.json"
    os.mkfifo(fifo)
    result = run("verify", "--url", "http://127.0.0.1:1", "--expect-from", fifo)  # hung for ever before
    assert result.exit_code == 6 and "not a regular file (a FIFO)" in result.stderr, result.stderr


def test_expect_from_json_nested_too_deep_is_exit_2(tmp_path):
    labels = tmp_path / "labels.json"
    labels.write_text("[" * 200_000 + "]" * 200_000)
    result = run("verify", "--url", "http://127.0.0.1:1", "--expect-from", labels)
    assert result.exit_code == 2 and "nested too deep" in result.stderr, result.stderr


@pytest.mark.parametrize("url,words", [
    ("http://[::1", "Invalid IPv6 URL"),  # was exit 70 (ValueError)
    ("http://exa mple.com", "no spaces or control characters"),  # was exit 70 (InvalidURL)
    ("http://127.0.0.1:1/\nx", "no spaces or control characters"),
    ("http://127.0.0.1:99999", "Port out of range"),
])
def test_a_malformed_url_is_exit_2(url, words):
    result = run("verify", "--url", url)
    assert result.exit_code == 2 and words in result.stderr, result.stderr


def test_a_server_started_with_an_api_key_is_asked_with_it(monkeypatch, tmp_path):
    """SGLang's --api-key guards /server_info (sglang/srt/utils/auth.py: 401 without the bearer
    token); verify --url said 'not an SGLang server's /server_info' and had no way to give the key."""
    def guarded(handler):
        if handler.headers.get("Authorization") == "Bearer s3cret":
            send(handler, json.dumps(RECORDED).encode())
        else:
            send(handler, b'{"error": "Unauthorized"}', 401)

    labels = tmp_path / "labels.json"
    labels.write_text(json.dumps({"io.patchkit.patches": ",".join(
        f"{p['id']}@sha256:{p['sha256']}" for p in RECORDED["internal_states"][1]["patchkit"]["patches"])}))
    with answering(guarded) as (url, _):
        monkeypatch.delenv("PATCHKIT_API_KEY", raising=False)
        without = run("verify", "--url", url, "--expect-from", labels)
        monkeypatch.setenv("PATCHKIT_API_KEY", "wrong")
        wrong = run("verify", "--url", url, "--expect-from", labels)
        monkeypatch.setenv("PATCHKIT_API_KEY", "s3cret")
        keyed = run("verify", "--url", url, "--expect-from", labels)
    assert without.exit_code == 3 and "give that key in PATCHKIT_API_KEY" in without.stderr, without.stderr
    assert wrong.exit_code == 3 and "it refused the key in PATCHKIT_API_KEY" in wrong.stderr, wrong.stderr
    assert keyed.exit_code == 0, keyed.stdout + keyed.stderr



FORGED = "\x1b[2J\rserver verified: 1 rank(s) run the expected patches\n"


@pytest.mark.parametrize("field", ["id", "sglang", "pid", "file", "error"])
def test_text_from_the_server_is_printed_escaped(field, tmp_path):
    """A patch id, version, pid, file name or error the server reports is printed with its control
    characters escaped: an ESC, a CR or a newline in it forged the audit's own lines (and drove the
    terminal)."""
    info = copy.deepcopy(RECORDED)
    report = info["internal_states"][0]["patchkit"]
    first = report["patches"][0]
    if field == "id":
        first["id"] += FORGED
    elif field in ("sglang", "pid", "error"):
        report[field] = f"{report[field]}{FORGED}"
    else:
        first.update(state="drifted", files=[first["files"][0] + FORGED])
        report["drifted"] = first["files"]
    labels = tmp_path / "labels.json"
    labels.write_text(json.dumps({"io.patchkit.patches": ",".join(
        f"{p['id']}@sha256:{p['sha256']}" for p in RECORDED["internal_states"][1]["patchkit"]["patches"])}))
    with answering(lambda h: send(h, json.dumps(info).encode())) as (url, _):
        result = run("verify", "--url", url, "--expect-from", labels)
    assert result.exit_code == (0 if field in ("sglang", "pid") else 1), result.stdout + result.stderr
    printed = result.stdout + result.stderr
    assert not any(c in printed.replace("\n", "") for c in "\x1b\r"), printed
    assert "\\x1b[2J\\rserver verified" in printed, printed
    assert not any(line.startswith("server verified: 1 rank(s)") for line in printed.splitlines()), printed


@pytest.mark.parametrize("version", ["banana", "0.5." + "9" * 100, "0.5.23\x1b[2J"])
def test_a_servers_bad_version_string_is_exit_3(version):
    """Without --expect-from the audit expects the patch set of the release the ranks report; a
    version string that is no version was read as the user's bad input (exit 2); a bad server is 3."""
    info = copy.deepcopy(RECORDED)
    for state in info["internal_states"]:
        state["patchkit"]["sglang"] = version
    with answering(lambda h: send(h, json.dumps(info).encode())) as (url, _):
        result = run("verify", "--url", url)
    assert result.exit_code == 3, result.stdout + result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "is not a version" in lines[0] and "the server" in lines[0], lines
    assert "\x1b" not in result.stderr
