"""The fault sweep over `bump`'s folder (issue 41 item 4): a new bump written over an earlier
bump's DIR (its conflict tree removed, a new diff moved in, a user's file kept) and `bump
--continue` finishing a resolved tree, each from 0.5.17 to the real 0.5.23 wheel, SIGKILL, SIGINT,
EIO and ENOSPC injected by strace at a fixed-seed sample of the calls (every call that changes
DIR among them), each fault proved delivered. testing/bump_sweep.py says what each trial checks."""

from __future__ import annotations


import pytest

from testing.bump_sweep import BumpScenario, BumpSweep, run_bump_sweep
from testing.fault_settings import FULL, OPENAT_STRIDE, WANTED as _WANTED, WORKERS, report, sample_size
from testing.sweep import verdict

pytestmark = [pytest.mark.faults, pytest.mark.slow, pytest.mark.integration, pytest.mark.usefixtures("strace")]

# Trials per run beyond the ones every sample holds (each call that changes DIR, each completion);
# a bump plans for seconds before it writes, so its runs are sampled more thinly than apply's.
SAMPLE = sample_size("PATCHKIT_FAULT_BUMP_SAMPLE", "40")

OFFLOADER = "sglang/srt/utils/offloader.py"
V0, V = "0.5.17", "0.5.23"


def _sets(folder):
    """SET1: a one-line change to 0.5.17's create_offloader_from_server_args (0.5.23 renamed it: a
    conflict, written as a tree); SET2: a diff creating a file (it carries over)."""
    from testing.diffs import git_diff
    from testing.releases import pristine

    before = (pristine(V0) / OFFLOADER).read_bytes()
    after = before.replace(b"int(server_args.cpu_offload_gb * 1024**3)", b"int(server_args.cpu_offload_gb * (1 << 30))")
    assert after != before
    (folder / "set1").mkdir()
    (folder / "set1" / "offload-bytes.patch").write_bytes(
        git_diff({OFFLOADER: before}, {OFFLOADER: after}, header="Subject: [PATCH] offload bytes\n\n---\n"))
    (folder / "set2").mkdir()
    (folder / "set2" / "sweep-note.patch").write_bytes(
        git_diff({}, {"sglang/srt/sweep_note.py": b"NOTE = 'kept by the fault sweep'\n"},
                 header="Subject: [PATCH] sweep note\n\n---\n"))
    return folder / "set1", folder / "set2"


def _resolve(out):
    """The user's resolution of the tree: the block taken out, the change made where 0.5.23 has the code."""
    from testing.field_diffs import take_the_patch_side

    path = out / "offload-bytes.tree" / OFFLOADER
    text = take_the_patch_side(path.read_bytes())
    assert text.count(b"offload_gb * 1024**3)") == 1
    path.write_bytes(text.replace(b"offload_gb * 1024**3)", b"offload_gb * (1 << 30))"))


def scenarios(folder):
    set1, set2 = _sets(folder)
    first = ("--patches", str(set1), "bump", "--from", V0, "--to", V, "-o", "out")

    def earlier(run, trial):
        made = run(*first)
        assert made.returncode == 1 and (trial / "out" / "offload-bytes.tree").is_dir(), made.stderr
        (trial / "out" / "MYNOTES.txt").write_text("the user's own file in DIR\n")

    def resolved(run, trial):
        earlier(run, trial)
        _resolve(trial / "out")

    return [BumpScenario("bump-rewrite", ("--patches", str(set2), "bump", "--from", V0, "--to", V, "-o", "out"),
                         earlier),
            BumpScenario("bump-continue", ("bump", "--continue", "out"), resolved)]


@pytest.mark.parametrize("name", ["bump-rewrite", "bump-continue"])
def test_bump_fault_sweep(name, tmp_path):
    if _WANTED and f"{V}:{name}" not in _WANTED:
        pytest.skip("PATCHKIT_FAULT_RUNS leaves it out")
    from testing.checkout import wheel_home

    home = wheel_home(tmp_path / "home", (V0, V))
    scenario = next(s for s in scenarios(tmp_path) if s.name == name)
    sweep = BumpSweep(scenario, home, tmp_path / "sweep")
    try:
        counts = run_bump_sweep(sweep, OPENAT_STRIDE, WORKERS, FULL, SAMPLE)
        in_dir = len(sweep.in_dir)
    finally:
        sweep.close()
    report(V, name, SAMPLE, counts, calls_in_dir=in_dir)
    assert in_dir > 10, "the trace shows no write of DIR: the sweep would fault nothing of it"
    problems = verdict(counts)
    assert not problems, "\n".join(problems[:10])
