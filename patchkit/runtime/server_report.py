"""`verify --url`: what a running SGLang server says it runs (the runtime report of each DP rank in
its `/server_info`, see patchkit/store/runtime_plugin.py), compared with what should be there.

Only reads: one HTTP GET with a timeout. What should be there is, by default, the patch set and
digests patchkit would apply to the release the server reports (its manifest, today's patch
sources); or the record of a patched folder (`--expect-from DIR`); or an image's `io.patchkit.*`
labels (`--expect-from FILE`: `docker inspect` output, or a JSON object of labels).
"""

from __future__ import annotations

import contextlib
import http.client
import os
import socket
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import SplitResult

from patchkit.base.errors import PatchkitError, TargetError, UsageError
from patchkit.base.redact import redacted
from patchkit.store.runtime_plugin import FIELD

TIMEOUT = 10.0  # seconds for the whole request: a hung server is an error, not a hung audit
ENV_API_KEY = "PATCHKIT_API_KEY"  # the server's --api-key, sent as a bearer token (never on the command line)
MAX_BODY = 64 << 20  # bytes: a /server_info is kilobytes; a server sending gigabytes is refused, not read
MISSING, EXTRA, OUTDATED, DRIFTED, DISABLED, NO_REPORT = "missing", "extra", "outdated", "drifted", "disabled", "no-report"


@dataclass(frozen=True)
class Finding:
    patch: str | None  # None: about the rank as a whole
    problem: str  # missing / extra / outdated / drifted / disabled / no-report
    detail: str

    def to_dict(self) -> dict:
        return {"patch": self.patch, "problem": self.problem, "detail": self.detail}


@dataclass
class Rank:
    dp_rank: int | None
    tp_rank: int | None
    pid: int | None
    sglang: str | None
    findings: list[Finding] = field(default_factory=list)
    active: list[str] = field(default_factory=list)

    @property
    def failed(self) -> list[Finding]:
        return [f for f in self.findings if f.problem != DISABLED]  # an A/B switch is said, not failed

    def to_dict(self) -> dict:
        return {"dp_rank": self.dp_rank, "tp_rank": self.tp_rank, "pid": self.pid, "sglang": self.sglang,
                "ok": not self.failed, "active": self.active, "findings": [f.to_dict() for f in self.findings]}


@dataclass(frozen=True)
class Expected:
    digests: dict[str, str]  # {patch id: sha256 of its source}
    source: str  # where it came from, in words


def server_info_url(url: str) -> str:
    """The URL to GET (credentials and all: echo it only through `redacted`)."""
    if not url.startswith(("http://", "https://")):
        raise UsageError(f"--url {redacted(url)!r}: give an http:// or https:// URL of the server (e.g. http://127.0.0.1:30000)")
    from urllib.parse import urlsplit, urlunsplit

    try:
        parts = urlsplit(url)
    except ValueError as exc:  # an unclosed [IPv6 bracket
        raise UsageError(f"--url {redacted(url)!r}: {exc}") from None
    path = parts.path.rstrip("/")
    if path.endswith("/v1"):  # the OpenAI-compatible base URL users paste: /server_info is beside /v1
        path = path[: -len("/v1")]
    if not path.endswith("/server_info"):
        path += "/server_info"
    return urlunsplit(parts._replace(path=path))  # the query stays a query (?token=...)


