"""`patchkit doctor` through the real CLI on real releases: output, --json, exit codes (the usage errors
found before a release is read: tests/unit/commands/test_doctor.py)."""

from __future__ import annotations

import pytest

from testing import releases
from testing.cli import run
from testing.doctor import model_folder
from tests.unit.commands.test_doctor import assert_json_error

GPU = ("--gpus", "1", "--gpu-memory", "80", "--gpu-free", "79", "--sm", "9.0")
BUDGET_KEYS = {"kv_tokens", "kv_bytes_per_token", "weights_bytes", "ssm_state_bytes", "conv_state_bytes",
               "state_slots", "state_slot_bytes", "intermediate_state_bytes", "multimodal_reserve_bytes",
               "effective_max_running_requests", "max_request_tokens"}


@pytest.fixture
def model(tmp_path):
    return str(model_folder(tmp_path / "qwen3.8-27b"))


@pytest.fixture
def shared_home(monkeypatch):
    """--version V reads the release from the tests' own cache (no download)."""
    monkeypatch.setenv("PATCHKIT_HOME", str(releases.HOME))


@pytest.mark.integration  # reads a real release (testing.releases.pristine): slow tier
def test_json_report_and_exit_0(model, shared_home):
    releases.pristine("0.5.20")
    result = run("doctor", "--version", "0.5.20", *GPU, "--json", "--", "--model-path", model,
                 "--mem-fraction-static", "0.88", "--context-length", "65536", "--max-running-requests", "8")
    assert result.exit_code == 0, result.stdout + result.stderr
    data = result.json()
    assert data["sglang"]["version"] == "0.5.20"
    assert data["gpu"]["total_gib"] == 80 and data["gpu"]["sm"] == "9.0"
    assert BUDGET_KEYS <= set(data["budget"])
    assert data["budget"]["state_slot_bytes"] == 153_944_064
    assert all(set(f) == {"rule", "level", "message", "fix", "fix_args", "fix_remove", "fix_command", "alternatives"}
               for f in data["findings"])
    assert not [f for f in data["findings"] if f["level"] == "error"]


@pytest.mark.integration  # reads a real release (testing.releases.pristine): slow tier
def test_text_report_and_exit_1_on_an_error(model):
    site = releases.pristine("0.5.20")
    result = run("doctor", "--site-packages", site, *GPU, "--", "--model-path", model,
                 "--mamba-scheduler-strategy", "no_buffer", "--mem-fraction-static", "0.88")
    assert result.exit_code == 1, result.stderr
    assert "KV tokens" in result.stdout and "state pool" in result.stdout
    assert "error   flag-removed: --mamba-scheduler-strategy" in result.stdout
    assert "fix: --mamba-radix-cache-strategy" in result.stdout


@pytest.mark.integration  # reads a real release (testing.releases.pristine): slow tier
@pytest.mark.parametrize("args, message", [
    (("--",), "no --model-path"),
    (("--", "--model-path", "/does/not/exist"), "/does/not/exist does not exist"),
    (("--", "--model-path", "Qwen/Qwen3.5-27B"), "--model-path Qwen/Qwen3.5-27B is a hub id, not a local folder"),
    (("--sm", "nine", "--", "--model-path", "."), "--sm nine"),
    (("--gpu-memory", "-1", "--", "--model-path", "."), "must be positive"),
])
def test_bad_input_exits_2(args, message):
    site = releases.pristine("0.5.20")
    result = run("doctor", "--site-packages", site, *args)
    assert result.exit_code == 2, result.stdout + result.stderr
    assert result.stderr.startswith("error: ") and message in result.stderr
    assert result.stderr.count("\n") == 1


@pytest.mark.integration  # reads a real release (testing.releases.pristine): slow tier
def test_unreadable_config_is_one_error_line(tmp_path):
    folder = tmp_path / "broken"
    folder.mkdir()
    (folder / "config.json").write_text("{not json")
    result = run("doctor", "--site-packages", releases.pristine("0.5.20"), *GPU, "--", "--model-path", folder)
    assert result.exit_code == 2 and "is not valid JSON" in result.stderr


@pytest.mark.integration  # reads a real release (testing.releases.pristine): slow tier
def test_a_release_without_a_patch_set_is_still_checked(model, tmp_path):
    # A copy of 0.5.20 relabelled 0.5.99: patchkit has no manifest for it, doctor still runs.
    site = tmp_path / "site"
    site.mkdir()
    pristine = releases.pristine("0.5.20")
    (site / "sglang").symlink_to(pristine / "sglang")
    info = site / "sglang-0.5.99.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: sglang\nVersion: 0.5.99\n")
    result = run("doctor", "--site-packages", site, *GPU, "--json", "--", "--model-path", model,
                 "--mem-fraction-static", "0.88", "--max-running-requests", "8", "--context-length", "65536")
    assert result.exit_code == 0, result.stderr
    findings = {f["rule"]: f for f in result.json()["findings"]}
    # A release without a manifest is judged by the patches' probes (issue 14), so patch-needed
    # is checked there too: no "patch-status-unknown" note.
    assert "patch-status-unknown" not in findings


