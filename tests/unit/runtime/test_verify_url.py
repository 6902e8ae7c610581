"""`patchkit verify --url`: a recorded /server_info served on 127.0.0.1 passes, and each missing,
extra, outdated or drifted patch fails naming it and its DP rank; a server without the report, an
unreachable one and bad input are clear errors.

tests/fixtures/server_info_0.5.23.json holds the `internal_state` the real 0.5.23
`Scheduler.get_internal_state` returned with the runtime report loaded (recorded from
tests/behaviour/probe_runtime_report.py on a patched 0.5.23) as DP rank 1, and a copy of it as
DP rank 0 (its dp_rank and pid changed)."""

from __future__ import annotations

import copy
import json
import socket
from pathlib import Path

import pytest

from patchkit.image import dockerfile
from testing.cli import run
from testing.server_info import answering, serving

RECORDED = json.loads((Path(__file__).parents[2] / "fixtures" / "server_info_0.5.23.json").read_text())


def served_digests(info: dict) -> dict[str, str]:
    return {p["id"]: p["sha256"] for p in info["internal_states"][0]["patchkit"]["patches"]}


def labels_file(tmp_path: Path, digests: dict[str, str]) -> Path:
    """An image's labels as `docker inspect` prints them."""
    path = tmp_path / "inspect.json"
    path.write_text(json.dumps([{"Config": {"Labels": {
        "io.patchkit.sglang": "0.5.23",
        "io.patchkit.patches": ",".join(f"{pid}@sha256:{d}" for pid, d in sorted(digests.items())),
    }}}]))
    return path


def patches_of(info: dict, rank: int) -> list[dict]:
    return info["internal_states"][rank]["patchkit"]["patches"]


def test_recorded_server_passes_against_its_image_labels(tmp_path):
    labels = labels_file(tmp_path, served_digests(RECORDED))
    with serving(RECORDED) as url:
        result = run("verify", "--url", url, "--expect-from", labels, "--json")
    assert result.exit_code == 0, (result.stdout, result.stderr)
    report = result.json()
    assert report["ok"] and report["url"] == f"{url}/server_info"
    assert [(r["dp_rank"], r["ok"], len(r["active"])) for r in report["ranks"]] == [(0, True, 11), (1, True, 11)]
    with serving(RECORDED) as url:
        text = run("verify", "--url", url + "/server_info", "--expect-from", labels)
    assert text.exit_code == 0 and "server verified: 2 rank(s)" in text.stdout, text.stdout


def test_default_expectation_is_the_release_patch_set():
    info = copy.deepcopy(RECORDED)
    current = dockerfile.patch_labels("0.5.23")  # today's patch sources: the recorded digests may be older
    for rank in range(2):
        for patch in patches_of(info, rank):
            patch["sha256"] = current[patch["id"]]
    with serving(info) as url:
        result = run("verify", "--url", url)
    assert result.exit_code == 0, result.stdout
    assert "patchkit's patch set for SGLang 0.5.23" in result.stdout


@pytest.mark.parametrize("problem", ["missing", "outdated", "drifted", "extra"])
def test_each_difference_fails_naming_the_patch_and_rank(tmp_path, problem):
    info = copy.deepcopy(RECORDED)
    expected = served_digests(RECORDED)
    victim = "mamba-slot-graceful"
    if problem == "missing":
        info["internal_states"][1]["patchkit"]["patches"] = [p for p in patches_of(info, 1) if p["id"] != victim]
    elif problem == "outdated":
        next(p for p in patches_of(info, 1) if p["id"] == victim)["sha256"] = "0" * 64
    elif problem == "drifted":
        patch = next(p for p in patches_of(info, 1) if p["id"] == victim)
        patch["state"] = "drifted"
        info["internal_states"][1]["patchkit"]["drifted"] = list(patch["files"])
    else:
        del expected[victim]
    with serving(info) as url:
        result = run("verify", "--url", url, "--expect-from", labels_file(tmp_path, expected), "--json")
    assert result.exit_code == 1, result.stdout
    ranks = {r["dp_rank"]: r for r in result.json()["ranks"]}
    failing = [1] if problem != "extra" else [0, 1]
    assert [dp for dp, r in ranks.items() if not r["ok"]] == failing
    assert ranks[1]["findings"] == [{"patch": victim, "problem": problem, "detail": ranks[1]["findings"][0]["detail"]}]
    with serving(info) as url:
        text = run("verify", "--url", url, "--expect-from", labels_file(tmp_path, expected))
    assert text.exit_code == 1 and f"{problem:<9} {victim}:" in text.stdout, text.stdout
    assert "dp1 tp0 pid" in text.stdout and "server verification FAILED" in text.stdout


@pytest.mark.integration  # real release files
def test_expect_from_a_patched_folder(tmp_path, release):
    site = release("0.5.23")
    assert run("apply", "--site-packages", site).exit_code == 0
    info = copy.deepcopy(RECORDED)
    recorded = json.loads((site / ".patchkit/state.json").read_text())
    digests = {pid: d for record in recorded["files"].values() for pid, d in record["patch_sha256"].items()}
    for rank in range(2):
        for patch in patches_of(info, rank):
            patch["sha256"] = digests[patch["id"]]
    with serving(info) as url:
        result = run("verify", "--url", url, "--expect-from", site)
    assert result.exit_code == 0, result.stdout
    assert f"the record in {site}" in result.stdout