def fetch(url: str, timeout: float | None = None) -> dict:
    """GET `/server_info`; an unreachable server, an HTTP error, a redirect (never followed: the
    audit is of the server named), an answer not complete within `timeout` seconds (the whole
    request, not each read: a trickling server is cut off), one over MAX_BODY, or a body that is
    not a JSON object is one TargetError line (exit 3)."""
    import threading
    from urllib.parse import urlsplit

    seconds = TIMEOUT if timeout is None else timeout
    request_url = server_info_url(url)
    shown, where = redacted(url), redacted(request_url)  # what messages say: no credentials
    if any(ch.isspace() or not ch.isprintable() for ch in url):
        raise UsageError(f"--url {shown!r}: a URL holds no spaces or control characters")
    try:
        parts = urlsplit(request_url)
        parts.port  # noqa: B018 - parsed here, so that a bad port is this usage error
    except ValueError as exc:  # an unclosed [IPv6 bracket, a port that is not a number
        raise UsageError(f"--url {shown!r}: {exc}") from None
    if not parts.hostname:
        raise UsageError(f"--url {shown!r}: no host in it (e.g. http://127.0.0.1:30000)")
    if parts.port == 0:  # urlsplit takes 0; no server listens there
        raise UsageError(f"--url {shown!r}: Port out of range 1-65535")
    kind = http.client.HTTPSConnection if parts.scheme == "https" else http.client.HTTPConnection
    try:
        connection = kind(parts.hostname, parts.port, timeout=seconds)
    except ValueError as exc:  # a port that is not a number
        raise UsageError(f"--url {shown!r}: {exc}") from None
    timed_out = threading.Event()
    opened: list[socket.socket] = []  # the connection drops its socket once a response will close

    def cut_off() -> None:  # the deadline of the whole request: shutting the socket ends any read
        timed_out.set()
        for sock in opened:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)

    deadline = threading.Timer(seconds, cut_off)
    deadline.daemon = True
    deadline.start()
    try:
        connection.connect()
        opened.append(connection.sock)
        body = _get(connection, where, parts)
    except (OSError, http.client.HTTPException) as exc:
        if timed_out.is_set():
            raise TargetError(f"{where} did not answer within {seconds:g}s: a hung or overloaded server") from None
        reason = redacted((exc.strerror or str(exc)) if isinstance(exc, OSError) else repr(exc))
        raise TargetError(f"cannot reach {where}: {reason}") from None
    finally:
        deadline.cancel()
        connection.close()
    from patchkit.base.util import BadJson, parse_json

    try:
        return parse_json(body)
    except BadJson as exc:
        said = {BadJson.NESTED_TOO_DEEP: "answered JSON nested too deep", BadJson.NOT_JSON: "did not answer JSON",
                BadJson.NOT_AN_OBJECT: "answered JSON that is not an object"}[exc.kind]
        raise TargetError(f"{where} {said}: not an SGLang server's /server_info") from None


def _get(connection: http.client.HTTPConnection, where: str, parts: SplitResult) -> bytes:
    path = parts.path + (f"?{parts.query}" if parts.query else "")
    headers = {"Accept": "application/json"}
    key = os.environ.get(ENV_API_KEY)
    if key:  # a server started with --api-key guards /server_info with it (sglang/srt/utils/auth.py)
        headers["Authorization"] = f"Bearer {key}"
    connection.request("GET", path, headers=headers)
    response = connection.getresponse()
    if response.status in (401, 403):
        raise TargetError(f"{where} answered HTTP {response.status} {response.reason}: the server was started with "
                          f"--api-key; {'it refused the key in ' + ENV_API_KEY if key else 'give that key in ' + ENV_API_KEY} "
                          "(sent as 'Authorization: Bearer')")
    if 300 <= response.status < 400:
        location = redacted(response.getheader("Location") or "?")
        raise TargetError(f"{where} redirects to {location} (HTTP {response.status}): verify --url reads the server "
                          "itself and never follows a redirect; give the URL it redirects to if that is the server")
    if response.status != 200:
        raise TargetError(f"{where} answered HTTP {response.status} {response.reason}: not an SGLang server's "
                          "/server_info")
    too_big = TargetError(f"{where} answered more than {MAX_BODY >> 20} MiB: not an SGLang server's /server_info")
    if (response.length or 0) > MAX_BODY:
        raise too_big
    chunks, size = [], 0
    while chunk := response.read1(1 << 16):
        size += len(chunk)
        if size > MAX_BODY:
            raise too_big
        chunks.append(chunk)
    if response.length:  # the server closed before the length it announced
        raise http.client.IncompleteRead(b"".join(chunks), response.length)
    return b"".join(chunks)


