"""What tests/server asserts of a real SGLang server (testing/server.py) and patchkit's runtime
report in it, in the three places the report shows (docs/runtime.md): each plugin-loading
process's log line, `/server_info`'s `patchkit` field, the `sglang:patchkit_patch_active` gauge."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path

from packaging.version import Version

from testing.server import Server

GAUGE = "sglang:patchkit_patch_active"
ACTIVE, DRIFTED, DISABLED = "active", "drifted", "disabled"


@dataclass
class Served:
    """A test module's server, the folder whose SGLang it imports, and the patches recorded there."""

    server: Server
    site: Path
    digests: dict[str, str]

    @property
    def states(self) -> dict[str, str]:
        """What each recorded patch should be in the server: active, unless a module says otherwise."""
        return dict.fromkeys(self.digests, ACTIVE)

    @property
    def drifted(self) -> list[str]:
        """The recorded files that should hold other bytes than patchkit wrote."""
        return []


def recorded(site: Path) -> dict[str, str]:
    """{patch id: sha256 of its source} of every patch the record beside `site`'s sglang holds."""
    state = json.loads((site / ".patchkit" / "state.json").read_text())
    digests = {pid: d for record in state["files"].values() for pid, d in record["patch_sha256"].items()}
    assert set(digests) == set(state["patches"]), state["patches"]
    return digests


def files_of(site: Path, patch: str) -> list[str]:
    state = json.loads((site / ".patchkit" / "state.json").read_text())
    return sorted(rel for rel, record in state["files"].items() if patch in record["patches"])


def roles(server: Server) -> dict[int, str]:
    """{pid: role} of the server's live processes: `launcher`, `scheduler`, `detokenizer` (SGLang
    sets the last two as process titles), else the command line."""
    found = {}
    for pid, command in server.processes().items():
        if pid == server.proc.pid:
            found[pid] = "launcher"
        elif command.startswith("sglang::"):
            found[pid] = command.removeprefix("sglang::").split()[0]
        else:
            found[pid] = command
    return found


def plugin_loaders(version: str) -> set[str]:
    """The roles whose process calls SGLang's load_plugins(): the detokenizer only from 0.5.22."""
    return {"launcher", "scheduler"} | ({"detokenizer"} if Version(version) >= Version("0.5.22") else set())


def parse_line(line: str) -> dict[str, str]:
    """`patchkit: pid=1 rank=- sglang=0.5.23 active=a@x,b@y drifted=- [disabled=c]` -> its fields."""
    assert line.startswith("patchkit: ") and " error=" not in line, line
    return dict(token.split("=", 1) for token in line.removeprefix("patchkit: ").split(" "))


def items(field: str) -> set[str]:
    return set() if field == "-" else set(field.split(","))


def check_lines(served: Served) -> None:
    """One line from each process that loads plugins, none from any other, each saying its states."""
    server, digests, states = served.server, served.digests, served.states
    by_role = roles(server)
    lines = {int(parse_line(line)["pid"]): parse_line(line) for line in server.patchkit_lines()}
    assert len(lines) == len(server.patchkit_lines()), "a process wrote its line twice"
    assert {by_role.get(pid, f"gone {pid}") for pid in lines} == plugin_loaders(server.version), (lines, by_role)
    imported, _ = server.kernel_events()
    assert set(lines) <= imported, "a plugin-loading process did not import the stand-in sgl_kernel"
    for pid, fields in lines.items():
        assert fields["sglang"] == server.version
        assert items(fields["active"]) == {f"{p}@{digests[p][:12]}" for p, s in states.items() if s == ACTIVE}, fields
        assert items(fields["drifted"]) == set(served.drifted), fields
        assert items(fields.get("disabled", "-")) == {p for p, s in states.items() if s == DISABLED}, fields
        assert (fields["rank"] != "-") == (by_role[pid] == "scheduler"), fields


def server_info(server: Server) -> dict:
    answer = server.request("GET", "/server_info")
    assert answer.status == 200, answer.body[:500]
    return answer.json()