def test_a_server_without_the_report_is_exit_3():
    info = copy.deepcopy(RECORDED)
    for state in info["internal_states"]:
        del state["patchkit"]
    with serving(info) as url:
        result = run("verify", "--url", url)
    assert result.exit_code == 3
    assert "carries no patchkit runtime report" in result.stderr and "SGLANG_PLUGINS" in result.stderr
    assert result.stderr.count("\n") == 1


def test_one_rank_without_the_report_fails_naming_it(tmp_path):
    info = copy.deepcopy(RECORDED)
    del info["internal_states"][0]["patchkit"]
    with serving(info) as url:
        result = run("verify", "--url", url, "--expect-from", labels_file(tmp_path, served_digests(RECORDED)), "--json")
    assert result.exit_code == 1
    assert [(r["dp_rank"], r["ok"]) for r in result.json()["ranks"]] == [(0, False), (1, True)]
    assert result.json()["ranks"][0]["findings"][0]["problem"] == "no-report"


@pytest.mark.parametrize("body,status,words", [
    (b"<html>", 200, "did not answer JSON"),
    ({"internal_states": "x"}, 200, "no internal_states list"),
    ({"error": "boom"}, 500, "answered HTTP 500"),
])
def test_not_an_sglang_server_is_exit_3(body, status, words):
    with serving(body, status) as url:
        result = run("verify", "--url", url, "--json")
    assert result.exit_code == 3 and words in result.json()["error"]["message"], result.stdout


def test_an_unreachable_server_is_exit_3():
    with socket.socket() as sock:  # a port that nothing listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    result = run("verify", "--url", f"http://127.0.0.1:{port}")
    assert result.exit_code == 3 and "cannot reach http://127.0.0.1:" in result.stderr, result.stderr


@pytest.mark.parametrize("args,words", [
    (("--url", "127.0.0.1:30000"), "give an http:// or https:// URL"),
    (("--url", "http://127.0.0.1:1", "--strict"), "--strict cannot go with it"),
    (("--url", "http://127.0.0.1:1", "--site-packages", "/tmp"), "--site-packages cannot go with it"),
    (("--expect-from", "/tmp"), "--expect-from goes with --url"),
    (("--url", "http://127.0.0.1:1", "--expect-from", "/nonexistent/labels.json"), "cannot read it"),
])
def test_bad_input_is_exit_2(args, words):
    result = run("verify", *args)
    assert result.exit_code == 2 and words in result.stderr, result.stderr


@pytest.mark.parametrize("given,asked", [
    ("{base}", "/server_info"),
    ("{base}/server_info", "/server_info"),
    ("{base}/v1", "/server_info"),  # the OpenAI-style base URL users paste: /server_info is at the root
    ("{base}/v1/", "/server_info"),
    ("{base}/?token=x", "/server_info?token=x"),  # the query stays a query
    ("{base}/v1?token=x", "/server_info?token=x"),
    ("{base}/sglang/", "/sglang/server_info"),  # a server behind a path prefix
    ("{base}/sglang/v1", "/sglang/server_info"),
])
def test_the_request_goes_to_server_info_of_the_url_given(given, asked):
    paths: list[str] = []

    def record(handler):
        paths.append(handler.path)
        handler.send_response(404)
        handler.send_header("Content-Length", "0")
        handler.end_headers()

    with answering(record) as (url, _):
        result = run("verify", "--url", given.format(base=url), "--json")
    assert paths == [asked], result.stderr
    assert result.exit_code == 3 and result.json()["error"]["message"].startswith(f"{url}{asked.split('?')[0]}")


def test_an_openai_base_url_verifies_the_server(tmp_path):
    labels = labels_file(tmp_path, served_digests(RECORDED))
    with serving(RECORDED) as url:
        result = run("verify", "--url", url + "/v1", "--expect-from", labels, "--json")
    assert result.exit_code == 0, (result.stdout, result.stderr)
    assert result.json()["url"] == f"{url}/server_info"


def test_a_url_that_does_not_parse_is_exit_2_before_anything_is_asked():
    result = run("verify", "--url", "http://[::1/v1", "--json")
    assert result.exit_code == 2 and "--url 'http://[::1/v1'" in result.stderr, result.stderr


def test_a_server_without_dp_is_rank_dp0(tmp_path):
    # A real server without data parallelism gives its scheduler dp_rank None (tests/server): the
    # rank is named by its place in internal_states (was "dpNone").
    info = copy.deepcopy(RECORDED)
    info["internal_states"] = info["internal_states"][1:]
    info["internal_states"][0]["patchkit"].update(dp_rank=None, tp_rank=0)
    with serving(info) as url:
        text = run("verify", "--url", url, "--expect-from", labels_file(tmp_path, served_digests(info)))
    assert "  dp0 tp0 pid " in text.stdout and "dpNone" not in text.stdout, text.stdout
