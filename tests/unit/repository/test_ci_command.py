"""`.ci/run` runs exactly the README's test commands (its first shell block's second line: the venv
and the install, then its last command, pytest on two xdist workers), and takes a pytest
that collected nothing (exit 5) for a failure."""

from __future__ import annotations

import re
import shlex

from testing.releases import REPO

CI = (REPO / ".ci" / "run").read_text().splitlines()


def readme_lines() -> list[str]:
    block = re.search(r"```sh\n(.*?)```", (REPO / "README.md").read_text(), flags=re.S)
    assert block, "the README opens with a shell block"
    return block.group(1).splitlines()


def readme_test_command() -> str:
    """The whole suite: the last command of the block's last line (the tests' set-up command)."""
    return readme_lines()[-1].split(" && ")[-1]


def test_ci_runs_the_readmes_test_command():
    setup = " && ".join(readme_lines()[1].split(" && ")[:2])  # the venv and the test extra's install
    assert any(line.startswith(f"{setup} ") for line in CI), (setup, CI)
    command = readme_test_command()
    assert command in CI, (command, CI)
    words = shlex.split(command)
    assert words[words.index("-n") + 1] == "2" and words[words.index("--dist") + 1] == "loadfile", words


def test_ci_takes_no_tests_collected_for_a_failure():
    after = CI[CI.index(readme_test_command()) + 1:]
    assert after[:2] == ["rc=$?", 'if [ "$rc" -eq 5 ]; then'] and "    exit 1" in after[:5], after[:5]


def test_xdist_hands_out_the_modules_in_collection_order(request):
    """The long modules of few tests (tests/faults, tests/behaviour) go out with their folders, before
    tests/unit's many small ones, not last as by xdist's default (the most tests first): docs/testing.md."""
    assert request.config.getoption("loadscopereorder") is False
