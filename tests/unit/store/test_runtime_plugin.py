"""The runtime plugin's own reading and record checks, on the module `apply` writes (rendered from
patchkit/templates/runtime_plugin.py.txt, standard library only), in this process: every read is
bounded in bytes and time, and a record of any other shape is an error to report, never an
exception. What it says inside SGLang's real load_plugins() is tests/behaviour/test_runtime_report*."""

from __future__ import annotations

import copy
import time
import types

import pytest

from patchkit.store import runtime_plugin

SHA, OTHER = "a" * 64, "b" * 64
RECORD = {
    "schema": 3, "patchkit_version": "0.1.0", "sglang_version": "0.5.17", "patches": ["fix-a", "fix-b"],
    "files": {"sglang/srt/x.py": {"pristine_sha256": SHA, "patched_sha256": OTHER, "patches": ["fix-a", "fix-b"],
                                  "patch_sha256": {"fix-a": SHA, "fix-b": OTHER}}},
    "runtime": {"dir": None, "files": {}},
}


@pytest.fixture(scope="module")
def plugin() -> types.ModuleType:
    module = types.ModuleType("sglang_patchkit_runtime")
    exec(runtime_plugin.render([])[runtime_plugin.MODULE_FILE].decode(), module.__dict__)  # noqa: S102 - our own template
    return module


def test_an_endless_file_is_cut_at_the_byte_bound(plugin):
    """/proc/self/pagemap: stat says a regular file of size 0, reading it never ends (2.3 GB in 20 s
    before the bound)."""
    with pytest.raises(OSError, match=f"more than {plugin.LIMIT} bytes"):
        plugin._read("/proc/self/pagemap", time.monotonic() + plugin.BUDGET)


def test_a_read_past_the_deadline_stops(plugin, tmp_path):
    path = tmp_path / "x.py"
    path.write_bytes(b"x = 1\n")
    assert plugin._read(str(path), time.monotonic() + 5) == b"x = 1\n"
    with pytest.raises(TimeoutError, match="still being read after"):
        plugin._read(str(path), time.monotonic() - 1)


def test_a_symlinked_record_is_not_followed(plugin, tmp_path):
    (tmp_path / "state.json").symlink_to("/proc/self/pagemap")
    with pytest.raises(OSError) as refused:
        plugin._read(str(tmp_path / "state.json"), time.monotonic() + 5, follow=False)
    assert refused.value.errno == __import__("errno").ELOOP


def test_the_record_patchkit_writes_passes(plugin):
    version, ids, files = plugin._checked(copy.deepcopy(RECORD), time.monotonic() + 5)
    assert (version, ids) == ("0.1.0", ["fix-a", "fix-b"])
    assert files == {"sglang/srt/x.py": (SHA, OTHER, ["fix-a", "fix-b"], {"fix-a": SHA, "fix-b": OTHER})}


def _entry(record: dict) -> dict:
    return record["files"]["sglang/srt/x.py"]


BAD = {
    "not an object": lambda r: [],
    "version a number": lambda r: r.update(patchkit_version=1),
    "patches a string": lambda r: r.update(patches="fix-a"),
    "a patch id a number": lambda r: r.update(patches=[7]),
    "a patch id with a newline": lambda r: r.update(patches=["fix-a\npatchkit: forged"]),
    "files a list": lambda r: r.update(files=[]),
    "absolute path": lambda r: r["files"].update({"/proc/self/pagemap": _entry(r)}),
    "dotdot path": lambda r: r["files"].update({"../" * 12 + "proc/self/pagemap": _entry(r)}),
    "dotdot inside": lambda r: r["files"].update({"sglang/../../x.py": _entry(r)}),
    "outside sglang": lambda r: r["files"].update({"torch/x.py": _entry(r)}),
    "newline in a path": lambda r: r["files"].update({"sglang/x\n.py": _entry(r)}),
    "entry a list": lambda r: r["files"].update({"sglang/srt/x.py": []}),
    "patched a number": lambda r: _entry(r).update(patched_sha256=5),
    "pristine short": lambda r: _entry(r).update(pristine_sha256="ab"),
    "file patches a string": lambda r: _entry(r).update(patches="fix-a"),
    "digest an int": lambda r: _entry(r)["patch_sha256"].update({"fix-a": 7}),
    "digest true": lambda r: _entry(r)["patch_sha256"].update({"fix-a": True}),
    "digest with a newline": lambda r: _entry(r)["patch_sha256"].update({"fix-a": "\n" + "a" * 63}),
    "digests a list": lambda r: _entry(r).update(patch_sha256=[SHA]),
}


