"""track / matrix on real releases from the package index, and on a local git repository."""

from __future__ import annotations

import shutil

import pytest

from testing.cli import run
from testing.releases import HOME, pristine

pytestmark = pytest.mark.integration

MAMBA_0_5_19 = "sglang/srt/mem_cache/unified_cache/components/mamba_component.py"
MAMBA_0_5_20 = "sglang/srt/mem_cache/unified_cache/components/mamba.py"


@pytest.fixture
def cached_home(monkeypatch):
    monkeypatch.setenv("PATCHKIT_HOME", str(HOME))


def by_id(report: dict) -> dict[str, dict]:
    return {row["id"]: row for row in report["patches"]}


def test_mtp_upstream_fixed_between_0_5_17_and_0_5_19(cached_home):
    result = run("track", "--from", "0.5.17", "--to", "0.5.19", "--json")
    assert result.exit_code == 0, result.stderr
    report = result.json()
    assert (report["from"], report["to"]) == ("0.5.17", "0.5.19")
    mtp = by_id(report)["mtp-layer-detection"]
    assert mtp["from"]["state"] == "applies" and mtp["to"]["state"] == "upstream-fixed"
    added = [line for line in mtp["diff"].splitlines() if line.startswith("+")]
    assert any(line[1:].strip() == "self.hf_text_config.num_nextn_predict_layers = 1" for line in added)
    assert mtp["drop_when"] and mtp["upstream"]


def test_a_drop_condition_waiting_on_a_merged_but_unreleased_change_says_so(cached_home):
    # symm-mem-kill-switch waits on sglang#40485 (open) and names sglang#36110, merged upstream
    # but in no release up to 0.5.23: track says it is not in the release, so the patch stays.
    report = run("track", "--from", "0.5.22", "--to", "0.5.23", "--json").json()
    symm = by_id(report)["symm-mem-kill-switch"]
    waits = {change["ref"]: change for change in symm["waits_on"]}
    assert waits["sgl-project/sglang#36110"]["state"] == "merged" and not waits["sgl-project/sglang#36110"]["in_to"]
    assert waits["sgl-project/sglang#40485"]["state"] == "open" and not waits["sgl-project/sglang#40485"]["in_to"]
    assert symm["to"]["state"] == "applies"
    assert all(row["waits_on"] == [] for pid, row in by_id(report).items() if pid != "symm-mem-kill-switch")
    text = run("track", "--from", "0.5.22", "--to", "0.5.23").stdout
    assert "sgl-project/sglang#36110 (merged upstream when looked up on " in text
    assert "is not in 0.5.23 yet, so the drop condition is not met" in text


def test_mamba_applies_at_two_file_paths(cached_home):
    report = run("track", "--from", "0.5.19", "--to", "0.5.20", "--json").json()
    mamba = by_id(report)["mamba-slot-graceful"]
    assert mamba["from"] == {"state": "applies", "file": MAMBA_0_5_19, "detail": ""}
    assert mamba["to"] == {"state": "applies", "file": MAMBA_0_5_20, "detail": ""}


def test_before_the_target_existed_is_not_applicable(cached_home):
    report = run("track", "--from", "0.5.14", "--to", "0.5.15", "--json").json()
    kill_switch = by_id(report)["symm-mem-kill-switch"]
    assert kill_switch["from"]["state"] == "not-applicable"
    assert kill_switch["to"]["state"] == "applies"


def test_unknown_release_is_one_line_and_exit_3(cached_home):
    result = run("track", "--from", "0.0.999", "--to", "0.5.17")
    assert result.exit_code == 3
    assert result.stderr.strip().splitlines() == [result.stderr.strip()]
    assert "cannot download SGLang 0.0.999" in result.stderr


def test_matrix_json(cached_home):
    result = run("matrix", "--from", "0.5.17", "--to", "0.5.19", "--json")
    assert result.exit_code == 0, result.stderr
    table = result.json()
    assert table["versions"] == ["0.5.17", "0.5.18", "0.5.19"]
    assert by_id(table)["mtp-layer-detection"]["states"] == {
        "0.5.17": "applies", "0.5.18": "upstream-fixed", "0.5.19": "upstream-fixed",
    }
    markdown = run("matrix", "--from", "0.5.17", "--to", "0.5.19", "--markdown").stdout
    assert "| `mtp-layer-detection` | applies | upstream-fixed* | upstream-fixed* |" in markdown  # upstream's fix narrower
    assert "\n* mtp-layer-detection (0.5.18-0.5.19): upstream's fix is narrower than this patch: " in markdown


@pytest.fixture(scope="module")
def sglang_repo(tmp_path_factory):
    """A git repository holding two real release trees under python/, tagged."""
    import git

    root = tmp_path_factory.mktemp("sglang-git")
    repo = git.Repo.init(root)
    with repo.config_writer() as config:
        config.set_value("user", "name", "test").set_value("user", "email", "test@example.invalid")
    for version in ("0.5.17", "0.5.19"):
        package = root / "python" / "sglang"
        shutil.rmtree(package, ignore_errors=True)
        shutil.copytree(pristine(version) / "sglang", package, ignore=shutil.ignore_patterns("__pycache__"))
        repo.git.add("-A")
        repo.index.commit(f"release {version}")
        repo.create_tag(f"v{version}")
    # A later revision on main where model_config.py moved: the patch must say `moved`.
    repo.git.mv("python/sglang/srt/configs/model_config.py", "python/sglang/srt/configs/model_configuration.py")
    repo.index.commit("move model_config")
    return root


def test_git_mode_gives_the_same_answers(cached_home, sglang_repo):
    via_index = run("track", "--from", "0.5.17", "--to", "0.5.19", "--json").json()
    via_git = run("track", "--git", sglang_repo, "--from", "v0.5.17", "--to", "v0.5.19", "--json").json()
    assert (via_git["from"], via_git["to"]) == ("v0.5.17", "v0.5.19")
    for pid, row in by_id(via_index).items():
        assert by_id(via_git)[pid]["from"] == row["from"], pid
        assert by_id(via_git)[pid]["to"] == row["to"], pid
        assert by_id(via_git)[pid]["diff"].replace("v0.5.", "0.5.") == row["diff"], pid


def test_git_mode_reports_a_moved_file(cached_home, sglang_repo):
    report = run("track", "--git", sglang_repo, "--from", "v0.5.17", "--to", "HEAD", "--json").json()
    mtp = by_id(report)["mtp-layer-detection"]
    assert mtp["to"]["state"] == "moved"
    assert mtp["to"]["file"] == "sglang/srt/configs/model_configuration.py"
    assert "ModelConfig" in mtp["to"]["detail"]


def test_git_mode_bad_revision(sglang_repo):
    result = run("track", "--git", sglang_repo, "--from", "v0.0.1", "--to", "HEAD")
    assert result.exit_code == 3 and "has no revision 'v0.0.1'" in result.stderr
