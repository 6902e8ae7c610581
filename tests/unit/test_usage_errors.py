"""Arguments refused before anything is read or downloaded (exit 2, one line)."""

from __future__ import annotations

from testing.cli import run


def test_a_reversed_matrix_range_is_a_usage_error(patchkit_home):
    result = run("matrix", "--from", "0.5.20", "--to", "0.5.18")
    assert result.exit_code == 2, (result.stdout, result.stderr)
    assert result.stderr.strip().splitlines() == [
        "error: --from 0.5.20 is newer than --to 0.5.18; swap them (the range runs oldest to newest)"]
    assert result.stdout == "" and not (patchkit_home / "wheels").exists()


def test_a_newline_or_escape_in_a_path_is_escaped_in_the_error_line(tmp_path):
    odd = tmp_path / "two\nlines\x1b[2Jcleared"
    result = run("status", "--site-packages", odd)
    assert result.exit_code == 3, result.stderr
    assert "\x1b" not in result.stderr
    shown = str(odd).replace("\n", "\\n").replace("\x1b", "\\x1b")
    assert result.stderr.splitlines() == [f"error: {shown} is not a folder"]