def rank_reports(info: dict, where: str) -> list[dict]:
    """Each DP rank's entry of `internal_states`; a server whose ranks carry no patchkit report at all
    is a TargetError (exit 3) saying why that can be."""
    states = info.get("internal_states")
    if not isinstance(states, list) or not all(isinstance(s, dict) for s in states) or not states:
        raise TargetError(f"{where} has no internal_states list: not the /server_info of SGLang 0.5.14 or newer")
    if not any(isinstance(s.get(FIELD), dict) for s in states):
        version = info.get("version")
        raise TargetError(
            f"{where} (SGLang {version or '?'}) carries no patchkit runtime report: the server was not patched by "
            "this patchkit, its Python does not see the report's dist-info (an overlay not on PYTHONPATH, "
            "another interpreter), SGLANG_PLUGINS excludes `patchkit`, or the release has no plugin system "
            "(0.5.10); see docs/runtime.md")
    return states


def expected_for_release(version: str) -> Expected:
    from patchkit.engine import identity
    from patchkit.releases import manifest, versions

    # The server's answer, not the user's input: a version string that is none is a bad server (3), not usage (2).
    normal = str(versions.parse(version, "the SGLang version the server reports", TargetError))
    if manifest.find(normal) is None:
        raise TargetError(f"the server runs SGLang {version}, for which patchkit has no patch set; pass "
                          "--expect-from DIR or --expect-from LABELS")
    return Expected(identity.for_release(normal), f"patchkit's patch set for SGLang {normal}")


def expected_from(path: str) -> Expected:
    """A patched folder's record (DIR), or an image's io.patchkit.* labels (a JSON file)."""
    where = Path(path)
    if where.is_dir():
        return _from_folder(where)
    from patchkit.base.util import BadJson, parse_json, read_regular

    try:  # never blocks: a FIFO or device is refused (exit 6), not waited on
        raw = read_regular(where, limit=MAX_BODY)
    except OSError as exc:
        raise UsageError(f"--expect-from {path}: cannot read it ({exc.strerror or exc})") from None
    try:
        data = parse_json(raw, want_object=False)  # `docker inspect` writes a list
    except BadJson as exc:
        if exc.kind == BadJson.NESTED_TOO_DEEP:
            raise UsageError(f"--expect-from {path}: JSON nested too deep (not image labels)") from None
        raise UsageError(f"--expect-from {path}: neither a folder nor JSON (image labels, or `docker inspect` output)") from None
    return Expected(_from_labels(data, path), f"the labels in {path}")


def _from_folder(folder: Path) -> Expected:
    from patchkit.store import state as state_mod
    from patchkit.store import target as target_mod

    site = folder if (folder / ".patchkit").exists() else target_mod.find_in(folder).site
    recorded = state_mod.load(site)
    if recorded is None:
        raise TargetError(f"--expect-from {folder}: patchkit has patched nothing there (no .patchkit/state.json)")
    digests: dict[str, str] = {}
    for record in recorded.files.values():
        digests.update(record.digests)
    return Expected({pid: digests.get(pid, "") for pid in recorded.patches}, f"the record in {site}")


def _from_labels(data: object, path: str) -> dict[str, str]:
    from patchkit.base.constants import LABEL_PREFIX

    if isinstance(data, list) and len(data) == 1:  # `docker inspect IMAGE`
        data = data[0]
    if isinstance(data, dict) and isinstance(data.get("Config"), dict):
        data = data["Config"].get("Labels") or {}
    elif isinstance(data, dict) and isinstance(data.get("Labels"), dict):
        data = data["Labels"]
    if not isinstance(data, dict) or f"{LABEL_PREFIX}.patches" not in data:
        raise UsageError(f"--expect-from {path}: no {LABEL_PREFIX}.patches label in it (not a patched image's labels)")
    digests = {}
    for item in filter(None, str(data[f"{LABEL_PREFIX}.patches"]).split(",")):
        pid, _, digest = item.partition("@")
        if not digest.startswith("sha256:"):
            raise UsageError(f"--expect-from {path}: {LABEL_PREFIX}.patches entry {item!r} is not id@sha256:<digest>")
        digests[pid.strip()] = digest.removeprefix("sha256:")
    return digests


def _strings(value: object) -> bool:
    return isinstance(value, list) and all(isinstance(item, str) for item in value)


