"""`bump` checks on V what it calls done (issue 40, item 2): a diff that carries over or is rebased,
but breaks on V (a name V's module no longer imports, a model class V registers itself, a class
V's base no longer allows), is a conflict naming the file and line, exit 1, with its tree to fix;
`--continue` runs the same checks on the resolved files. Each case built from real releases."""

from __future__ import annotations

import ast
import shlex
from pathlib import Path

import pytest

from testing.checkout import wheel_home
from testing.cli import run
from testing.diffs import git_diff
from testing.releases import pristine

pytestmark = pytest.mark.integration

GLM = "sglang/srt/models/glm4v_moe.py"
LOAD = b"    def load_weights(self, weights: Iterable[Tuple[str, torch.Tensor]], is_nextn=False):\n"


def _one_diff(folder: Path, name: str, version: str, rel: str, after: bytes) -> Path:
    before = (pristine(version) / rel).read_bytes()
    assert after != before
    folder.mkdir()
    path = folder / name
    path.write_bytes(git_diff({rel: before}, {rel: after}, prefix="python/"))
    return path


def _line_of(version: str, rel: str, text: bytes) -> int:
    """The line (1-based) of a release's file that is `text`."""
    return (pristine(version) / rel).read_bytes().split(b"\n").index(text) + 1


def _rows(done) -> dict:
    return {row["id"]: row for row in done.json()["patches"]}


@pytest.mark.slow
def test_a_unit_calling_a_name_v_no_longer_imports_is_a_conflict(tmp_path, monkeypatch):
    """A change to `Glm4vMoeForConditionalGeneration.load_weights` made on 0.5.15.post1 reads
    `get_global_server_args()`, which 0.5.15.post1's glm4v_moe.py imports and 0.5.16's no longer
    does (it has `get_server_args`): the diff applies on 0.5.16 and compiles, and would fail at model
    init with a NameError. It is a conflict at that line (exit 1), its tree written; fixed there with
    0.5.16's name, `--continue` finishes it (exit 0)."""
    monkeypatch.setenv("PATCHKIT_HOME", str(wheel_home(tmp_path / "home", ("0.5.15.post1", "0.5.16"))))
    old = (pristine("0.5.15.post1") / GLM).read_bytes()
    assert b"from sglang.srt.server_args import get_global_server_args\n" in old
    assert b"get_global_server_args" not in (pristine("0.5.16") / GLM).read_bytes()
    added = b"        self.use_data_parallel = get_global_server_args().mm_enable_dp_encoder\n"
    _one_diff(tmp_path / "mine", "glm-dp-encoder.patch", "0.5.15.post1", GLM, old.replace(LOAD, LOAD + added, 1))
    out = tmp_path / "my bump"  # a space: the command the detail names is pasteable as printed
    done = run("--patches", tmp_path / "mine", "bump", "--from", "0.5.15.post1", "--to", "0.5.16", "-o", out,
               "--json")
    assert done.exit_code == 1, done.stderr
    row = _rows(done)["glm-dp-encoder"]
    assert row["detail"].startswith("does not work on SGLang 0.5.16: fix it in glm-dp-encoder.tree, then run `")
    assert shlex.split(row["detail"].split("`")[1]) == ["patchkit", "bump", "--continue", str(out)], row["detail"]
    tree = out / "glm-dp-encoder.tree" / GLM
    assert row["action"] == "conflicts" and row["tree"] == "glm-dp-encoder.tree" and not row["written"]
    line = tree.read_bytes().split(b"\n").index(added.rstrip(b"\n")) + 1
    (conflict,) = row["conflicts"]
    assert conflict["name"] == f"{GLM}:{line}", conflict
    assert conflict["detail"] == "breaks on 0.5.16: undefined name 'get_global_server_args' (a NameError when it runs)"
    assert not (out / "glm-dp-encoder.patch").exists() and not done.json()["complete"]
    report = (out / "REPORT.md").read_text()
    assert f"`{GLM}:{line}`: breaks on 0.5.16" in report and "fix what each `breaks on 0.5.16` conflict names" in report

    tree.write_bytes(tree.read_bytes().replace(b"get_global_server_args()", b"get_server_args()"))
    finished = run("bump", "--continue", out, "--json")
    assert finished.exit_code == 0, finished.stderr
    assert _rows(finished)["glm-dp-encoder"]["action"] == "rebased"
    assert b"+        self.use_data_parallel = get_server_args().mm_enable_dp_encoder" in \
        (out / "glm-dp-encoder.patch").read_bytes()