@pytest.mark.parametrize("bad", sorted(BAD))
def test_every_field_of_another_type_is_refused_naming_it(plugin, bad):
    record = copy.deepcopy(RECORD)
    changed = BAD[bad](record)
    with pytest.raises(plugin._Invalid) as refused:
        plugin._checked(record if changed is None else changed, time.monotonic() + 5)
    assert "\n" not in str(refused.value)


@pytest.fixture
def served(tmp_path, monkeypatch):
    """write(record) -> a synthetic SGLang tree on sys.path (what the plugin imports as `sglang`)
    holding that record; the modules imported from it are forgotten after the test."""
    import json
    import sys

    from testing.synthetic import make_tree

    site = make_tree(tmp_path / "site")
    (site / ".patchkit").mkdir()
    monkeypatch.syspath_prepend(str(site))
    before = {name for name in sys.modules if name == "sglang" or name.startswith("sglang.")}
    assert not before

    def write(record: dict) -> None:
        (site / ".patchkit" / "state.json").write_text(json.dumps(record))

    yield write
    for name in [n for n in sys.modules if n == "sglang" or n.startswith("sglang.")]:
        del sys.modules[name]


def lines_run(function) -> int:
    """The lines of Python `function()` runs (sys.settrace's 'line' events: a loop's body counts once
    per turn, a comprehension's too): its work, told without a clock."""
    import sys

    count = 0

    def trace(frame, event, arg):
        nonlocal count
        if event == "line":
            count += 1
        return trace

    sys.settrace(trace)
    try:
        function()
    finally:
        sys.settrace(None)
    return count


def test_the_reports_work_is_linear_in_the_record(plugin, served):
    """A record of 5,000 ids x 5,000 files held a 0.5.23 server's start for 168 s (82 s without it):
    each id scanned every file (`sorted(files.items())` once per id). The lines the report runs per
    recorded file stay flat from N to 2N to 4N (ids and files both N); the times are
    bench/runtime_plugin.py's (register() at 5,000: 4.46 s CPU before, 0.17 s after)."""
    from testing.synthetic import large_record

    served(large_record(1, 1))
    plugin.report()  # the import of sglang out of the count
    counts = {}
    for n in (100, 200, 400):
        served(large_record(n, n))
        report = {}
        counts[n] = lines_run(lambda: report.update(plugin.report()))
        assert len(report["patches"]) == n and report["error"] is None, report["error"]
        assert {p["state"] for p in report["patches"]} == {"drifted"}  # (no file of the record on disk)
    first, second = (counts[200] - counts[100]) / 100, (counts[400] - counts[200]) / 200
    assert second <= first * 1.1, counts


class Clock:
    """time.monotonic for the plugin, one second later at each call: where its budget runs out is
    then the same on every machine."""

    def __init__(self) -> None:
        self.now = 0.0

    def monotonic(self) -> float:
        self.now += 1.0
        return self.now


@pytest.mark.parametrize("budget, where", [(20.0, "checking the record: "), (130.0, " recorded files judged")])
def test_a_report_out_of_budget_says_it_stopped_and_claims_nothing_it_did_not_judge(plugin, served, monkeypatch,
                                                                                   budget, where):
    """The budget bounded the reads only; checking and judging a record of any size ran on. Now the
    report stops where BUDGET runs out, says so in `error` (the line, /server_info, verify --url's
    no-report finding), and lists only the patches whose files it judged."""
    from testing.synthetic import large_record

    served(large_record(100, 100))
    monkeypatch.setattr(plugin, "time", Clock())
    monkeypatch.setattr(plugin, "BUDGET", budget)
    report = plugin.report()
    assert report["error"].startswith(f"the report stopped at its {budget:g} s budget ("), report["error"]
    assert where in report["error"] and "the patches not listed were not judged" in report["error"]
    if where == "checking the record: ":
        assert report["patches"] == [] and report["drifted"] == []
    else:
        judged = int(report["error"].split("(")[1].split(" of ")[0])
        assert 0 < judged < 100 and len(report["patches"]) == judged == len(report["drifted"])
    assert "patchkit: pid=" in plugin.line(report, {}) and "error=" in plugin.line(report, {})