@pytest.mark.integration  # reads a real release (testing.releases.pristine): slow tier
def test_bad_launch_values_are_findings_not_crashes(model):
    site = releases.pristine("0.5.20")
    result = run("doctor", "--site-packages", site, *GPU, "--json", "--", "--model-path", model,
                 "--tp-size", "0", "--disable-radix-cache=1", "--mem-fraction-static", "1.5")
    assert result.exit_code == 1, result.stderr
    values = [f["message"] for f in result.json()["findings"] if f["rule"] == "flag-value"]
    assert values == ["--tp-size 0: must be at least 1", "--disable-radix-cache 1: takes no value (write the flag alone)",
                      "--mem-fraction-static 1.5: must be a fraction of the GPU memory, above 0 and at most 1"]


@pytest.mark.integration  # reads a real release (testing.releases.pristine): slow tier
@pytest.mark.parametrize("config", ['{"num_hidden_layers": "abc"}', '{"architectures": "Llama"}', '[1]'])
def test_malformed_config_exits_2_with_json_too(tmp_path, config):
    folder = tmp_path / "broken"
    folder.mkdir()
    (folder / "config.json").write_text(config)
    result = run("doctor", "--site-packages", releases.pristine("0.5.20"), *GPU, "--json", "--",
                 "--model-path", folder)
    assert_json_error(result, 2, "config.json")


@pytest.mark.integration  # reads a real release (testing.releases.pristine): slow tier
def test_safetensors_without_an_index(tmp_path):
    folder = model_folder(tmp_path / "m", total_size=None)  # one header-only shard, no index
    result = run("doctor", "--site-packages", releases.pristine("0.5.20"), *GPU, "--json", "--",
                 "--model-path", folder, "--mem-fraction-static", "0.88")
    assert result.exit_code == 0, result.stderr
    assert result.json()["model"]["weights_source"] == "headers"
    assert result.json()["budget"]["kv_tokens"] > 0


@pytest.mark.integration  # reads a real release (testing.releases.pristine): slow tier
def test_draft_hub_id_is_a_note_and_a_missing_local_draft_an_error(model):
    site = releases.pristine("0.5.20")
    argv = ("doctor", "--site-packages", site, *GPU, "--json", "--", "--model-path", model, "--mem-fraction-static",
            "0.88", "--max-running-requests", "8", "--speculative-algorithm", "EAGLE3")
    result = run(*argv, "--speculative-draft-model-path", "org/eagle3-draft")
    # exit 1 only for eagle3-capture-hook, pending on a pristine 0.5.20
    assert result.exit_code == 1, result.stderr
    assert {f["rule"] for f in result.json()["findings"] if f["level"] == "error"} == {"patch-needed"}
    notes = [f for f in result.json()["findings"] if f["rule"] == "draft-not-local"]
    assert len(notes) == 1 and "org/eagle3-draft is a hub id" in notes[0]["message"]
    assert ("hf download org/eagle3-draft --include config.json --include model.safetensors.index.json --local-dir "
            "DIR") in notes[0]["fix"]
    result = run(*argv, "--speculative-draft-model-path", model)
    assert "draft-not-local" not in {f["rule"] for f in result.json()["findings"]}
    result = run(*argv, "--speculative-draft-model-path", "/models/missing-draft")
    assert_json_error(result, 2, "--speculative-draft-model-path /models/missing-draft does not exist")


@pytest.mark.integration  # reads a real release (testing.releases.pristine): slow tier
def test_a_release_without_the_sizing_code_says_so(model, tmp_path):
    # 0.5.20's code with the sizing modules taken out stands for a release before 0.5.14.
    import shutil

    site = tmp_path / "site"
    shutil.copytree(releases.pristine("0.5.20") / "sglang", site / "sglang", symlinks=True)
    shutil.copytree(releases.pristine("0.5.20") / "sglang-0.5.20.dist-info", site / "sglang-0.5.20.dist-info")
    (site / "sglang/srt/mem_cache/kv_cache_configurator.py").unlink()
    argv = ("doctor", "--site-packages", site, *GPU, "--json", "--", "--model-path", model, "--mem-fraction-static",
            "0.88", "--max-running-requests", "8")
    notes = [f for f in run(*argv).json()["findings"] if f["rule"] == "budget-approximate"]
    assert len(notes) == 1 and "0.5.14's steps" in notes[0]["message"]
    pristine = run("doctor", "--site-packages", releases.pristine("0.5.20"), *argv[3:])
    assert "budget-approximate" not in {f["rule"] for f in pristine.json()["findings"]}


