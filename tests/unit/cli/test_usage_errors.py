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


def test_click_usage_errors_have_patchkit_s_one_line_format():
    """click's own errors (an unknown option or command, a bad value) read as patchkit's: one
    `error:` line naming the --help that lists what there is (which works), no usage block, exit 2."""
    import re

    for argv, says in ((("status", "--bogus"), "No such option '--bogus'; `patchkit status --help` lists its options"),
                       (("bogus",), "No such command 'bogus'; `patchkit --help` lists its commands"),
                       (("apply", "--lock-timeout", "x"), "Invalid value for '--lock-timeout'")):
        result = run(*argv)
        assert result.exit_code == 2, (argv, result.stderr)
        (line,) = result.stderr.splitlines()
        assert line.startswith("error: ") and says in line, line
        assert result.stdout == ""
        (helps,) = re.findall(r"`patchkit ([^`]*--help)`", line)
        assert run(*helps.split()).exit_code == 0


def test_patches_is_taken_after_the_subcommand_too(tmp_path):
    from testing.cli import run as cli

    made = cli("new", "late-fix", "--target", "sglang/srt/x.py", "--class", "X", "--method", "f", "--out",
               tmp_path / "late")
    assert made.exit_code == 0, made.stderr
    before = {p["id"] for p in cli("--patches", tmp_path / "late", "list", "--json").json()["patches"]}
    after = {p["id"] for p in cli("list", "--patches", tmp_path / "late", "--json").json()["patches"]}
    assert "late-fix" in before and before == after


def test_an_option_of_other_commands_is_named_as_theirs_not_mistaken_for_a_near_spelling():
    """Issue 43.6: `status --only ID` said "Did you mean '--json'?": --only is apply's and revert's
    (status always shows every patch), and --json is nothing like it."""
    result = run("status", "--only", "mamba-slot-graceful")
    assert result.exit_code == 2 and result.stdout == ""
    assert result.stderr.splitlines() == [
        "error: No such option '--only' for status (apply and revert take it); `patchkit status --help` lists its "
        "options"]
    typo = run("status", "--jsn")  # no command has it: click's own suggestion stays
    assert "Did you mean '--json'?" in typo.stderr
