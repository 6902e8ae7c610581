"""The fault sweep's sampling and delivery check (testing/sweep.py), without strace."""

from __future__ import annotations

from collections import Counter

from testing.sweep import delivery_problem, sample

CALLS = Counter({"write": 40, "rename": 12, "openat": 30, "clone": 0})


def _plan() -> list[tuple[str, int, str]]:
    trials = []
    for name, count in CALLS.items():
        for n in range(1, count + 1):
            trials += [(name, n, "signal=SIGKILL"), (name, n, "signal=SIGINT")]
            if name in ("write", "rename"):
                trials += [(name, n, "error=EIO"), (name, n, "error=ENOSPC")]
        trials.append((name, count + 1, "signal=SIGKILL"))
    return trials


def _completes(name: str, n: int) -> bool:
    return n > CALLS[name]


def test_sample_keeps_every_pair_and_completion_and_is_fixed_by_its_seed():
    plan = _plan()
    picked = sample(plan, 20, "0.5.19:apply", _completes)
    assert picked == sample(plan, 20, "0.5.19:apply", _completes)
    assert picked != sample(plan, 20, "0.5.14:apply", _completes)
    pairs = {(name, fault) for name, n, fault in plan if not _completes(name, n)}
    assert {(name, fault) for name, n, fault in picked if not _completes(name, n)} == pairs
    assert [t for t in plan if _completes(*t[:2])] == [t for t in picked if _completes(*t[:2])]
    assert len(picked) == 20 and picked == [t for t in plan if t in picked]  # in the plan's order


def test_sample_of_zero_or_more_than_the_plan_is_the_whole_plan():
    plan = _plan()
    assert sample(plan, 0, "s", _completes) == plan
    assert sample(plan, len(plan) + 5, "s", _completes) == plan


def test_delivery_problem_by_fault_kind():
    sigint = "123  --- SIGINT {si_signo=SIGINT, si_code=SI_KERNEL} ---\n"
    eio = '123  write(3, "x", 1) = -1 EIO (Input/output error) (INJECTED)\n'
    assert delivery_problem("write", "signal=SIGKILL", False, -9, "") is None
    assert "SIGKILL not delivered" in delivery_problem("write", "signal=SIGKILL", False, 0, "")
    assert delivery_problem("write", "signal=SIGINT", False, 130, sigint) is None
    assert "SIGINT not delivered" in delivery_problem("write", "signal=SIGINT", False, 130, "")
    assert "exited 0" in delivery_problem("write", "signal=SIGINT", False, 0, sigint)
    assert delivery_problem("write", "error=EIO", False, 6, eio) is None
    assert "ENOSPC not delivered" in delivery_problem("write", "error=ENOSPC", False, 6, eio)
    assert delivery_problem("write", "signal=SIGKILL", True, 0, "") is None
    assert "did not complete" in delivery_problem("write", "signal=SIGKILL", True, -9, "")