@pytest.mark.integration
def test_version_reads_the_wheel_without_unpacking(model, tmp_path, monkeypatch):
    """--version V reads the files it needs from the cached wheel (a zip): the cache holds the
    wheel only afterwards, and the report is the one an installed tree of the same release gives."""
    site = releases.pristine("0.5.19")  # the tests' cache also holds the wheel this was made from
    wheel = next((releases.HOME / "wheels").glob("sglang-0.5.19-*.whl"))
    home = tmp_path / "home"
    (home / "wheels").mkdir(parents=True)
    (home / "wheels" / wheel.name).symlink_to(wheel)
    monkeypatch.setenv("PATCHKIT_HOME", str(home))
    argv = (*GPU, "--json", "--", "--model-path", model, "--mem-fraction-static", "0.88", "--max-running-requests", "8",
            "--speculative-algorithm", "NEXTN", "--speculative-draft-model-path", model)
    from_wheel = run("doctor", "--version", "0.5.19", *argv)
    assert from_wheel.exit_code == 0, from_wheel.stdout + from_wheel.stderr
    assert sorted(p.name for p in home.iterdir()) == ["wheels"], list(home.rglob("*"))[:5]
    assert [p.name for p in (home / "wheels").iterdir()] == [wheel.name]
    from_tree = run("doctor", "--site-packages", site, *argv)
    assert from_tree.exit_code == 0
    wheel_data, tree_data = from_wheel.json(), from_tree.json()
    assert wheel_data["sglang"]["path"] == str(home / "wheels" / wheel.name)
    assert wheel_data["budget"] == tree_data["budget"]
    # The same findings; a printed `patchkit apply` names the tree checked: --target V for the wheel.
    commands = [(w.pop("fix_command"), t.pop("fix_command"), w.pop("fix"), t.pop("fix"))
                for w, t in zip(wheel_data["findings"], tree_data["findings"])]
    assert wheel_data["findings"] == tree_data["findings"]
    for from_wheel_command, from_tree_command, _, _ in commands:
        if from_wheel_command:
            assert from_wheel_command[:2] == ["patchkit", "apply"] and from_wheel_command[-2:] == ["--target", "0.5.19"]
            assert from_tree_command[-2:] == ["--site-packages", str(site)]


LAUNCH_PATCH = '''
"""{pid}: a patch from outside patchkit that declares which launches need it."""

import libcst.matchers as m

from patchkit.authoring.edits import edit
from patchkit.authoring.launch_trigger import Trigger
from patchkit.authoring.patch import Patch
from patchkit.authoring.template import Snippet

FLAG = Snippet("PATCHKIT_LAUNCH_EXAMPLE = True  # patchkit {pid}\\n", blank_lines_before=1)


class Example(Patch):
    ID = "{pid}"
    TITLE = "An external patch with a launch trigger"
    RATIONALE = "Shows that doctor asks for any loaded patch a launch depends on."
    APPLIES_TO = ">=0.5.10"
    TARGETS = ("sglang/version.py",)
    MARKS = {{"sglang/version.py": ((None, FLAG),)}}
    LAUNCH = Trigger(level="error", hardware=("tp>1",), flags=("disable_custom_all_reduce",),
                     why="an example crash of TP launches without custom all-reduce")

    def is_fixed_upstream(self, path, tree):
        return False

    @edit(m.Module(), "the module")
    def add_flag(self, original_node, updated_node):
        return updated_node.with_changes(body=[*updated_node.body, *FLAG.fill()])
'''


@pytest.mark.integration
def test_a_patches_set_declaring_a_launch_trigger_is_asked_for(model, tmp_path):
    """`--patches DIR`: the doctor reads the LAUNCH declaration of every loaded patch, not a list of
    built-in ids; the launch the declaration names gets a patch-needed finding of its level."""
    folder = tmp_path / "pack"
    folder.mkdir()
    (folder / "launch_example.py").write_text(LAUNCH_PATCH.format(pid="launch-example"))
    site = releases.pristine("0.5.19")
    argv = ("--patches", folder, "doctor", "--site-packages", site, "--gpus", "2", "--gpu-memory", "80",
            "--gpu-free", "79", "--sm", "9.0", "--json", "--", "--model-path", model, "--mem-fraction-static", "0.88")
    hit = run(*argv, "--tp-size", "2", "--disable-custom-all-reduce")
    assert hit.exit_code == 1, hit.stdout + hit.stderr
    # The printed apply names the tree checked and the --patches set the patch comes from.
    apply = ["patchkit", "--patches", str(folder), "apply", "--only", "launch-example", "--site-packages", str(site)]
    needed = [f for f in hit.json()["findings"] if f["fix_command"] == apply]
    assert [f["level"] for f in needed] == ["error"] and "launch-example is pending" in needed[0]["message"]
    assert needed[0]["fix"] == " ".join(apply)
    miss = run(*argv, "--tp-size", "2")
    assert not [f for f in miss.json()["findings"] if f["fix_command"] == apply]