QWEN = "sglang/srt/models/qwen3_5.py"
ENTRIES = b"EntryClass = [Qwen3_5MoeForConditionalGeneration, Qwen3_5ForConditionalGeneration]\n"
WITH_CAUSAL_LM = (b"EntryClass = [\n    Qwen3_5MoeForConditionalGeneration,\n    Qwen3_5MoeForCausalLM,\n"
                  b"    Qwen3_5ForConditionalGeneration,\n    Qwen3_5ForCausalLM,\n]\n")  # as the field's patch writes it


def test_a_model_class_v_registers_itself_is_a_conflict_without_importing(tmp_path, monkeypatch):
    """Made on 0.5.16, a diff adds Qwen3_5MoeForCausalLM and Qwen3_5ForCausalLM to qwen3_5.py's
    EntryClass (a real stack's half-upstreamed patch): on 0.5.17 it applies as it is, and
    qwen3_5_text.py registers both, so SGLang's model registry dies at import with "Duplicated model
    implementation". Without --python (nothing imported) it is a conflict at each added line naming
    the other registration, exit 1, and `--continue` finds it again; bumped onto 0.5.16, where no
    module registers them, the same diff carries over (exit 0)."""
    monkeypatch.setenv("PATCHKIT_HOME", str(wheel_home(tmp_path / "home", ("0.5.15.post1", "0.5.16", "0.5.17"))))
    old = (pristine("0.5.16") / QWEN).read_bytes()
    _one_diff(tmp_path / "mine", "qwen3-5-causal-lm.patch", "0.5.16", QWEN, old.replace(ENTRIES, WITH_CAUSAL_LM, 1))
    text = "sglang/srt/models/qwen3_5_text.py"
    native = _line_of("0.5.17", text, b"EntryClass = [Qwen3_5MoeForCausalLM, Qwen3_5ForCausalLM]")
    out = tmp_path / "bump"
    done = run("--patches", tmp_path / "mine", "bump", "--from", "0.5.16", "--to", "0.5.17", "-o", out, "--json")
    assert done.exit_code == 1, done.stderr
    row = _rows(done)["qwen3-5-causal-lm"]
    assert row["action"] == "conflicts" and not row["written"] and row["tree"] == "qwen3-5-causal-lm.tree", row
    lines = (out / row["tree"] / QWEN).read_bytes().split(b"\n")
    expected = [(f"{QWEN}:{lines.index(b'    ' + name.encode() + b',') + 1}",
                 f"breaks on 0.5.17: registers the model class {name}, which {text}:{native} registers too: SGLang's "
                 f"model registry raises \"Duplicated model implementation for {name}\" when it is imported (every "
                 "server)") for name in ("Qwen3_5MoeForCausalLM", "Qwen3_5ForCausalLM")]
    assert [(c["name"], c["detail"]) for c in row["conflicts"]] == expected
    again = run("bump", "--continue", out, "--json")
    assert again.exit_code == 1, again.stderr
    assert [(c["name"], c["detail"]) for c in _rows(again)["qwen3-5-causal-lm"]["conflicts"]] == expected

    older = run("--patches", tmp_path / "mine", "bump", "--from", "0.5.15.post1", "--to", "0.5.16", "-o",
                tmp_path / "bump-0.5.16", "--json")
    assert older.exit_code == 0, older.stderr
    assert _rows(older)["qwen3-5-causal-lm"]["action"] == "carries over"


def test_a_name_v_itself_leaves_undefined_is_not_blamed_on_the_patch(tmp_path, monkeypatch):
    """Only what the diff brings counts: a comment put at the top of a file that pyflakes already finds
    an undefined name in on 0.5.23 carries over from 0.5.17 (exit 0)."""
    from patchkit.engine import works_on

    monkeypatch.setenv("PATCHKIT_HOME", str(wheel_home(tmp_path / "home", ("0.5.17", "0.5.23"))))
    rel = next(rel for rel in _same_start("0.5.17", "0.5.23")
               if works_on.undefined(rel, ast.parse((pristine("0.5.23") / rel).read_bytes())))
    old = (pristine("0.5.17") / rel).read_bytes()
    _one_diff(tmp_path / "mine", "comment.patch", "0.5.17", rel, b"# a local note\n" + old)
    out = tmp_path / "bump"
    done = run("--patches", tmp_path / "mine", "bump", "--from", "0.5.17", "--to", "0.5.23", "-o", out, "--json")
    assert done.exit_code == 0, done.stderr
    assert _rows(done)["comment"]["action"] == "carries over", rel


