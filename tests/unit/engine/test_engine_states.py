"""The engine's decision table on a synthetic tree: for every state a tree can be in, what
`status` reports and what apply / apply --force / apply --only / revert / revert --only do
(exit code, the package files written, the state file after). One row per case.

The patch set (testing/synthetic.py): syn-fix (two files, pending on a fresh tree), syn-upstream
(upstream-fixed), syn-absent (not-applicable), syn-stack-b then syn-stack-a (one file, declared
order). The built-in patches are all not-applicable on the synthetic tree and never written.
"""

from __future__ import annotations

import contextlib
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import pytest

from patchkit.store import lock as lock_mod
from patchkit.engine import planning
from patchkit.store import transaction
from patchkit.store import state as state_mod
from patchkit.base.errors import PatchkitError
from patchkit.store.target import find_in
from testing import synthetic as syn
from testing.releases import snapshot
from testing.synthetic import ALPHA, ALPHA_EXT, BETA, FIX, GAMMA, STACK_A, STACK_B, UPSTREAM, ABSENT, Synthetic

ALL = (FIX, STACK_A, STACK_B)  # what a full apply records
FRESH = {FIX: "pending", STACK_A: "pending", STACK_B: "pending", UPSTREAM: "upstream-fixed", ABSENT: "not-applicable"}
APPLIED = {**FRESH, FIX: "applied", STACK_A: "applied", STACK_B: "applied"}


