"""The probe runner (testing/behaviour.py): a probe forked from the server sees what a fresh
`PYTHONPATH=site python probe.py args` sees, and its failures and time-outs fail the test."""

from __future__ import annotations

import os
import textwrap

import pytest

from testing.behaviour import run_probe

pytestmark = pytest.mark.behaviour

PROBE = textwrap.dedent("""
    import json, os, sys
    import sglang
    if sys.argv[1] == "fail":
        print("the probe's own message", file=sys.stderr)
        sys.exit(3)
    if sys.argv[1] == "hang":
        import time
        time.sleep(60)
    print("noise before the report")
    print(json.dumps({"argv": sys.argv[1:], "path": sys.path[:2], "sglang": sglang.__file__,
                      "main": __name__, "env": os.environ.get("PROBE_SERVER_TEST"),
                      "pythonpath": os.environ["PYTHONPATH"], "cuda": os.environ["CUDA_VISIBLE_DEVICES"]}))
""")


@pytest.fixture
def probe(tmp_path):
    script = tmp_path / "probes" / "probe_test.py"
    script.parent.mkdir()
    script.write_text(PROBE)
    site = tmp_path / "site"
    (site / "sglang").mkdir(parents=True)
    (site / "sglang" / "__init__.py").write_text("")
    return site, script


def test_a_forked_probe_sees_what_a_fresh_interpreter_sees(probe, monkeypatch):
    site, script = probe
    monkeypatch.setenv("PROBE_SERVER_TEST", "set by the test")
    forked = run_probe(site, script, "report", "x y")
    assert forked == {"argv": ["report", "x y"], "path": [str(script.parent), str(site)],
                      "sglang": str(site / "sglang" / "__init__.py"), "main": "__main__",
                      "env": "set by the test", "pythonpath": str(site), "cuda": ""}
    monkeypatch.setenv("PATCHKIT_PROBE_FRESH", "1")
    assert run_probe(site, script, "report", "x y") == forked
    monkeypatch.setenv("PROBE_SERVER_TEST", "changed")  # each probe gets the environment of its call
    monkeypatch.delenv("PATCHKIT_PROBE_FRESH")
    assert run_probe(site, script, "report", "x y")["env"] == "changed"


def test_a_failing_or_hanging_probe_fails_the_test(probe):
    site, script = probe
    with pytest.raises(AssertionError, match="probe exit status 3: the probe's own message"):
        run_probe(site, script, "fail")
    with pytest.raises(AssertionError, match="probe exit status -14"):  # SIGALRM at the time-out
        run_probe(site, script, "hang", timeout=2)
    assert run_probe(site, script, "report")["argv"] == ["report"]  # the server goes on
