"""Arguments refused before anything is read or downloaded (exit 2, one line)."""

from __future__ import annotations

from testing.cli import run


def test_a_reversed_matrix_range_is_a_usage_error(patchkit_home):
    result = run("matrix", "--from", "0.5.20", "--to", "0.5.18")
    assert result.exit_code == 2, (result.stdout, result.stderr)
    assert result.stderr.strip().splitlines() == [
        "error: --from 0.5.20 is newer than --to 0.5.18; swap them (the range runs oldest to newest)"]
    assert result.stdout == "" and not (patchkit_home / "wheels").exists()
