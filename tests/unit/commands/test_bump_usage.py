"""`patchkit bump`'s usage and unknown-release exits, offline: one error line, nothing written."""

from __future__ import annotations

import json
import time

import pytest

from testing.cli import run


@pytest.fixture
def home(tmp_path, monkeypatch):
    """A home whose package index list is fresh (no pip asked): 0.5.17 and 0.5.23."""
    home = tmp_path / "home"
    home.mkdir()
    (home / "index-versions.json").write_text(json.dumps({"at": time.time(), "versions": ["0.5.17", "0.5.23"]}))
    monkeypatch.setenv("PATCHKIT_HOME", str(home))
    monkeypatch.chdir(tmp_path)
    return home


@pytest.mark.parametrize("args, message", [
    ((), "bump needs --to V or --latest"),
    (("--to", "0.5.23", "--latest"), "bump needs --to V or --latest"),
    (("--continue", "x", "--to", "0.5.23"), "--continue DIR takes no --to"),
    (("--continue", "x", "--gpu-memory", "80"), "--continue DIR takes no --gpu-memory: DIR's record names"),
    (("--continue", "x", "--gpus", "2", "--sm", "9.0", "--launch", "--tp 2"),
     "--continue DIR takes no --launch, --gpus, --sm: DIR's record names"),
    (("--to", "banana"), "banana"),
    (("--to", "0.5.23", "--launch", "--model-path 'x"), "--launch"),
    (("--to", "0.5.23", "--from", "0.5.23"), "is the release the patches are for already"),
])
def test_usage_errors_exit_2_and_write_nothing(home, tmp_path, args, message):
    result = run("bump", *args)
    assert result.exit_code == 2, (result.stdout, result.stderr)
    assert message in result.stderr and result.stderr.count("\n") == 1
    assert not list(tmp_path.glob("patchkit-bump-*"))


@pytest.mark.parametrize("fmt", ["text", "json", "markdown"])
def test_latest_on_a_set_already_on_the_newest_release_is_nothing_to_do(home, tmp_path, fmt):
    """A scheduled `bump --latest` must not fail every day that has no new release: exit 0, nothing
    written, nothing downloaded."""
    result = run("bump", "--latest", "--from", "0.5.23", *(() if fmt == "text" else (f"--{fmt}",)))
    assert result.exit_code == 0, result.stderr
    if fmt == "json":
        assert result.json() == {"from": "0.5.23", "to": "0.5.23", "nothing_to_do": True}
    else:
        assert "SGLang 0.5.23, the release the patches are for, is the newest release on the package index: " \
               "nothing to do" in result.stdout
    assert not list(tmp_path.glob("patchkit-bump-*")) and not (home / "wheels").exists()


def test_a_folder_holding_other_files_is_not_written_into(home, tmp_path):
    folder = tmp_path / "mine"
    folder.mkdir()
    (folder / "notes.txt").write_text("mine")
    result = run("bump", "--to", "0.5.23", "--from", "0.5.17", "-o", folder)
    assert result.exit_code == 2 and "not a new or empty folder" in result.stderr
    assert [p.name for p in folder.iterdir()] == ["notes.txt"]


def test_a_release_the_index_does_not_have_exits_3_before_any_download(home, tmp_path):
    result = run("bump", "--to", "0.5.99", "--from", "0.5.17")
    assert result.exit_code == 3, result.stderr
    assert "SGLang 0.5.99 is not on the package index (newest: 0.5.23)" in result.stderr
    assert not list(tmp_path.glob("patchkit-bump-*")) and not (home / "wheels").exists()


def test_continue_on_a_folder_without_a_record_exits_2(home, tmp_path):
    result = run("bump", "--continue", tmp_path)
    assert result.exit_code == 2 and ".patchkit-bump.json" in result.stderr


