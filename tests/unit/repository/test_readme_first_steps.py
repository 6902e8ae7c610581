"""What a new user reads first (issue 37.6): the README's first command writes the patched SGLang
where no build tool writes (`pip install .` leaves setuptools' own `build/lib` in the checkout, so a
`build/` folder mixed the two), in a folder git ignores; and the README says where patchkit keeps
what it downloads and its crash logs (PATCHKIT_HOME). Each command of its opening block works in the
order shown (issue 43.2: the unit tier, offered in the text, failed right after the first line with
`No module named pytest`, the test extra coming only with the whole suite's line)."""

from __future__ import annotations

import re
import shlex
from importlib import metadata

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from patchkit.base import crash_log
from patchkit.base.constants import ENV_HOME
from patchkit.releases import pristine
from testing.releases import REPO

README = (REPO / "README.md").read_text()
BUILD_OUTPUTS = ("build", "dist")  # setuptools' and pip's folders in a checkout


def block_lines() -> list[str]:
    block = re.search(r"```sh\n(.*?)```", README, flags=re.S)
    assert block, "the README opens with a shell block"
    return block.group(1).splitlines()


def first_command() -> list[str]:
    return shlex.split(block_lines()[0])


PROJECT = "sglang-patchkit"
MODULES = {"pytest": "pytest"}  # `python -m M`: the distribution that provides M
PLUGIN_OPTIONS = {"-n": "pytest-xdist", "--dist": "pytest-xdist"}  # pytest options a plugin adds


def installs(spec: str) -> set[str]:
    """What `pip install SPEC` puts into the venv, for SPEC `.` or `.[EXTRA,...]` (this checkout):
    the project and its requirements, the extras' too, as the installed project declares them."""
    found = re.fullmatch(r"\.(?:\[([\w,-]+)\])?", spec)
    assert found, f"the README installs {spec!r}: only this checkout (., .[extra]) is modelled here"
    extras = set((found.group(1) or "").split(",")) - {""}
    names = {PROJECT}
    for text in metadata.requires(PROJECT) or []:
        requirement = Requirement(text)
        marker = requirement.marker
        if marker is None or any(marker.evaluate({"extra": extra}) for extra in extras):
            names.add(canonicalize_name(requirement.name))
    return names


def needs(words: list[str]) -> set[str]:
    """The distributions a venv command needs: its own script's or module's, and its options' plugins."""
    if words[0] == ".venv/bin/patchkit":
        return {PROJECT}
    if words[0] == ".venv/bin/pip":
        return set()
    assert words[:2] == [".venv/bin/python", "-m"] and words[2] in MODULES, f"a command not modelled here: {words}"
    return {MODULES[words[2]]} | {PLUGIN_OPTIONS[word] for word in words[3:] if word in PLUGIN_OPTIONS}


def test_each_line_of_the_opening_block_has_what_it_needs_from_itself_and_the_lines_before():
    venv = False
    installed: set[str] = set()
    for number, line in enumerate(block_lines(), 1):
        for command in line.split(" && "):
            words = shlex.split(command)
            if words[:3] == ["python3", "-m", "venv"]:
                venv = True
                continue
            assert venv and words[0].startswith(".venv/bin/"), f"line {number}: {command} (no venv yet)"
            if words[:2] == [".venv/bin/pip", "install"]:
                installed |= installs(words[-1])
            missing = needs(words) - installed
            assert not missing, f"line {number}: `{command}` needs {sorted(missing)}, not installed by then"


def test_the_block_is_two_set_up_commands_the_main_job_then_the_tests():
    """The README opens with exactly two commands for a fresh machine: the main job (patchkit
    applied to a release it fetches), then the tests (install, the unit tier, the whole suite)."""
    lines = block_lines()
    assert len(lines) == 2, lines
    assert ".venv/bin/patchkit apply" in lines[0] and "pytest" not in lines[0], lines[0]
    assert "pytest" in lines[1] and "patchkit apply" not in lines[1], lines[1]


def test_the_text_names_no_command_beside_the_block_and_the_unit_tier_comes_first():
    """A command the text offers (\"the unit tier alone\") is a command of the block, in the
    order to run it: the unit tier before the whole suite, after what it needs is installed."""
    text = README.split("```", 2)[2].split("\n## ", 1)[0]
    offered = [" ".join(span.split()) for span in re.findall(r"`(\.venv/bin/[^`]+)`", text)]
    commands = [command for line in block_lines() for command in line.split(" && ")]
    assert all(command in commands for command in offered), (offered, commands)
    unit = [n for n, command in enumerate(commands) if "pytest" in command and '-m "not slow"' in command]
    whole = [n for n, command in enumerate(commands) if command.endswith("-m pytest -n 2 --dist loadfile")]
    assert unit and whole and unit[0] < whole[0], commands


def test_the_first_command_patches_a_folder_no_build_tool_writes():
    words = first_command()
    assert "--fetch" in words, words
    folder = words[words.index("--fetch") + 1]
    top = folder.split("/")[0]
    assert top not in BUILD_OUTPUTS and not top.endswith(".egg-info"), folder
    ignored = [line.strip() for line in (REPO / ".gitignore").read_text().splitlines()]
    assert f"/{top}/" in ignored, f"{top}/ holds a patched SGLang: git must not list it ({ignored})"
    assert f"`{folder}`" in README  # the text under the block names the same folder


def test_the_readme_names_patchkit_home_and_what_it_holds(monkeypatch, tmp_path):
    assert f"`{ENV_HOME}`" in README
    monkeypatch.delenv(ENV_HOME, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    default = pristine.home().relative_to(tmp_path).as_posix()
    assert f"`~/{default}`" in README  # the default, as the code has it
    for folder in (pristine.wheel_cache(), crash_log.log_dir()):
        name = str(folder).rsplit("/", 1)[-1]
        assert f"`{name}/`" in README, name