@pytest.mark.integration  # reads a real release's wheel: slow tier
@pytest.mark.parametrize("as_json", [False, True])
def test_version_with_python_on_a_fresh_home_reads_the_wheel_after_unpacking_it(model, tmp_path, monkeypatch, as_json):
    """--version V --python PY on a home with V's wheel and no pristine install of V: the doctor unpacks the wheel
    for PY's build, then reads the release on from the same wheel (it closed the process's one open zip of it: exit
    70, 'Attempt to use ZIP archive that was already closed'). PY here has no torch: the classes are not built, and
    the report says so."""
    import sys

    from testing.checkout import wheel_home

    home = wheel_home(tmp_path / "home", ("0.5.23",))  # V's wheel alone: no pristine install of it
    monkeypatch.setenv("PATCHKIT_HOME", str(home))
    result = run("doctor", "--version", "0.5.23", "--python", sys.executable, *GPU, *(("--json",) if as_json else ()),
                 "--", "--model-path", model, "--mem-fraction-static", "0.88")
    assert result.exit_code in (0, 1), result.stdout + result.stderr
    said = "\n".join(result.json()["budget"]["notes"]) if as_json else result.stdout
    assert f"the release's model classes could not be built in {sys.executable}" in said, said
    assert not (home / "releases").exists()  # nothing installed into the home: the wheel was unpacked elsewhere


@pytest.mark.integration  # reads a real release: slow tier
def test_a_relative_python_is_the_one_named_from_the_working_folder(model, monkeypatch):
    """--python given as a relative path names the interpreter from where doctor runs (the build's child runs in
    /: it was looked for there, 'No such file or directory')."""
    import sys
    from pathlib import Path

    interpreter = Path(sys.executable)
    monkeypatch.chdir(interpreter.parent.parent)
    result = run("doctor", "--site-packages", releases.pristine("0.5.23"), "--python",
                 f"{interpreter.parent.name}/{interpreter.name}", *GPU, "--json", "--", "--model-path", model)
    assert result.exit_code in (0, 1), result.stdout + result.stderr
    notes = "\n".join(result.json()["budget"]["notes"])
    assert "No module named 'torch'" in notes and "No such file" not in notes, notes


@pytest.mark.integration  # reads a real release: slow tier
def test_without_gpu_facts_the_budget_says_why_it_is_not_computed(model, monkeypatch):
    from patchkit.doctor import gpu

    monkeypatch.setattr(gpu, "_nvidia_smi", lambda argv: None)  # a machine without nvidia-smi
    site = releases.pristine("0.5.23")
    data = run("doctor", "--site-packages", site, "--json", "--", "--model-path", model).json()["budget"]
    why = "no GPU memory figure (no nvidia-smi; pass --gpu-memory and --gpu-free)"
    assert data["not_computed"] == why and data["kv_tokens"] is None
    text = run("doctor", "--site-packages", site, "--", "--model-path", model).stdout
    assert f"  note: budget not computed: {why}" in text.splitlines(), text
    assert run("doctor", "--site-packages", site, *GPU, "--json", "--", "--model-path", model).json()["budget"][
        "not_computed"] is None


@pytest.mark.integration  # reads a real release (testing.releases.pristine): slow tier
@pytest.mark.parametrize("server_args, why", [(None, "defines no --model-path flag"), (b"", "is missing"),
                                              (b"def add_cli_args(:\n", "is not Python")])
def test_a_release_whose_flags_cannot_be_read_is_exit_3_naming_what_is_wrong(model, release, server_args, why):
    """An SGLang tree whose flags cannot be read (0.5.20 pruned to patchkit's files: no arg_groups/fields/,
    which defines --model-path; its sglang/srt/server_args.py missing, or not Python after a bad hand edit)
    made every flag of a launch unknown: "the launch arguments have no --model-path (pass them after --)",
    exit 2, of a launch that has one. It is exit 3 (the SGLang checked cannot be read) naming the file or
    folder, one line."""
    rel = "sglang/srt/server_args.py"
    site = release("0.5.20")
    if server_args == b"":
        (site / rel).unlink()
    elif server_args:
        (site / rel).write_bytes(server_args)
    result = run("doctor", "--site-packages", site, *GPU, "--", "--model-path", model)
    assert result.exit_code == 3, (result.exit_code, result.stdout, result.stderr)
    line = result.stderr.strip()
    named = site / "sglang/srt/" if server_args is None else site / rel
    assert len(line.splitlines()) == 1 and f"{named}" in line and f"{why}" in line and "launch flags" in line, line
