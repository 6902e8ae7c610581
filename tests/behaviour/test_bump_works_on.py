"""`bump --python PY` imports what it calls done on V (issue 40, item 2): the set applied to a copy
of V, each changed module and SGLang's model registry imported on the CPU in that Python (here a
venv with the behaviour environment's packages and SGLang V0 installed). A diff that applies
cleanly but breaks that import is a conflict on its file and line, exit 1; `--continue` imports the
resolved files again. Each case built from real releases."""

from __future__ import annotations

import shutil
import venv
from pathlib import Path

import pytest

from testing import behaviour
from testing.checkout import wheel_home
from testing.cli import run
from testing.diffs import git_diff
from testing.releases import pristine

pytestmark = pytest.mark.behaviour

QWEN = "sglang/srt/models/qwen3_5.py"
IO = "sglang/srt/managers/io_struct.py"


def serving_python(folder: Path, version: str) -> Path:
    """A venv that serves SGLang `version`: the behaviour environment's packages and the release."""
    venv.EnvBuilder(with_pip=False).create(folder)
    site = next((folder / "lib").glob("python3*/site-packages"))
    deps = next((behaviour.python().parent.parent / "lib").glob("python3*/site-packages"))
    (site / "behaviour-deps.pth").write_text(f"{deps}\n")
    source = pristine(version)
    for entry in source.iterdir():
        if entry.name == "sglang" or entry.name.startswith("sglang-"):
            shutil.copytree(entry, site / entry.name)
    return folder / "bin" / "python"


def _diff(folder: Path, name: str, version: str, rel: str, old: bytes, new: bytes) -> None:
    before = (pristine(version) / rel).read_bytes()
    assert before.count(old) == 1
    folder.mkdir(exist_ok=True)
    (folder / name).write_bytes(git_diff({rel: before}, {rel: before.replace(old, new)}, prefix="python/"))


def _row(done, pid: str) -> dict:
    return next(row for row in done.json()["patches"] if row["id"] == pid)


def _line(path: Path, text: bytes) -> int:
    return path.read_bytes().split(b"\n").index(text) + 1


def test_a_model_class_v_registers_itself_is_a_conflict(tmp_path, monkeypatch):
    """Made on 0.5.16, where no model module registers Qwen3_5ForCausalLM / Qwen3_5MoeForCausalLM,
    a diff adds them to qwen3_5.py's EntryClass. On 0.5.17 it applies as it is, and compiles, but
    0.5.17's qwen3_5_text.py registers both: the model registry's import dies with "Duplicated model
    implementation" (every server). A conflict at each added EntryClass line (found without the
    import too), exit 1; `--continue` with the tree as it is checks it again (exit 1)."""
    entries = [line for path in (pristine("0.5.16") / "sglang/srt/models").glob("*.py")
               for line in path.read_bytes().splitlines() if line.startswith(b"EntryClass")]
    assert not any(b"Qwen3_5ForCausalLM," in line or b"Qwen3_5ForCausalLM]" in line for line in entries)
    monkeypatch.setenv("PATCHKIT_HOME", str(wheel_home(tmp_path / "home", ("0.5.16", "0.5.17"))))
    old = b"EntryClass = [Qwen3_5MoeForConditionalGeneration, Qwen3_5ForConditionalGeneration]\n"
    new = (b"EntryClass = [\n    Qwen3_5MoeForConditionalGeneration,\n    Qwen3_5ForConditionalGeneration,\n"
           b"    Qwen3_5MoeForCausalLM,\n    Qwen3_5ForCausalLM,\n]\n")
    _diff(tmp_path / "mine", "qwen3-5-text-entries.patch", "0.5.16", QWEN, old, new)
    python = serving_python(tmp_path / "venv", "0.5.16")
    out = tmp_path / "bump"
    done = run("--patches", tmp_path / "mine", "bump", "--from", "0.5.16", "--to", "0.5.17", "--python", python,
               "-o", out, "--json")
    assert done.exit_code == 1, done.stderr
    row = _row(done, "qwen3-5-text-entries")
    assert row["action"] == "conflicts" and not row["written"] and row["tree"] == "qwen3-5-text-entries.tree"
    tree = out / row["tree"] / QWEN
    lines = [_line(tree, b"    Qwen3_5MoeForCausalLM,"), _line(tree, b"    Qwen3_5ForCausalLM,")]
    assert _duplicates(row) == [f"{QWEN}:{line}" for line in lines]
    assert "importing 1 of them from SGLang 0.5.17's own files, to compare" in done.stderr  # the import failed too
    again = run("bump", "--continue", out, "--json")
    assert again.exit_code == 1, again.stderr
    assert [c["name"] for c in _row(again, "qwen3-5-text-entries")["conflicts"]] == [f"{QWEN}:{line}" for line in lines]


def _duplicates(row: dict) -> list[str]:
    """The conflicts of a row that adds Qwen3_5MoeForCausalLM and Qwen3_5ForCausalLM to qwen3_5.py's
    EntryClass on 0.5.17: found statically, each at its line (works_on's registry check), and the
    registry's import failing at the first of them ("Duplicated model implementation for
    Qwen3_5MoeForCausalLM") is not said a second time there."""
    found = [(c["name"], c["detail"]) for c in row["conflicts"]]
    assert [detail for _, detail in found] == [
        f"breaks on 0.5.17: registers the model class {name}, which sglang/srt/models/qwen3_5_text.py:208 registers "
        f"too: SGLang's model registry raises \"Duplicated model implementation for {name}\" when it is imported "
        "(every server)" for name in ("Qwen3_5MoeForCausalLM", "Qwen3_5ForCausalLM")], found
    return [name for name, _ in found]


