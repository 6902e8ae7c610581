"""The sweep proves each fault was delivered: with a strace that injects nothing it fails.

strace 6.1 with --seccomp-bpf -f drops every `signal=` injection without a word (issue 18.1);
these tests stand in such a strace by a wrapper first on PATH that drops the `-e inject=`
arguments and runs the real strace."""

from __future__ import annotations

import shutil
import stat

import pytest

from testing.sweep import StraceError, Sweep, install_render_cache, run_sweep, verdict
from tests.faults.test_sweep import SCENARIOS

pytestmark = [pytest.mark.faults, pytest.mark.slow, pytest.mark.integration]

# Drops each `-e inject=...` pair; with ONLY_PATCHKIT=1 only for a patchkit run (one with
# --site-packages), so that the sweep's start-up probe still sees a real kill.
_WRAPPER = """#!/usr/bin/env bash
args=("$@"); out=(); i=0
if [ "$ONLY_PATCHKIT" = 1 ] && [[ " $* " != *" --site-packages "* ]]; then exec "$REAL" "$@"; fi
while [ $i -lt ${#args[@]} ]; do
    if [ "${args[$i]}" = -e ] && [[ "${args[$((i + 1))]}" == inject=* ]]; then i=$((i + 2)); continue; fi
    out+=("${args[$i]}"); i=$((i + 1))
done
exec "$REAL" "${out[@]}"
"""


@pytest.fixture
def injects_nothing(tmp_path, monkeypatch):
    real = shutil.which("strace")
    if real is None:
        pytest.skip("strace is not installed (.ci/run installs it with apt-get; it could not be installed here)")
    folder = tmp_path / "bin"
    folder.mkdir()
    wrapper = folder / "strace"
    wrapper.write_text(_WRAPPER.replace('"$REAL"', f'"{real}"'))
    wrapper.chmod(wrapper.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setenv("PATH", f"{folder}:{__import__('os').environ['PATH']}")
    return monkeypatch


def test_a_strace_that_injects_nothing_is_refused_before_any_trial(injects_nothing, tmp_path):
    injects_nothing.setenv("ONLY_PATCHKIT", "0")
    scenario = next(s for s in SCENARIOS if s.name == "revert-only")
    with pytest.raises(StraceError, match="does not deliver an injected signal=SIGKILL"):
        Sweep("0.5.19", scenario, tmp_path / "sweep")


def test_trials_whose_fault_is_not_delivered_fail_the_sweep(injects_nothing, tmp_path, monkeypatch):
    injects_nothing.setenv("ONLY_PATCHKIT", "1")  # the probe passes; every trial runs uninjected
    install_render_cache(monkeypatch)
    scenario = next(s for s in SCENARIOS if s.name == "revert-only")
    sweep = Sweep("0.5.19", scenario, tmp_path / "sweep")
    try:
        counts = run_sweep(sweep, 25, 2, size=1)  # the smallest sample: one trial per (call, fault) pair
    finally:
        sweep.close()
    faulted = counts.trials - counts.completed
    assert faulted > 0 and counts.undelivered == faulted, counts
    assert counts.sigkill_delivered == counts.sigint_delivered == counts.eio_delivered == counts.enospc_delivered == 0
    problems = verdict(counts)
    assert any("SIGKILL not delivered" in p for p in problems)
    assert any("SIGINT not delivered" in p for p in problems)
    assert any("EIO not delivered" in p or "ENOSPC not delivered" in p for p in problems)
    assert "no SIGKILL was delivered in" in "\n".join(problems)