def test_an_import_from_a_folder_without_init_py_is_an_import(tmp_path, monkeypatch):
    """sglang/srt/weight_sync/ has no __init__.py on any release (a namespace package: its modules
    import). A change importing one of them (`from sglang.srt.weight_sync import tensor_bucket`, as a
    real RL stack's weight_updater.py does with a module of its own there) carries over from 0.5.16
    to 0.5.17 (exit 0); it read "0.5.17 has no module sglang.srt.weight_sync". A name no module
    there defines is still an ImportError (exit 1)."""
    monkeypatch.setenv("PATCHKIT_HOME", str(wheel_home(tmp_path / "home", ("0.5.16", "0.5.17"))))
    rel = "sglang/srt/weight_sync/utils.py"
    assert not (pristine("0.5.17") / "sglang/srt/weight_sync/__init__.py").exists()
    old = (pristine("0.5.16") / rel).read_bytes()
    assert old == (pristine("0.5.17") / rel).read_bytes()
    line = b"from sglang.srt.utils import MultiprocessingSerializer\n"
    for name, imported, code in (("bucket", b"tensor_bucket", 0), ("nothing", b"no_such_module", 1)):
        _one_diff(tmp_path / name, f"{name}.patch", "0.5.16", rel,
                  old.replace(line, line + b"from sglang.srt.weight_sync import " + imported + b"\n", 1))
        done = run("--patches", tmp_path / name, "bump", "--from", "0.5.16", "--to", "0.5.17", "-o",
                   tmp_path / f"{name}-bump", "--json")
        assert done.exit_code == code, done.stderr
        row = _rows(done)[name]
        assert row["action"] == ("carries over" if code == 0 else "conflicts"), row
    assert [c["detail"] for c in row["conflicts"]] == [  # the folder is a package there: it is the name it lacks
        "breaks on 0.5.17: `from sglang.srt.weight_sync import no_such_module`: sglang.srt.weight_sync defines no "
        "no_such_module on 0.5.17 (an ImportError)"]


def _same_start(first: str, second: str) -> list[str]:
    """Python files under sglang/srt/ whose first 3 lines are the same in both releases (a change at
    the top applies as it is), small ones first."""
    root = pristine(first)
    found = []
    for path in sorted((root / "sglang" / "srt").rglob("*.py"), key=lambda p: p.stat().st_size):
        rel = path.relative_to(root).as_posix()
        other = pristine(second) / rel
        head = path.read_bytes().split(b"\n")[:3]
        if other.is_file() and len(head) == 3 and other.read_bytes().split(b"\n")[:3] == head:
            found.append(rel)
    return found


def test_a_name_the_diff_takes_away_that_a_module_new_in_v_imports_is_a_conflict(tmp_path, monkeypatch):
    """Made on 0.5.17, a diff renames qwen3_5.py's helper `_linear_accepts_fp8_tuple` (no other
    module of 0.5.17 imports it): on 0.5.18 it applies as it is, and 0.5.18's new interns2_mobius.py
    imports the helper by that name, so that module dies with an ImportError (checked in the
    behaviour venv). bump said "carries over", exit 0. It is a conflict naming the importer's line,
    exit 1; the helper kept under its old name too in the tree, `--continue` finishes it."""
    monkeypatch.setenv("PATCHKIT_HOME", str(wheel_home(tmp_path / "home", ("0.5.17", "0.5.18"))))
    old = (pristine("0.5.17") / QWEN).read_bytes()
    _one_diff(tmp_path / "mine", "rename-helper.patch", "0.5.17", QWEN,
              old.replace(b"_linear_accepts_fp8_tuple", b"_accepts_fp8_tuple"))
    importer = "sglang/srt/models/interns2_mobius.py"
    line = _line_of("0.5.18", importer, b"from sglang.srt.models.qwen3_5 import (")
    out = tmp_path / "bump"
    done = run("--patches", tmp_path / "mine", "bump", "--from", "0.5.17", "--to", "0.5.18", "-o", out, "--json")
    assert done.exit_code == 1, done.stderr
    row = _rows(done)["rename-helper"]
    assert row["action"] == "conflicts" and not row["written"], row
    assert [(c["name"], c["detail"]) for c in row["conflicts"]] == [(
        f"{QWEN}:1", f"breaks on 0.5.18: takes _linear_accepts_fp8_tuple from sglang.srt.models.qwen3_5, which "
                     f"{importer}:{line} imports there (an ImportError when it is imported)")]
    tree = out / row["tree"] / QWEN
    tree.write_bytes(tree.read_bytes() + b"\n_linear_accepts_fp8_tuple = _accepts_fp8_tuple\n")
    finished = run("bump", "--continue", out, "--json")
    assert finished.exit_code == 0, finished.stderr
    assert _rows(finished)["rename-helper"]["action"] == "rebased"