def test_no_sglang_where_the_tree_option_points_exits_3(home, tmp_path):
    empty = tmp_path / "empty"
    empty.mkdir()
    result = run("bump", "--to", "0.5.23", "--site-packages", empty)
    assert result.exit_code == 3, result.stderr
    assert result.stderr.startswith("error: ") and not list(tmp_path.glob("patchkit-bump-*"))


def test_gpu_facts_are_checked_as_doctor_checks_them(home, tmp_path):
    result = run("bump", "--to", "0.5.23", "--from", "0.5.17", "--gpu-memory", "-80")
    assert result.exit_code == 2 and "must be positive numbers" in result.stderr


@pytest.mark.parametrize("where", ["/proc/patchkit-bump-test", "a-file/sub"])
def test_an_out_folder_that_cannot_be_made_exits_2_before_any_download(home, tmp_path, where):
    (tmp_path / "a-file").write_text("a file")
    result = run("bump", "--to", "0.5.23", "--from", "0.5.17", "-o", where)
    assert result.exit_code == 2, result.stderr
    assert f"-o {where}: cannot make a folder there" in result.stderr and result.stderr.count("\n") == 1
    assert not (home / "wheels").exists()


def test_a_backwards_bump_exits_2_before_any_download(home):
    result = run("bump", "--to", "0.5.17", "--from", "0.5.23")
    assert result.exit_code == 2, result.stderr
    assert "--to 0.5.17 is older than 0.5.23" in result.stderr and result.stderr.count("\n") == 1
    assert not (home / "wheels").exists()


@pytest.fixture
def offline(home, monkeypatch):
    """No list of the index kept in the home, and pip's index unreachable (a closed local port)."""
    (home / "index-versions.json").unlink()
    for name, value in (("PIP_INDEX_URL", "http://127.0.0.1:9/simple"), ("PIP_EXTRA_INDEX_URL", ""),
                        ("PIP_FIND_LINKS", ""), ("PIP_RETRIES", "0"), ("PIP_TIMEOUT", "2")):
        monkeypatch.setenv(name, value)
    return home


def test_latest_with_the_index_unreachable_exits_3_and_names_it(offline, tmp_path):
    """Never the newest release patchkit knows in silence: a scheduled job would stay green forever."""
    result = run("bump", "--latest", "--from", "0.5.17")
    assert result.exit_code == 3, result.stderr
    assert "--latest: the package index cannot be asked" in result.stderr and result.stderr.count("\n") == 1
    assert not list(tmp_path.glob("patchkit-bump-*"))


def test_to_with_the_index_unreachable_does_not_claim_it_is_not_there(offline, tmp_path):
    result = run("bump", "--to", "0.5.99", "--from", "0.5.17")
    assert result.exit_code == 3, result.stderr
    assert "not on the package index" not in result.stderr and "cannot download SGLang" in result.stderr
    assert not list(tmp_path.glob("patchkit-bump-*"))


@pytest.mark.parametrize("line, message", [
    ("--model-path Qwen/Qwen3.5-35B-A3B --tp-size 2", "--model-path Qwen/Qwen3.5-35B-A3B is a hub id, not a local "
     "folder: doctor reads config.json and model.safetensors.index.json from a local folder, not the weights (hf "
     "download Qwen/Qwen3.5-35B-A3B --include config.json --include model.safetensors.index.json --local-dir DIR"),
    ("--model=/no/such/model", "--model-path /no/such/model does not exist"),
])
def test_a_launch_model_doctor_cannot_read_exits_2_before_any_download(home, tmp_path, line, message):
    """--launch's model is checked before any work: a hub id was found only after V0's and V's wheels were
    downloaded and every patch judged (17.6 s in the field), then exit 2."""
    result = run("bump", "--to", "0.5.23", "--from", "0.5.17", "--launch", line)
    assert result.exit_code == 2, result.stderr
    assert message in result.stderr and result.stderr.count("\n") == 1, result.stderr
    assert not (home / "wheels").exists() and not list(tmp_path.glob("patchkit-bump-*"))