def test_a_dataclass_on_a_msgspec_base_is_a_conflict_until_fixed(tmp_path, monkeypatch):
    """Made on 0.5.13, where io_struct's BaseReq is a dataclass base, a diff adds `@dataclass class
    PostProcessWeightsReqInput(BaseReq)` (and its output). On 0.5.15.post1 BaseReq is a
    msgspec.Struct: the new classes are transplanted, compile, and importing io_struct raises
    `AttributeError: readonly attribute`. A conflict on io_struct.py (exit 1); fixed in the tree as
    0.5.15.post1 writes its requests (`class ...(BaseReq, kw_only=True)`), `--continue` imports it
    and finishes (exit 0)."""
    monkeypatch.setenv("PATCHKIT_HOME", str(wheel_home(tmp_path / "home", ("0.5.13", "0.5.15.post1"))))
    anchor = b"@dataclass\nclass UpdateWeightsFromIPCReqOutput(BaseReq):\n    success: bool\n    message: str\n"
    added = (b"\n\n@dataclass\nclass PostProcessWeightsReqInput(BaseReq):\n"
             b"    # Whether to restore the weights before loading new ones\n"
             b"    restore_weights_before_load: bool = False\n"
             b"    # Whether to post-process the quantized weights\n"
             b"    post_process_quantization: bool = False\n"
             b"\n\n@dataclass\nclass PostProcessWeightsReqOutput(BaseReq):\n    success: bool\n    message: str\n")
    _diff(tmp_path / "mine", "post-process-weights.patch", "0.5.13", IO, anchor, anchor + added)
    python = serving_python(tmp_path / "venv", "0.5.13")
    out = tmp_path / "bump"
    done = run("--patches", tmp_path / "mine", "bump", "--from", "0.5.13", "--to", "0.5.15.post1", "--python", python,
               "-o", out, "--json")
    assert done.exit_code == 1, done.stderr
    row = _row(done, "post-process-weights")
    assert row["action"] == "conflicts" and not row["written"], row
    tree = out / row["tree"] / IO
    found = {(c["name"], c["detail"]) for c in row["conflicts"]}
    line = _line(tree, b"class PostProcessWeightsReqInput(BaseReq):") - 1  # its `@dataclass`, where it raises
    assert (f"{IO}:{line}", "breaks on 0.5.15.post1: importing sglang.srt.managers.io_struct raises AttributeError: "
                            "readonly attribute") in found, found

    text = tree.read_bytes()
    for name in (b"PostProcessWeightsReqInput", b"PostProcessWeightsReqOutput"):
        text = text.replace(b"@dataclass\nclass " + name + b"(BaseReq):", b"class " + name + b"(BaseReq, kw_only=True):")
    tree.write_bytes(text)
    finished = run("bump", "--continue", out, "--json")
    assert finished.exit_code == 0, finished.stderr
    assert _row(finished, "post-process-weights")["action"] == "rebased"
    assert b"+class PostProcessWeightsReqInput(BaseReq, kw_only=True):" in (out / "post-process-weights.patch").read_bytes()


def test_a_duplicated_model_is_blamed_on_the_diff_that_registers_it(tmp_path, monkeypatch):
    """The registry's "Duplicated model implementation for Qwen3_5MoeForCausalLM" has no frame in a
    changed file; it is placed on the line the set added that names the class, never on another
    diff's added line that only shares a plain word of the message ("model"). As a real 27-diff
    stack moved 0.5.16 -> 0.5.17 had it: a comment added to gemma4_mm.py's video path (its diff
    first by name) mentioning "the model", and qwen3_5.py's EntryClass extended. The second diff is
    the conflict, at its EntryClass lines; the first carries over."""
    monkeypatch.setenv("PATCHKIT_HOME", str(wheel_home(tmp_path / "home", ("0.5.16", "0.5.17"))))
    gemma = "sglang/srt/models/gemma4_mm.py"
    video = b"    def get_video_feature(self, items: List[MultimodalDataItem]) -> torch.Tensor:\n"
    note = b"        # One frame at a time keeps the vision tower's activations small next to the model.\n"
    _diff(tmp_path / "mine", "026-gemma4-video-note.patch", "0.5.16", gemma, video, video + note)
    old = b"EntryClass = [Qwen3_5MoeForConditionalGeneration, Qwen3_5ForConditionalGeneration]\n"
    new = (b"EntryClass = [\n    Qwen3_5MoeForConditionalGeneration,\n    Qwen3_5ForConditionalGeneration,\n"
           b"    Qwen3_5MoeForCausalLM,\n    Qwen3_5ForCausalLM,\n]\n")
    _diff(tmp_path / "mine", "035-qwen3-5-text-entries.patch", "0.5.16", QWEN, old, new)
    python = serving_python(tmp_path / "venv", "0.5.16")
    out = tmp_path / "bump"
    done = run("--patches", tmp_path / "mine", "bump", "--from", "0.5.16", "--to", "0.5.17", "--python", python,
               "-o", out, "--json")
    assert done.exit_code == 1, done.stderr
    assert _row(done, "026-gemma4-video-note")["action"] == "carries over", _row(done, "026-gemma4-video-note")
    row = _row(done, "035-qwen3-5-text-entries")
    assert row["action"] == "conflicts" and not row["written"], row
    line = _line(out / row["tree"] / QWEN, b"    Qwen3_5MoeForCausalLM,")
    assert _duplicates(row) == [f"{QWEN}:{line}", f"{QWEN}:{line + 1}"]
