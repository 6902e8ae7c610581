"""`verify --url`: what a running SGLang server says it runs (the runtime report of each DP rank in
its `/server_info`, see patchkit/runtime.py), compared with what should be there.

Only reads: one HTTP GET with a timeout. What should be there is, by default, the patch set and
digests patchkit would apply to the release the server reports (its manifest, today's patch
sources); or the record of a patched folder (`--expect-from DIR`); or an image's `io.patchkit.*`
labels (`--expect-from FILE`: `docker inspect` output, or a JSON object of labels).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from patchkit.errors import PatchkitError, TargetError, UsageError
from patchkit.runtime import FIELD

TIMEOUT = 10.0  # seconds for the whole request: a hung server is an error, not a hung audit
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
    if not url.startswith(("http://", "https://")):
        raise UsageError(f"--url {url!r}: give an http:// or https:// URL of the server (e.g. http://127.0.0.1:30000)")
    base = url.rstrip("/")
    return base if base.endswith("/server_info") else base + "/server_info"


def fetch(url: str, timeout: float = TIMEOUT) -> dict:
    """GET `/server_info`; an unreachable server, an HTTP error or a body that is not a JSON
    object is one TargetError line (exit 3)."""
    import urllib.error
    import urllib.request

    where = server_info_url(url)
    request = urllib.request.Request(where, method="GET", headers={"Accept": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:  # noqa: S310 - http(s) only, checked above
            body = response.read()
    except urllib.error.HTTPError as exc:
        raise TargetError(f"{where} answered HTTP {exc.code} {exc.reason}: not an SGLang server's /server_info") from None
    except (urllib.error.URLError, OSError) as exc:
        reason = getattr(exc, "reason", exc)
        raise TargetError(f"cannot reach {where}: {reason}") from None
    try:
        data = json.loads(body)
    except ValueError:
        raise TargetError(f"{where} did not answer JSON: not an SGLang server's /server_info") from None
    if not isinstance(data, dict):
        raise TargetError(f"{where} answered JSON that is not an object: not an SGLang server's /server_info")
    return data


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
    from patchkit import dockerfile, manifest, versions

    normal = versions.normalise(version)
    if manifest.find(normal) is None:
        raise TargetError(f"the server runs SGLang {version}, for which patchkit has no patch set; pass "
                          "--expect-from DIR or --expect-from LABELS")
    return Expected(dockerfile.patch_labels(normal), f"patchkit's patch set for SGLang {normal}")


def expected_from(path: str) -> Expected:
    """A patched folder's record (DIR), or an image's io.patchkit.* labels (a JSON file)."""
    where = Path(path)
    if where.is_dir():
        return _from_folder(where)
    try:
        raw = where.read_text(encoding="utf-8")
    except OSError as exc:
        raise UsageError(f"--expect-from {path}: cannot read it ({exc.strerror or exc})") from None
    try:
        data = json.loads(raw)
    except ValueError:
        raise UsageError(f"--expect-from {path}: neither a folder nor JSON (image labels, or `docker inspect` output)") from None
    return Expected(_from_labels(data, path), f"the labels in {path}")


def _from_folder(folder: Path) -> Expected:
    from patchkit import state as state_mod
    from patchkit import target as target_mod

    site = folder if (folder / ".patchkit").exists() else target_mod.find_in(folder).site
    recorded = state_mod.load(site)
    if recorded is None:
        raise TargetError(f"--expect-from {folder}: patchkit has patched nothing there (no .patchkit/state.json)")
    digests: dict[str, str] = {}
    for record in recorded.files.values():
        digests.update(record.digests)
    return Expected({pid: digests.get(pid, "") for pid in recorded.patches}, f"the record in {site}")


def _from_labels(data: object, path: str) -> dict[str, str]:
    from patchkit.dockerfile import LABEL_PREFIX

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


def compare(states: list[dict], expected: Expected) -> list[Rank]:
    """Per DP rank: each expected patch not active there (missing, or drifted when its files are),
    each active one not expected (extra), each at another digest (outdated)."""
    ranks = []
    for index, state in enumerate(states):
        report = state.get(FIELD)
        dp = state.get("dp_rank", index) if not isinstance(report, dict) else report.get("dp_rank", index)
        if not isinstance(report, dict):
            ranks.append(Rank(dp, None, None, None, [Finding(None, NO_REPORT, "this rank carries no patchkit report")]))
            continue
        rank = Rank(dp, report.get("tp_rank"), report.get("pid"), report.get("sglang"))
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


def audit(url: str, expect_from: str | None, timeout: float = TIMEOUT) -> tuple[list[Rank], Expected, str]:
    """(ranks, expected, the URL read). Errors: UsageError (exit 2), TargetError (exit 3)."""
    where = server_info_url(url)
    expected = expected_from(expect_from) if expect_from else None  # bad input fails before the request
    states = rank_reports(fetch(url, timeout), where)
    if expected is None:
        versions = {str(s[FIELD]["sglang"]) for s in states if isinstance(s.get(FIELD), dict) and s[FIELD].get("sglang")}
        if len(versions) != 1:
            raise PatchkitError(f"{where}: the ranks report SGLang {', '.join(sorted(versions)) or '?'}; pass --expect-from")
        expected = expected_for_release(versions.pop())
    return compare(states, expected), expected, where
