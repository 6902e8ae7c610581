"""Fault injection at every system call (strace), over apply, revert, revert --only, apply --force,
the first apply of a fresh tree and clean of a stale record, on real releases 0.5.14 and 0.5.19
(trees holding only the files patchkit touches). See testing/sweep.py for what each trial checks."""

from __future__ import annotations

import json

import pytest

from testing.fault_settings import FULL, OPENAT_STRIDE, WANTED as _WANTED, WORKERS, report, sample_size
from testing.sweep import Scenario, Sweep, do_apply, install_render_cache, run_sweep, verdict

pytestmark = [pytest.mark.faults, pytest.mark.slow, pytest.mark.integration, pytest.mark.usefixtures("strace")]

# Trials per run: a fixed-seed sample of the plan (testing.sweep.sample: every completion trial and
# every (system call, fault) pair at least once); 0 or "all": the whole plan.
SAMPLE = sample_size("PATCHKIT_FAULT_SAMPLE", "40")
DRAFT = "sglang/srt/models/qwen3_5_mtp.py"  # draft-lmhead-placeholder's file on both releases


def fresh(site):
    pass


def applied(site):
    assert do_apply(site)[0] == 0


def partly_applied(site):
    assert do_apply(site, only=("draft-lmhead-placeholder",))[0] == 0


def applied_then_edited(site):
    applied(site)
    with open(site / DRAFT, "ab") as handle:
        handle.write(b"# a local edit\n")


def stale_record(site):
    """A `.patchkit/` left by SGLang 0.5.13 under this release's own files (pip installed this
    release over a patched 0.5.13): applied, files back to the release's bytes, record relabelled."""
    pristine = {rel: (site / rel).read_bytes() for rel in _targets(site)}
    applied(site)
    for rel, data in pristine.items():
        (site / rel).unlink()
        (site / rel).write_bytes(data)
    state = site / ".patchkit" / "state.json"
    record = json.loads(state.read_text())
    record["sglang_version"] = "0.5.13"
    state.write_text(json.dumps(record, indent=2) + "\n")


def _targets(site) -> list[str]:
    return [p.relative_to(site).as_posix() for p in (site / "sglang").rglob("*.py")]


SCENARIOS = [
    Scenario("first-apply", ("apply",), fresh),
    Scenario("apply", ("apply",), partly_applied),
    Scenario("revert", ("revert",), applied),
    Scenario("revert-only", ("revert", "--only", "mamba-slot-graceful"), applied),
    Scenario("apply-force", ("apply", "--force"), applied_then_edited, force=True),
    Scenario("clean-stale", ("clean",), stale_record),
]


# A diff patch loaded with --patches: upstream's own 0.5.20 -> 0.5.21 change of offloader.py (made
# here by git from the two real releases), applied alone on 0.5.20.
OFFLOADER = "sglang/srt/utils/offloader.py"
DIFF_ID = "offloader-tied"
DIFF_RUN = "0.5.20:diff-apply"

# Which runs to sweep (PATCHKIT_FAULT_RUNS; default: every scenario on both releases and the
# diff patch's run, as .ci/run does).
RUNS = [pytest.param(version, scenario, id=f"{version}-{scenario.name}")
        for version in ("0.5.14", "0.5.19") for scenario in SCENARIOS
        if not _WANTED or f"{version}:{scenario.name}" in _WANTED]
_UNKNOWN = _WANTED - {f"{v}:{s.name}" for v in ("0.5.14", "0.5.19") for s in SCENARIOS} - {DIFF_RUN}
assert not _UNKNOWN, f"PATCHKIT_FAULT_RUNS names runs that do not exist: {sorted(_UNKNOWN)}"


def diff_scenario(folder) -> Scenario:
    from testing.diffs import git_diff
    from testing.releases import pristine

    path = folder / f"0001-{DIFF_ID}.patch"
    path.write_bytes(git_diff({OFFLOADER: (pristine("0.5.20") / OFFLOADER).read_bytes()},
                              {OFFLOADER: (pristine("0.5.21") / OFFLOADER).read_bytes()},
                              header="Subject: [PATCH] Offloader: keep tied parameters\n\n---\n"))
    return Scenario("diff-apply", ("apply", "--only", DIFF_ID), fresh, patches=(str(path),), extra=(OFFLOADER,),
                    only=(DIFF_ID,))


@pytest.mark.parametrize(("version", "scenario"), RUNS)
def test_fault_sweep(version, scenario, tmp_path, monkeypatch):
    sweep_run(version, scenario, tmp_path, monkeypatch)


@pytest.mark.skipif(bool(_WANTED) and DIFF_RUN not in _WANTED, reason="PATCHKIT_FAULT_RUNS leaves it out")
def test_fault_sweep_with_a_diff_patch(tmp_path, monkeypatch):
    sweep_run("0.5.20", diff_scenario(tmp_path), tmp_path, monkeypatch)


def sweep_run(version, scenario, tmp_path, monkeypatch):
    install_render_cache(monkeypatch)
    sweep = Sweep(version, scenario, tmp_path / "sweep")
    try:
        counts = run_sweep(sweep, OPENAT_STRIDE, WORKERS, FULL, SAMPLE)
    finally:
        sweep.close()
    report(version, scenario.name, SAMPLE, counts)
    assert counts.trials >= min(SAMPLE or counts.planned, counts.planned)
    problems = verdict(counts)
    assert not problems, "\n".join(problems[:10])
