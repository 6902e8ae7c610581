"""The fast path (patchkit/cli/fast_path.py) parses a plain `status` / `apply` itself, before click
is imported, and calls the same command function (issue 34): for every plain command line it must
call it with exactly what click would, every parameter of the function compared (the options it
does not parse too, with the defaults click gives them)."""

from __future__ import annotations

import inspect
import itertools
import sys

import pytest

from patchkit.cli import app, fast_path
from patchkit.commands import apply as apply_mod
from patchkit.commands import status as status_mod

COMMANDS = {"apply": (apply_mod, "apply"), "status": (status_mod, "status")}
SIGNATURES = {command: inspect.signature(getattr(*where)) for command, where in COMMANDS.items()}
OPTIONS = (("--site-packages", "/srv/site"), ("--target", "0.5.17"), ("--json",))


def plain_lines() -> list[list[str]]:
    """Every plain command line: each command with each subset of the options, in each order."""
    lines = []
    for command in COMMANDS:
        for count in range(len(OPTIONS) + 1):
            for chosen in itertools.permutations(OPTIONS, count):
                lines.append([command, *[part for option in chosen for part in option]])
    return lines


def called(monkeypatch, argv: list[str], entry) -> dict[str, object]:
    """The arguments `entry` calls the command function with, bound to its parameters by name."""
    module, name = COMMANDS[argv[0]]
    seen: list[dict[str, object]] = []

    def record(*args, **kwargs):
        bound = SIGNATURES[argv[0]].bind(*args, **kwargs)
        bound.apply_defaults()
        seen.append(dict(bound.arguments))
        return 0

    monkeypatch.setattr(module, name, record)
    monkeypatch.setattr(sys, "argv", ["patchkit", *argv])
    with pytest.raises(SystemExit) as exited:
        entry()
    assert exited.value.code in (0, None) and len(seen) == 1, (argv, exited.value.code)
    return seen[0]


@pytest.mark.parametrize("argv", plain_lines(), ids=" ".join)
def test_the_fast_path_calls_the_command_as_click_does(monkeypatch, argv):
    assert fast_path.plain(argv) is not None  # a plain line: the fast path takes it
    through_click = called(monkeypatch, argv, lambda: app.main(argv, prog_name="patchkit"))
    through_fast_path = called(monkeypatch, argv, fast_path.main)
    assert through_fast_path == through_click