def malformed(report: dict) -> str | None:
    """Why a rank's report is not of the plugin's shape (patchkit/templates/runtime_plugin.py.txt),
    or None."""
    patches = report.get("patches", [])
    if not isinstance(patches, list) or not all(isinstance(p, dict) for p in patches):
        return "patches is not a list of objects"
    if not _strings(report.get("drifted", [])):
        return "drifted is not a list of file names"
    for patch in patches:
        if not isinstance(patch.get("id"), str):
            return f"a patch id is not a string ({patch.get('id')!r:.40})"
        if not _strings(patch.get("files", [])):
            return f"files of {patch['id']} is not a list of file names"
        if not isinstance(patch.get("sha256"), (str, type(None))) or not isinstance(patch.get("state", ""), str):
            return f"sha256 or state of {patch['id']} is not a string"
    return None


def compare(states: list[dict], expected: Expected) -> list[Rank]:
    """Per DP rank: each expected patch not active there (missing, or drifted when its files are),
    each active one not expected (extra), each at another digest (outdated)."""
    ranks = []
    for index, state in enumerate(states):
        report = state.get(FIELD)
        dp = (report if isinstance(report, dict) else state).get("dp_rank")
        dp = dp if isinstance(dp, int) else index  # no DP: the scheduler's dp_rank is None; its place in the list
        if not isinstance(report, dict):
            ranks.append(Rank(dp, None, None, None, [Finding(None, NO_REPORT, "this rank carries no patchkit report")]))
            continue
        rank = Rank(dp, report.get("tp_rank"), report.get("pid"), report.get("sglang"))
        wrong = malformed(report)
        if wrong:  # a server's answer is input: a report of another shape is said, never a crash
            rank.findings.append(Finding(None, NO_REPORT, f"this rank's patchkit report is malformed: {wrong}"))
            ranks.append(rank)
            continue
        if report.get("error"):
            rank.findings.append(Finding(None, NO_REPORT, str(report["error"])))
        served = {str(p["id"]): p for p in report.get("patches", []) if isinstance(p, dict) and p.get("id")}
        rank.active = sorted(pid for pid, p in served.items() if p.get("state") == "active")
        for pid, digest in sorted(expected.digests.items()):
            patch = served.get(pid)
            if patch is None or patch.get("state") == "inactive":
                rank.findings.append(Finding(pid, MISSING, f"{pid} is not applied in the process serving this rank"))
            elif patch.get("state") == "drifted":
                files = [rel for rel in patch.get("files", []) if rel in report.get("drifted", [])]
                rank.findings.append(Finding(pid, DRIFTED, f"{', '.join(files) or 'a file'} of {pid} holds other bytes "
                                                           "than patchkit wrote"))
            elif digest and patch.get("sha256") != digest:
                rank.findings.append(Finding(pid, OUTDATED, f"{pid} runs at sha256:{str(patch.get('sha256'))[:12]}, "
                                                            f"expected sha256:{digest[:12]}"))
            elif patch.get("state") == "disabled":
                rank.findings.append(Finding(pid, DISABLED, f"{pid} is switched off by SGLANG_PATCHKIT_DISABLE"))
        for pid in rank.active:
            if pid not in expected.digests:
                rank.findings.append(Finding(pid, EXTRA, f"{pid} is active but not expected ({expected.source})"))
        ranks.append(rank)
    return ranks


def audit(url: str, expect_from: str | None, timeout: float | None = None) -> tuple[list[Rank], Expected, str]:
    """(ranks, expected, the URL read, its credentials masked). Errors: UsageError (exit 2), TargetError (exit 3)."""
    where = redacted(server_info_url(url))  # the URL as said in findings and output
    expected = expected_from(expect_from) if expect_from else None  # bad input fails before the request
    states = rank_reports(fetch(url, timeout), where)
    if expected is None:
        versions = {str(s[FIELD]["sglang"]) for s in states if isinstance(s.get(FIELD), dict) and s[FIELD].get("sglang")}
        if len(versions) != 1:
            raise PatchkitError(f"{where}: the ranks report SGLang {', '.join(sorted(versions)) or '?'}; pass --expect-from")
        expected = expected_for_release(versions.pop())
    return compare(states, expected), expected, where