@pytest.fixture(scope="module")
def patch_sets(tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("patch-sets")
    return {"v1": syn.write_patches(root / "v1"), "v2": syn.write_patches(root / "v2", fix_version="v2")}


@pytest.fixture
def tree(scratch, patch_sets) -> Synthetic:
    return Synthetic(syn.make_tree(scratch / "site"), patch_sets["v1"])


# --- the states, each made the way it happens ------------------------------------------------------


def ok(result) -> None:
    assert result.exit_code == 0, (result.stdout, result.stderr)


def applied(t: Synthetic) -> None:
    ok(t.run("apply"))


def partial_file(t: Synthetic) -> None:
    """syn-fix applied, then one of its two files reinstalled (pristine again)."""
    applied(t)
    (t.site / ALPHA_EXT).write_text(syn.SOURCES[ALPHA_EXT])


def partial_stack(t: Synthetic) -> None:
    """Only the first of the two patches stacked on gamma.py applied."""
    ok(t.run("apply", "--only", STACK_B))


def outdated(t: Synthetic) -> None:
    """Applied with the patch set's v1; now v2 is loaded (syn-fix's source changed)."""
    applied(t)
    t.patches = t.patches.parent / "v2"


def drifted(t: Synthetic) -> None:
    applied(t)
    with open(t.site / ALPHA, "a") as handle:
        handle.write("# a local edit\n")


def deleted(t: Synthetic) -> None:
    applied(t)
    (t.site / ALPHA).unlink()


def failed(t: Synthetic) -> None:
    """alpha.py still has class Alpha but not the method syn-fix anchors on."""
    (t.site / ALPHA).write_text(syn.ALPHA_WITHOUT_ANCHOR)


def stale(t: Synthetic) -> None:
    """Applied on 0.9.0, then `pip install --upgrade` to 0.9.1 (its own pristine files)."""
    applied(t)
    syn.reinstall(t.site, "0.9.1")


def stale_in_place(t: Synthetic) -> None:
    """Applied on 0.9.0, then the metadata says 0.9.1 while the files still hold patchkit's bytes."""
    applied(t)
    meta = next(t.site.glob("sglang-*.dist-info")) / "METADATA"
    meta.write_text(meta.read_text().replace("Version: 0.9.0", "Version: 0.9.1"))


def orphaned(t: Synthetic) -> None:
    applied(t)
    syn.uninstall(t.site)


def pending_journal(t: Synthetic) -> None:
    """A first apply that failed past its commit point, twice: alpha.py is in place, gamma.py and
    alpha_ext.py are not, the journal records the run."""
    from patchkit.engine import registry

    with registry.running(registry.PatchSets((str(t.patches),))):
        target = find_in(t.site)
        real = transaction.replace

        def fails_on_gamma(src, dst):
            if dst == t.site / GAMMA:
                raise OSError(5, "Input/output error", str(dst))
            real(src, dst)

        transaction.replace = fails_on_gamma
        try:
            with lock_mod.locked(t.site):
                plan = planning.plan_apply(target)
                with pytest.raises(PatchkitError, match=r"the next `patchkit apply [^`]+` or `patchkit revert [^`]+` finishes it"):
                    transaction.commit(target, list(plan.writes), plan.old_state, plan.new_state)
        finally:
            transaction.replace = real
    assert state_mod.journal_path(t.site).exists()
    assert t.text(ALPHA) == syn.patched_alpha() and t.text(GAMMA) == syn.SOURCES[GAMMA]


SETUPS: dict[str, Callable[[Synthetic], None]] = {
    "not-applied": lambda t: None,
    "upstream-fixed": lambda t: None,  # syn-upstream is, on a fresh tree
    "not-applicable": lambda t: None,  # syn-absent is, on a fresh tree
    "applied": applied,
    "partial-file": partial_file,
    "partial-stack": partial_stack,
    "outdated": outdated,
    "drifted": drifted,
    "deleted": deleted,
    "failed": failed,
    "stale": stale,
    "stale-in-place": stale_in_place,
    "orphaned": orphaned,
    "pending-journal": pending_journal,
    "in-progress": pending_journal,  # and another run holds the lock (see the test)
}


# --- the table ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Case:
    state: str
    args: tuple[str, ...]
    exit: int
    changed: tuple[str, ...] = ()  # package files whose bytes the command changed
    recorded: tuple[str, ...] | None = None  # the patches the state file records after (None: no state file)
    says: str = ""  # in stdout or stderr
    after: dict[str, str] = field(default_factory=dict)  # states `status` reports after (syn- patches)
    files: dict[str, str] = field(default_factory=dict)  # {rel: exact text} after

    @property
    def id(self) -> str:
        return f"{self.state}: {' '.join(self.args)}"


P_ALPHA, P_EXT = syn.patched_alpha(ALPHA), syn.patched_alpha(ALPHA_EXT)
PRISTINE = {rel: syn.SOURCES[rel] for rel in (ALPHA, ALPHA_EXT, GAMMA)}
PATCHED = {ALPHA: P_ALPHA, ALPHA_EXT: P_EXT, GAMMA: syn.PATCHED_GAMMA_BA}
GAMMA_A = syn._prepend(syn.SOURCES[GAMMA], "run", 'self.a = "second"  # patchkit syn-stack-a')
EVERY = (ALPHA, ALPHA_EXT, GAMMA)
REFUSED = None  # `changed` is checked as "nothing at all changed" (the whole tree, .patchkit/ too)

CASES = [
    # not applied: a fresh release
    Case("not-applied", ("status",), 0, says="was not verified by patchkit", after=FRESH),
    Case("not-applied", ("apply",), 0, EVERY, ALL, "patched 3 file(s)", APPLIED, PATCHED),
    Case("not-applied", ("apply", "--force"), 0, EVERY, ALL, after=APPLIED, files=PATCHED),
    Case("not-applied", ("apply", "--only", STACK_A), 0, (GAMMA,), (STACK_A,), files={GAMMA: GAMMA_A},
         after={**FRESH, STACK_A: "applied"}),
    Case("not-applied", ("apply", "--skip", FIX), 0, (GAMMA,), (STACK_A, STACK_B), files={GAMMA: syn.PATCHED_GAMMA_BA}),
    Case("not-applied", ("apply", "--dry-run"), 0, (), None, "dry run: 3 file(s) would change", FRESH),
    Case("not-applied", ("revert",), 0, (), None, "nothing to revert", FRESH),
    Case("not-applied", ("revert", "--only", FIX), 0, (), None, "nothing to revert: patchkit has changed nothing here", FRESH),
    Case("not-applied", ("apply", "--only", "no-such-patch"), 2, REFUSED, None, "unknown patch id"),
    # upstream-fixed (syn-upstream: the release holds upstream's own fix) and not-applicable
    # (syn-absent: no target file) are never written, whatever the command
    Case("upstream-fixed", ("status",), 0, says="upstream-fixed  syn-upstream", after=FRESH),
    Case("upstream-fixed", ("apply", "--only", UPSTREAM), 0, (), None, "nothing to do", FRESH),
    Case("upstream-fixed", ("apply", "--only", UPSTREAM, "--force"), 0, (), None, "nothing to do", FRESH),
    Case("upstream-fixed", ("revert", "--only", UPSTREAM), 0, (), None, "nothing to revert", FRESH),
    Case("not-applicable", ("status",), 0, says="no target file: sglang/delta.py", after=FRESH),
    Case("not-applicable", ("apply", "--only", ABSENT), 0, (), None, "nothing to do", FRESH),
    Case("not-applicable", ("apply", "--only", ABSENT, "--force"), 0, (), None, "nothing to do", FRESH),
    Case("not-applicable", ("revert", "--only", ABSENT), 0, (), None, "nothing to revert", FRESH),
    # applied
    Case("applied", ("status",), 0, after=APPLIED, recorded=ALL),
    Case("applied", ("apply",), 0, (), ALL, "nothing to do", APPLIED),
    Case("applied", ("apply", "--force"), 0, (), ALL, "nothing to do", APPLIED),
    Case("applied", ("apply", "--only", FIX), 0, (), ALL, "nothing to do", APPLIED),
    Case("applied", ("revert",), 0, EVERY, None, "restored 3 file(s)", FRESH, PRISTINE),
    Case("applied", ("revert", "--force"), 0, EVERY, None, "restored 3 file(s)", FRESH, PRISTINE),
    Case("applied", ("revert", "--only", STACK_B), 0, (GAMMA,), (FIX, STACK_A), "reverted        syn-stack-b",
         {**APPLIED, STACK_B: "pending"}, {GAMMA: GAMMA_A, ALPHA: P_ALPHA}),
    Case("applied", ("revert", "--only", UPSTREAM), 0, (), ALL, "nothing to revert: syn-upstream not applied here", APPLIED),
    # partially applied: one of syn-fix's two files reinstalled
    Case("partial-file", ("status",), 0, recorded=ALL, after={**APPLIED, FIX: "pending"}),
    Case("partial-file", ("apply",), 0, (ALPHA_EXT,), ALL, "patched 1 file(s)", APPLIED, PATCHED),
    Case("partial-file", ("apply", "--force"), 0, (ALPHA_EXT,), ALL, after=APPLIED, files=PATCHED),
    Case("partial-file", ("apply", "--only", STACK_A), 0, (), ALL, "nothing to do", {**APPLIED, FIX: "pending"}),
    Case("partial-file", ("revert",), 0, (ALPHA, GAMMA), None, "restored 2 file(s)", FRESH, PRISTINE),
    Case("partial-file", ("revert", "--only", FIX), 0, (ALPHA,), (STACK_A, STACK_B), after={**APPLIED, FIX: "pending"},
         files={ALPHA: syn.SOURCES[ALPHA], GAMMA: syn.PATCHED_GAMMA_BA}),
    # partially applied: one of the two patches stacked on gamma.py
    Case("partial-stack", ("status",), 0, recorded=(STACK_B,), after={**FRESH, STACK_B: "applied"}),
    Case("partial-stack", ("apply",), 0, EVERY, ALL, after=APPLIED, files=PATCHED),
    Case("partial-stack", ("apply", "--only", STACK_A), 0, (GAMMA,), (STACK_A, STACK_B),
         after={**FRESH, STACK_A: "applied", STACK_B: "applied"}, files={GAMMA: syn.PATCHED_GAMMA_BA}),
    Case("partial-stack", ("revert",), 0, (GAMMA,), None, "restored 1 file(s)", FRESH, PRISTINE),
    Case("partial-stack", ("revert", "--only", STACK_A), 0, (), (STACK_B,), "nothing to revert: syn-stack-a not applied here",
         {**FRESH, STACK_B: "applied"}),
    # outdated: patched by v1 of syn-fix, v2 loaded now
    Case("outdated", ("status",), 0, recorded=ALL, after={**APPLIED, FIX: "outdated"}, says="another version of syn-fix or of patchkit"),
    Case("outdated", ("apply",), 0, (ALPHA, ALPHA_EXT), ALL, after=APPLIED,
         files={ALPHA: syn.patched_alpha(ALPHA, "v2"), ALPHA_EXT: syn.patched_alpha(ALPHA_EXT, "v2")}),
    Case("outdated", ("apply", "--only", FIX), 0, (ALPHA, ALPHA_EXT), ALL, after=APPLIED),
    Case("outdated", ("apply", "--only", STACK_A), 0, (), ALL, "nothing to do", {**APPLIED, FIX: "outdated"}),
    Case("outdated", ("revert",), 0, EVERY, None, after=FRESH, files=PRISTINE),
    Case("outdated", ("revert", "--only", STACK_B), 0, (GAMMA,), (FIX, STACK_A),
         after={**APPLIED, FIX: "outdated", STACK_B: "pending"}, files={GAMMA: GAMMA_A, ALPHA: P_ALPHA}),
    # drifted: alpha.py edited after the apply
    Case("drifted", ("status",), 0, recorded=ALL, after={**APPLIED, FIX: "drifted"}, says=f"{ALPHA} was changed outside"),
    Case("drifted", ("apply",), 4, REFUSED, ALL, "--force"),
    Case("drifted", ("apply", "--force"), 0, (ALPHA,), ALL, "overwritten     sglang/alpha.py", APPLIED, PATCHED),
    Case("drifted", ("apply", "--only", FIX), 4, REFUSED, ALL, "applying would lose that change"),
    Case("drifted", ("apply", "--only", STACK_A), 0, (), ALL, "nothing to do", {**APPLIED, FIX: "drifted"}),
    Case("drifted", ("apply", "--skip", FIX), 0, (), ALL, "nothing to do", {**APPLIED, FIX: "drifted"}),
    Case("drifted", ("revert",), 4, REFUSED, ALL, "reverting would lose that change"),
    Case("drifted", ("revert", "--force"), 0, EVERY, None, "overwritten     sglang/alpha.py", FRESH, PRISTINE),
    Case("drifted", ("revert", "--only", STACK_B), 0, (GAMMA,), (FIX, STACK_A), after={FIX: "drifted", STACK_B: "pending"},
         files={GAMMA: GAMMA_A, ALPHA: P_ALPHA + "# a local edit\n"}),
    Case("drifted", ("revert", "--only", FIX), 4, REFUSED, ALL, f"{ALPHA} was changed outside patchkit"),
    # deleted: a patched file removed after the apply (drifted too: neither patched nor pristine)
    Case("deleted", ("status",), 0, recorded=ALL, after={**APPLIED, FIX: "drifted"}, says=f"{ALPHA} was changed outside"),
    Case("deleted", ("apply",), 4, REFUSED, ALL, "applying would lose that change"),
    Case("deleted", ("apply", "--force"), 0, (ALPHA,), ALL, "patched 1 file(s)", APPLIED, PATCHED),
    Case("deleted", ("revert",), 4, REFUSED, ALL, "reverting would lose that change"),
    Case("deleted", ("revert", "--force"), 0, EVERY, None, "restored 3 file(s)", FRESH, PRISTINE),
    # failed: syn-fix's anchor is missing from alpha.py
    Case("failed", ("status",), 0, after={**FRESH, FIX: "failed"}, says="anchor not found: Alpha.run()"),
    Case("failed", ("apply",), 1, REFUSED, None, "patch syn-fix cannot be applied to SGLang 0.9.0"),
    Case("failed", ("apply", "--force"), 1, REFUSED, None, "patch syn-fix cannot be applied"),
    Case("failed", ("apply", "--only", STACK_A), 0, (GAMMA,), (STACK_A,), after={**FRESH, FIX: "failed", STACK_A: "applied"}),
    Case("failed", ("apply", "--skip", FIX), 0, (GAMMA,), (STACK_A, STACK_B), after={**FRESH, FIX: "failed", STACK_A: "applied",
                                                                                    STACK_B: "applied"}),
    Case("failed", ("revert",), 0, (), None, "nothing to revert"),
    Case("failed", ("revert", "--only", FIX), 0, (), None, "nothing to revert"),
    # stale: applied on 0.9.0, 0.9.1 installed over it
    Case("stale", ("status",), 0, recorded=ALL, after=FRESH, says="stale state"),
    Case("stale", ("apply",), 0, EVERY, ALL, "discarded the stale record of SGLang 0.9.0", APPLIED, PATCHED),
    Case("stale", ("apply", "--only", STACK_B), 0, (GAMMA,), (STACK_B,), "discarded the stale record",
         {**FRESH, STACK_B: "applied"}),
    Case("stale", ("revert",), 0, (), None, "discarded the stale record", FRESH),
    Case("stale", ("revert", "--only", FIX), 0, (), None, "discarded the stale record", FRESH),
    # stale, but the files still hold what patchkit wrote for the old release
    Case("stale-in-place", ("status",), 0, recorded=ALL, after=APPLIED, says="stale state"),
    Case("stale-in-place", ("apply",), 4, REFUSED, ALL, "still holds what patchkit wrote for SGLang 0.9.0"),
    Case("stale-in-place", ("apply", "--force"), 4, REFUSED, ALL, "--force cannot choose between the two releases"),
    Case("stale-in-place", ("revert",), 4, REFUSED, ALL, "still holds what patchkit wrote"),
    Case("stale-in-place", ("revert", "--force"), 4, REFUSED, ALL, "--force cannot choose between the two releases"),
    Case("stale-in-place", ("clean",), 4, REFUSED, ALL, "still holds what patchkit wrote"),
    # orphaned: SGLang uninstalled, .patchkit/ left behind
    Case("orphaned", ("status",), 3, REFUSED, ALL, "(left by SGLang 0.9.0): `patchkit --patches"),
    Case("orphaned", ("apply",), 3, REFUSED, ALL, "(left by SGLang 0.9.0)"),
    Case("orphaned", ("apply", "--force"), 3, REFUSED, ALL, "(left by SGLang 0.9.0)"),
    Case("orphaned", ("revert",), 0, (), None, "(left by SGLang 0.9.0)"),
    Case("orphaned", ("revert", "--only", FIX), 3, REFUSED, ALL, "(left by SGLang 0.9.0): nothing to revert for syn-fix"),
    Case("orphaned", ("revert", "--only", "no-such-patch"), 2, REFUSED, ALL, "unknown patch id 'no-such-patch'"),
    Case("orphaned", ("clean",), 0, (), None, "removed "),
    # an unfinished run (its journal) and nobody running
    Case("pending-journal", ("status",), 0, after={**FRESH, STACK_A: "pending"}, says="an interrupted patchkit run is pending"),
    Case("pending-journal", ("apply",), 0, (ALPHA_EXT, GAMMA), ALL, "finished an interrupted earlier run first", APPLIED, PATCHED),
    Case("pending-journal", ("apply", "--force"), 0, (ALPHA_EXT, GAMMA), ALL, after=APPLIED, files=PATCHED),
    Case("pending-journal", ("apply", "--only", STACK_B), 0, (ALPHA_EXT, GAMMA), ALL, after=APPLIED, files=PATCHED),
    Case("pending-journal", ("revert",), 0, (ALPHA,), None, "restored 3 file(s)", FRESH, PRISTINE),
    Case("pending-journal", ("revert", "--only", FIX), 0, (ALPHA, GAMMA), (STACK_A, STACK_B),
         after={**APPLIED, FIX: "pending"}, files={**PRISTINE, GAMMA: syn.PATCHED_GAMMA_BA}),
    # the same, while another run holds the lock: that run is in progress
    Case("in-progress", ("status",), 0, says="a patchkit run is in progress (PID "),
    Case("in-progress", ("apply", "--lock-timeout", "0"), 5, REFUSED, None, "gave up after 0s (--lock-timeout 0)"),
    Case("in-progress", ("revert", "--lock-timeout", "0"), 5, REFUSED, None, "holds the lock on"),
]


def package(tree: dict[str, str]) -> dict[str, str]:
    return {rel: v for rel, v in tree.items() if not rel.startswith(".patchkit")}


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_decision_table(tree: Synthetic, case: Case):
    SETUPS[case.state](tree)
    holding = lock_mod.locked(tree.site) if case.state == "in-progress" else contextlib.nullcontext()
    with holding:
        before = snapshot(tree.site)
        result = tree.run(*case.args)
        after = snapshot(tree.site)
    assert result.exit_code == case.exit, (result.stdout, result.stderr)
    assert case.says in result.stdout + result.stderr, (result.stdout, result.stderr)
    if case.changed is REFUSED:
        # One `error:` line, and nothing at all changed (the lock file of the holder aside).
        assert result.stderr.startswith("error: ") and len(result.stderr.strip().splitlines()) == 1, result.stderr
        assert after == before
    else:
        changed = {rel for rel in set(package(before)) | set(package(after)) if before.get(rel) != after.get(rel)}
        assert changed == set(case.changed)
    if case.args[0] == "status":
        assert after == before  # status never writes
    recorded = tree.recorded()
    assert (tuple(sorted(recorded)) if recorded is not None else None) == case.recorded
    for rel, text in case.files.items():
        assert tree.text(rel) == text, rel
    if case.after:
        assert {pid: s for pid, s in tree.states().items() if pid in case.after} == case.after
    if case.state not in ("in-progress", "drifted") and case.exit == 0 and case.args[0] == "revert" and case.recorded is None:
        # A full revert leaves the folder as the release installed it.
        assert not (tree.site / ".patchkit").exists()


def test_every_state_has_a_row_for_status_apply_and_revert():
    have = {(c.state, c.args[0]) for c in CASES}
    for state in SETUPS:
        for command in ("status", "apply", "revert"):
            assert (state, command) in have, (state, command)


def test_declared_stacking_order_decides_the_bytes_not_the_alphabet(tree: Synthetic):
    """syn-stack-a sorts first but declares STACK_AFTER syn-stack-b: its line lands above b's
    (each prepends), whichever order they are applied in."""
    ok(tree.run("apply", "--only", STACK_A))
    ok(tree.run("apply", "--only", STACK_B))
    assert tree.text(GAMMA) == syn.PATCHED_GAMMA_BA
    assert json.loads((tree.site / ".patchkit/state.json").read_text())["files"][GAMMA]["patches"] == [STACK_B, STACK_A]


def test_upstream_fixed_file_is_never_written_or_recorded(tree: Synthetic):
    ok(tree.run("apply"))
    state = json.loads((tree.site / ".patchkit/state.json").read_text())
    assert BETA not in state["files"] and UPSTREAM not in state["patches"]
    assert tree.text(BETA) == syn.SOURCES[BETA]


def test_discard_stale_returns_what_it_dropped_and_says_nothing(tree, capsys):
    """The library drops a stale record and returns it as data; only the command prints (22.4)."""
    from patchkit.store import stale as stale_mod

    stale(tree)
    target = find_in(tree.site)
    recorded = state_mod.load(tree.site)
    assert recorded is not None
    capsys.readouterr()
    found = stale_mod.discard_stale(target)
    assert found is not None and found.sglang_version == "0.9.0"
    assert found.files == tuple(sorted(recorded.files)) and found.files
    assert found.state_dir == tree.site / ".patchkit" and not (tree.site / ".patchkit" / "state.json").exists()
    assert capsys.readouterr() == ("", "")
    assert stale_mod.discard_stale(target) is None  # nothing left to drop
