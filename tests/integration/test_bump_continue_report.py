"""What `bump` hands over after `--continue` is accounted for (issue 40 item 9): the table's counts
say what the round did (a resolved conflict is no longer "1 conflict"), and the folder holds no
byte-code caches of the modules the bump and the commands loading it imported."""

from __future__ import annotations

import pytest

from testing.cli import run
from tests.integration.test_bump import home  # noqa: F401  (a fixture)
from tests.integration.test_bump_unfinished import conflicting_set

pytestmark = pytest.mark.integration


def test_counts_are_refreshed_by_continue_and_no_pycache_is_left(home, tmp_path, monkeypatch):  # noqa: F811
    import sys

    from testing.field_diffs import take_the_patch_side

    monkeypatch.setattr(sys, "dont_write_bytecode", False)  # as a user's Python writes byte-code (not the tests')

    conflicting_set(tmp_path / "mine")
    out = tmp_path / "bump"
    made = run("--patches", tmp_path / "mine", "bump", "--from", "0.5.17", "--to", "0.5.23", "-o", out, "--json")
    assert made.exit_code == 1, made.stderr
    rows = {row["id"]: row for row in made.json()["patches"]}
    assert rows["heads-fix"]["counts"].get("conflict") == 1, rows["heads-fix"]
    assert "| `heads-fix` | applies | broken | conflicts (1 conflict" in (out / "REPORT.md").read_text()

    for path in out.glob("heads-fix.tree/sglang/**/*.py"):
        path.write_bytes(take_the_patch_side(path.read_bytes()))
    done = run("bump", "--continue", out, "--json")
    assert done.exit_code == 0, done.stderr
    row = next(row for row in done.json()["patches"] if row["id"] == "heads-fix")
    assert row["action"] == "rebased" and "conflict" not in row["counts"] and row["counts"]["resolved"] == 1, row
    report = (out / "REPORT.md").read_text()
    assert "| `heads-fix` | applies | broken | rebased (1 resolved" in report, report
    assert "conflict)" not in report
    # The commands the next steps name load DIR's modules: no __pycache__ is left in DIR or its trees.
    assert run("--patches", out, "list").exit_code == 0
    assert not [p for p in out.rglob("__pycache__")], sorted(str(p) for p in out.rglob("*"))
