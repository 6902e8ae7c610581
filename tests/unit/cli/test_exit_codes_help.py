"""`patchkit --help` lists every exit code; each command's --help only the codes it can return,
one line each, from the one table in patchkit/cli/exit_codes.py."""

from __future__ import annotations

import re

import click
import pytest

from patchkit.cli import exit_codes
from patchkit.cli.app import main
from testing.cli import run


def _commands(group: click.Group, prefix: tuple[str, ...] = ()):
    for name, command in group.commands.items():
        if isinstance(command, click.Group):
            yield from _commands(command, (*prefix, name))
        else:
            yield (*prefix, name)


COMMANDS = sorted(_commands(main))


def listed_codes(help_text: str) -> list[int]:
    """The codes under `Exit codes:`, each on its own line with its meaning."""
    block = help_text.split("Exit codes:\n", 1)[1]
    codes = []
    for line in block.splitlines():
        found = re.fullmatch(r"\s+(\d+)\s+(\S.*)", line)
        if not found:
            break
        codes.append(int(found.group(1)))
    return codes


def test_every_command_has_an_entry():
    assert sorted(tuple(name.split()) for name in exit_codes.COMMAND_CODES) == COMMANDS


@pytest.mark.parametrize("command", COMMANDS, ids=" ".join)
def test_each_command_help_names_exactly_its_codes(command):
    result = run(*command, "--help")
    assert result.exit_code == 0, result.stderr
    assert listed_codes(result.stdout) == sorted(set(exit_codes.COMMAND_CODES[" ".join(command)]))
    assert result.stdout.count("Exit codes:") == 1


@pytest.mark.parametrize("command", COMMANDS, ids=" ".join)
def test_the_codes_name_only_options_the_command_has(command):
    """`doctor --help` said "usage error (also a --target that is not a version...)": doctor has no --target."""
    cmd = main
    for name in command:
        cmd = cmd.commands[name]  # type: ignore[attr-defined]
    options = {opt for param in cmd.params for opt in getattr(param, "opts", ())}
    block = run(*command, "--help").stdout.split("Exit codes:\n", 1)[1]
    named = set(re.findall(r"(?<![\w-])--[a-z][a-z-]*", block))
    assert named <= options, f"{' '.join(command)} --help names {sorted(named - options)}"


def test_the_codes_follow_what_the_command_does():
    def codes(*command: str) -> list[int]:
        return listed_codes(run(*command, "--help").stdout)

    assert codes("apply") == [0, 1, 2, 3, 4, 5, 6, 70, 130]
    assert codes("status") == [0, 1, 2, 3, 6, 70, 130]  # reads only: no drift, no lock
    assert codes("list") == [0, 1, 2, 6, 70, 130]  # no SGLang; 1: a --patches folder that is a bump not finished
    assert codes("capture") == [0, 1, 2, 3, 4, 6, 70, 130]
    assert "a check failed" in run("verify", "--help").stdout


def test_patchkit_help_keeps_the_full_table():
    result = run("--help")
    assert listed_codes(result.stdout) == sorted(exit_codes.MEANINGS) == [0, 1, 2, 3, 4, 5, 6, 70, 130]


def test_a_group_lists_the_codes_of_its_commands():
    assert listed_codes(run("manifest", "--help").stdout) == [0, 1, 2, 3, 6, 70, 130]
