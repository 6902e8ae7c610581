"""What a new user reads first (issue 37.6): the README's first command writes the patched SGLang
where no build tool writes (`pip install .` leaves setuptools' own `build/lib` in the checkout, so a
`build/` folder mixed the two), in a folder git ignores; and the README says where patchkit keeps
what it downloads and its crash logs (PATCHKIT_HOME)."""

from __future__ import annotations

import re
import shlex

from patchkit.base import crash_log
from patchkit.base.constants import ENV_HOME
from patchkit.releases import pristine
from testing.releases import REPO

README = (REPO / "README.md").read_text()
BUILD_OUTPUTS = ("build", "dist")  # setuptools' and pip's folders in a checkout


def first_command() -> list[str]:
    block = re.search(r"```sh\n(.*?)```", README, flags=re.S)
    assert block, "the README opens with a shell block"
    return shlex.split(block.group(1).splitlines()[0])


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
