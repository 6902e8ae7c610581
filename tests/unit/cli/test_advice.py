"""The advice a command prints names only options that command has: "SGLang not found" suggests
--fetch on `apply` alone (the only command that has it), doctor suggests its own options."""

from __future__ import annotations

import re

import click
import pytest

from patchkit.cli.app import main
from testing.cli import run


def options_of(*command: str) -> set[str]:
    found: click.Command = main
    for name in command:
        assert isinstance(found, click.Group)
        found = found.commands[name]
    return {option for param in found.params for option in getattr(param, "opts", [])}


@pytest.mark.parametrize("command", [("status",), ("verify",), ("diff",), ("revert",), ("apply",), ("capture", "my-edit"),
                                     ("doctor", "--", "--model-path", ".")])
def test_sglang_not_found_names_options_the_command_has(command, monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)  # this interpreter has no SGLang: nothing is found
    result = run(*command)
    assert result.exit_code == 3, (result.stdout, result.stderr)
    assert "SGLang is not installed" in result.stderr
    named = set(re.findall(r"--[a-z][a-z-]+", result.stderr))
    assert named and named <= options_of(command[0]), (named - options_of(command[0]), result.stderr)
    assert ("--fetch" in named) == (command[0] == "apply")
