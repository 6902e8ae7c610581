"""Every command patchkit prints for the user to run next ("`patchkit apply` updates it", "`patchkit
clean` removes it", capture's "next:" line...) names the tree the run that printed it worked on: the
targeting option it was given (`--site-packages`, `--source`, `--python`), its `--target` where the
advised command has that option, and the `--patches` given on the command line (issue 37.1). Pasted
as printed, a bare `patchkit revert` reverts whatever SGLang that shell's patchkit finds.

Each case makes a state of a synthetic tree the way it happens (tests/unit/test_engine_states.py),
runs one command on it with each way of naming the tree, and checks every command in what it
printed; the case list names at least one piece of advice per case, so none passes empty."""

from __future__ import annotations

import re
import shlex
import sys
from pathlib import Path

import pytest

from testing import synthetic as syn
from testing.cli import run
from testing.synthetic import FIX, UPSTREAM, Synthetic
from tests.unit.engine.test_engine_states import SETUPS

# (state, the command run on it): each prints at least one `patchkit ...` command to run next.
CASES = [
    ("outdated", ("status",)),  # `patchkit apply` updates it
    ("stale", ("status",)),  # `patchkit apply`, `revert` or `clean` discards the old record
    ("stale", ("diff",)),  # `patchkit clean` removes it
    ("pending-journal", ("status",)),  # `patchkit apply` or `patchkit revert` finishes it
    ("pending-journal", ("verify",)),
    ("failed", ("apply",)),  # `patchkit apply --skip syn-fix` applies the others; `pip install ...` restores it
    ("drifted", ("apply",)),  # `patchkit diff`
    ("drifted", ("revert",)),
    ("drifted", ("verify",)),  # `patchkit diff` shows the outside change, `patchkit apply --force` ...
    ("not-applied", ("apply",)),  # no plugin system: `patchkit verify` checks the files
    ("not-applied", ("verify",)),  # run `patchkit apply`
    ("applied", ("revert", "--only", UPSTREAM)),  # not applied here: `patchkit status` lists what is
    ("orphaned", ("status",)),  # `patchkit clean` removes it
    ("orphaned", ("revert", "--only", FIX)),  # `patchkit revert` without --only, or `patchkit clean`
]
WAYS = ("--site-packages", "--source", "--python")


def suggested(text: str) -> list[list[str]]:
    """The `patchkit ...` commands a text names, as argument lists (without `patchkit`)."""
    return [shlex.split(command)[1:] for command in re.findall(r"`(patchkit [^`]+)`", text)]


def reinstalls(text: str) -> list[list[str]]:
    """The pip commands a text names (a release reinstalled over a local edit)."""
    return [shlex.split(command) for command in re.findall(r"`([^`]*\bpip install [^`]+)`", text)]


def options_of(verb: str) -> set[str]:
    from patchkit.cli.app import main

    command = main.commands[verb]
    return {option for param in command.params for option in getattr(param, "opts", [])}


def verb_of(args: list[str]) -> tuple[str, list[str], list[str]]:
    """(the verb, the options before it, those after it) of an advised command line."""
    index = next(i for i, arg in enumerate(args) if not arg.startswith("-") and (i == 0 or args[i - 1] != "--patches"))
    return args[index], args[:index], args[index + 1:]


def python_for(site: Path, folder: Path) -> Path:
    """An interpreter that imports the synthetic SGLang (`--python PATH`): this Python with the
    tree on its path, as a venv's bin/python would be."""
    wrapper = folder / "python"
    wrapper.write_text(f"#!/bin/sh\nPYTHONPATH={shlex.quote(str(site))} exec {shlex.quote(sys.executable)} \"$@\"\n")
    wrapper.chmod(0o755)
    return wrapper


def installed_version(site: Path) -> str:
    meta = next(site.glob("sglang-*.dist-info"), None)
    return meta.name.removeprefix("sglang-").removesuffix(".dist-info") if meta else syn.VERSION


@pytest.fixture(scope="module")
def patch_sets(tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("patch-sets")
    return {"v1": syn.write_patches(root / "v1"), "v2": syn.write_patches(root / "v2", fix_version="v2")}


# An interpreter whose SGLang was uninstalled searches its own site-packages, never the folder the
# orphaned state is in: nothing there to advise about.
RUNS = [(state, command, way) for state, command in CASES for way in WAYS if not (way == "--python" and state == "orphaned")]


@pytest.mark.parametrize("state, command, way", RUNS, ids=[f"{s}: {' '.join(c)} {w}" for s, c, w in RUNS])
def test_each_advised_command_names_the_tree_the_run_worked_on(state, command, way, scratch, patch_sets):
    tree = Synthetic(syn.make_tree(scratch / "site tree"), patch_sets["v1"])  # a space: quoted in the advice
    SETUPS[state](tree)
    value = str(python_for(tree.site, scratch) if way == "--python" else tree.site)
    version = installed_version(tree.site)
    verb, rest = command[0], list(command[1:])
    with_target = "--target" in options_of(verb) and state != "orphaned"
    args = ["--patches", str(tree.patches), verb, way, value, *(["--target", version] if with_target else []), *rest]
    result = run(*args)
    said = result.stdout + result.stderr
    advice = suggested(said)
    assert advice, f"the case names no command to run next: {said}"
    for advised in advice:
        advised_verb, before, after = verb_of(advised)
        where = f"{' '.join(advised)!r} in {said!r}"
        assert before == ["--patches", str(tree.patches)], where  # the patch set of this run, before the verb
        assert {a for a in after if a.startswith("-")} <= options_of(advised_verb), where  # options it has
        if way in options_of(advised_verb):
            assert after[after.index(way) + 1] == value if way in after else False, where
        if with_target and "--target" in options_of(advised_verb):
            assert "--target" in after and after[after.index("--target") + 1] == version, where
    for pip in reinstalls(said):  # into that tree: its venv's Python, or pip's --target with its folder
        assert "--target" in pip and pip[pip.index("--target") + 1] == str(tree.site), (pip, said)


def test_an_advised_command_acts_on_that_tree(scratch, patch_sets):
    """The advice of a run on one tree, pasted as printed, acts on that tree and not on another
    (the user's own venv, here a second synthetic tree named by $PWD's default would not be)."""
    tree = Synthetic(syn.make_tree(scratch / "site"), patch_sets["v1"])
    SETUPS["outdated"](tree)
    status = run("--patches", tree.patches, "status", "--site-packages", tree.site)
    (advised,) = [a for a in suggested(status.stdout + status.stderr) if verb_of(a)[0] == "apply"]
    assert run(*advised).exit_code == 0
    assert tree.text(syn.ALPHA) == syn.patched_alpha(syn.ALPHA, "v2")  # syn-fix v2 now, in that tree



def test_the_builder_knows_which_commands_name_a_tree():
    """store/naming.py's two sets, against the click commands: a tree is named again only on the
    commands with all three targeting options, --target only where the command has it."""
    from patchkit.cli.app import main
    from patchkit.store.naming import NAMES_A_TREE, TAKES_TARGET

    naming_a_tree = {name for name in main.commands if {"--site-packages", "--source", "--python"} <= options_of(name)}
    assert NAMES_A_TREE == naming_a_tree
    assert TAKES_TARGET == {name for name in naming_a_tree if "--target" in options_of(name)}
