"""matrix and track read the files they need straight from the cached wheels: nothing is
unpacked, a download says so on stderr (a terminal or not), verdicts are cached."""

from __future__ import annotations

import os

import pytest

from patchkit.releases import WheelSource
from testing.cli import run
from testing.releases import HOME, pristine

pytestmark = pytest.mark.integration

VERSIONS = ("0.5.17", "0.5.18", "0.5.19")


@pytest.fixture
def wheels_home(tmp_path, monkeypatch):
    """A PATCHKIT_HOME whose wheels/ holds (links to) the tests' cached wheels of VERSIONS."""
    home = tmp_path / "home"
    (home / "wheels").mkdir(parents=True)
    for version in VERSIONS:
        pristine(version)  # makes sure the tests' cache has the wheel
        wheel = next((HOME / "wheels").glob(f"sglang-{version}-*.whl"))
        os.symlink(wheel, home / "wheels" / wheel.name)
    monkeypatch.setenv("PATCHKIT_HOME", str(home))
    return home


def test_matrix_reads_wheels_and_caches_verdicts(wheels_home):
    cold = run("matrix", "--from", VERSIONS[0], "--to", VERSIONS[-1], "--json")
    assert cold.exit_code == 0, cold.stderr
    assert sorted(p.name for p in wheels_home.iterdir()) == ["verdicts.json", "wheels"]  # nothing unpacked
    states = {row["id"]: row["states"] for row in cold.json()["patches"]}
    assert states["mtp-layer-detection"] == {"0.5.17": "applies", "0.5.18": "upstream-fixed", "0.5.19": "upstream-fixed"}
    warm = run("matrix", "--from", VERSIONS[0], "--to", VERSIONS[-1], "--json")
    assert warm.stdout == cold.stdout


def test_wheel_source_reads_the_release_files(wheels_home):
    source = WheelSource("0.5.19")
    tree = pristine("0.5.19")
    rel = "sglang/srt/configs/model_config.py"
    assert source.read(rel) == (tree / rel).read_bytes()
    assert source.read("sglang/no/such/file.py") is None
    assert source.python_files() == sorted(p.relative_to(tree).as_posix() for p in (tree / "sglang").rglob("*.py"))


def test_download_progress_is_shown_off_a_terminal(tmp_path, monkeypatch):
    monkeypatch.setenv("PATCHKIT_HOME", str(tmp_path / "home"))
    result = run("track", "--from", "0.5.10", "--to", "0.5.10", "--json")  # CliRunner's stderr is no terminal
    assert result.exit_code == 0, result.stderr
    lines = result.stderr.splitlines()
    done = [line for line in lines if line.startswith("downloaded SGLang 0.5.10: sglang-0.5.10-")]
    assert len(done) == 1 and " MB in " in done[0] and done[0].endswith(", done"), lines
    assert sorted(p.name for p in (tmp_path / "home").iterdir()) == ["wheels"]