def check_server_info(served: Served) -> None:
    """The one DP rank's `patchkit` field: computed in the scheduler, from the files it imported."""
    server, states = served.server, served.states
    info = server_info(server)
    assert info["version"] == server.version
    [rank] = info["internal_states"]
    report = rank["patchkit"]
    [scheduler] = [pid for pid, role in roles(server).items() if role == "scheduler"]
    assert report["pid"] == scheduler and report["sglang"] == server.version
    # The ranks of the scheduler process (run_scheduler_process's arguments; no DP: dp_rank None).
    assert (report["dp_rank"], report["tp_rank"], report["pp_rank"]) == (None, 0, 0), report
    assert report["path"] == str(served.site / "sglang") and report["error"] is None
    assert {p["id"]: (p["state"], p["sha256"]) for p in report["patches"]} == {
        pid: (states[pid], digest) for pid, digest in served.digests.items()}
    assert report["drifted"] == served.drifted
    assert report["disabled"] == [p["id"] for p in report["patches"] if p["state"] == DISABLED]


def gauge(server: Server) -> dict[str, tuple[str, float]]:
    """{patch: (sha256 label, value)} of the gauge on /metrics."""
    answer = server.request("GET", "/metrics")
    assert answer.status == 200
    found = {}
    for line in answer.body.decode().splitlines():
        if line.startswith(GAUGE + "{"):
            labels, value = line[len(GAUGE) + 1:].rsplit("} ", 1)
            fields = dict(part.split("=", 1) for part in labels.split(","))
            found[fields["patch"].strip('"')] = (fields["sha256"].strip('"'), float(value))
    return found


def check_gauge(served: Served) -> None:
    states = served.states
    assert gauge(served.server) == {pid: (digest, 1.0 if states[pid] == ACTIVE else 0.0)
                                    for pid, digest in served.digests.items()}


def generate(server: Server, key: str | None = "server's") -> dict:
    """Eight greedy tokens from /generate."""
    answer = server.request("POST", "/generate", {"text": "The quick brown fox",
                                                  "sampling_params": {"max_new_tokens": 8, "temperature": 0}}, key=key)
    assert answer.status == 200, answer.body[:500]
    return answer.json()


@dataclass(frozen=True)
class MemoryFigures:
    """What a server logs of its own memory as it starts (one scheduler, TP 1): the free memory before the weights
    load ("Load weight begin. avail mem"), the KV pool's dtype and tokens ("KV Cache is allocated"), the scheduler's
    resolved figures ("max_total_num_tokens=..., max_running_requests=..., context_len=..."), the resolved
    `mem_fraction_static` and `page_size` of its `server_args=` line, and whether the release said the
    `--max-total-tokens` cap was above its profiled pool ("is larger than the profiled value")."""

    avail_before_weights_gib: float
    kv_dtype: str
    kv_tokens: int
    max_total_num_tokens: int
    max_running_requests: int
    context_len: int
    mem_fraction_static: float
    page_size: int
    cap_above_profile: bool


def memory_figures(server: Server) -> MemoryFigures:
    log = server.log()

    def one(pattern: str) -> re.Match:
        found = re.findall(pattern, log)
        assert len(found) == 1, f"{len(found)} lines match {pattern!r} in the SGLang {server.version} server's log"
        match = re.search(pattern, log)
        assert match is not None
        return match

    before = one(r"Load weight begin\. avail mem=([\d.]+) GB")
    kv = one(r"KV Cache is allocated\. dtype: torch\.(\w+), #tokens: (\d+),")
    resolved = one(r"max_total_num_tokens=(\d+), chunked_prefill_size=-?\d+, max_prefill_tokens=\d+, "
                   r"max_running_requests=(\d+), context_len=(\d+),")
    fraction = one(r"server_args=ServerArgs\(.*?\bmem_fraction_static=([\d.]+)|server_args=\{.*?'mem_fraction_static': ([\d.]+)")
    page = one(r"server_args=ServerArgs\(.*?\bpage_size=(\d+)|server_args=\{.*?'page_size': (\d+)")
    return MemoryFigures(float(before[1]), kv[1], int(kv[2]), int(resolved[1]), int(resolved[2]), int(resolved[3]),
                         float(fraction[1] or fraction[2]), int(page[1] or page[2]),
                         "is larger than the profiled value" in log)
