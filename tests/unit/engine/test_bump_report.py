"""engine/bump.py's report as data, offline: the record `--continue` reads back is the plan that
was written, and REPORT.md says each part of it (issue 30)."""

from __future__ import annotations

from pathlib import Path

from patchkit.base import confined
from patchkit.engine import bump, bump_continue
from patchkit.engine.bump import Bump, Conflict, LaunchChange, PatchRow

ROWS = (
    PatchRow("mtp-layer-detection", "module", "applies", "upstream-fixed", bump.DROP,
             detail="upstream's fix is narrower than this patch: depth 1", upstream=("sglang 0.5.18: ...",),
             evidence=("sglang/srt/configs/model_config.py:ModelConfig._config_draft_model",)),
    PatchRow("fix", "diff", "applies", "broken", bump.CONFLICTS, counts={"conflict": 1, "transplanted": 2},
             conflicts=(Conflict("sglang/srt/a.py", "A.f", "changed here and by the diff in the same lines"),),
             tree="fix.tree"),
    PatchRow("fix-extra", "diff", "applies", "broken", bump.CONFLICTS, waits_on=("fix",),
             conflicts=(Conflict("sglang/srt/a.py", "<stack>", "stacked on fix"),)),
    PatchRow("keep", "diff", "applies", "applies", bump.CARRIES, written="keep.patch"),
)
# What plan keeps of each diff a row waits on, or that waits (`--continue` re-makes them from it).
INPUTS = {"fix": ("fix.patch", b"\x00bytes\xff"), "fix-extra": ("fix-extra.patch", b"diff\n")}
LAUNCH = LaunchChange(line=("--model-path", "/m", "--cuda-graph-max-bs", "8"),
                      renamed=(("--cuda-graph-max-bs", "--cuda-graph-max-bs-decode"),),
                      appeared=("error flag-removed: --cuda-graph-max-bs is not a flag",),
                      changed=(("info a: 0.834", "info a: 0.840"),),
                      budget=(("KV tokens", "315,306", "310,657"),), errors=(0, 1))


def test_the_record_reads_back_as_written(tmp_path):
    planned = Bump("0.5.17", "0.5.23", tmp_path / "out", ROWS, (LAUNCH,), ("a note",),
                   files={"keep.patch": b"diff\n", "fix.tree/sglang/srt/a.py": b"x = 1\n"},
                   inputs=INPUTS)
    assert bump.write(planned) == ["fix.tree/sglang/srt/a.py", "keep.patch"]
    back = bump.read(tmp_path / "out")
    assert (back.first, back.to, back.patches, back.launches, back.notes) == \
        (planned.first, planned.to, planned.patches, planned.launches, planned.notes)
    assert back.inputs == planned.inputs and back.blocked
    assert (tmp_path / "out" / bump.REPORT).read_text() == planned.markdown()


def test_report_md_says_every_part():
    text = Bump("0.5.17", "0.5.23", Path("out"), ROWS, (LAUNCH,)).markdown()
    assert "| `mtp-layer-detection` | applies | upstream-fixed | drop |" in text
    assert "| `fix` | applies | broken | conflicts (1 conflict, 2 transplanted) |" in text
    assert "- `fix`: `sglang/srt/a.py:A.f`: changed here and by the diff in the same lines" in text
    assert "  - evidence: sglang/srt/configs/model_config.py:ModelConfig._config_draft_model" in text
    assert "  - note: upstream's fix is narrower than this patch: depth 1" in text
    assert "- renamed on 0.5.23: `--cuda-graph-max-bs` -> `--cuda-graph-max-bs-decode`" in text
    assert "| KV tokens | 315,306 | 310,657 |" in text
    assert "`patchkit bump --continue out`" in text
    assert ("`patchkit --patches out image build --base lmsysorg/sglang:v0.5.23 --target 0.5.23 "
            "-t sglang:v0.5.23-patched --allow-incomplete`") in text  # unfinished: issue 40.1


def test_to_finish_is_pasteable_as_printed(tmp_path):
    """issue 40 item 9: "To finish" said `image build --target V ...` (a literal `...`, no --base nor
    -t, both required) and `apply` without the tree the bump was given; a folder with a space in
    its name came unquoted. Each command is now whole, quoted for a shell, and the tree option is
    read back from the record by `--continue`."""
    import shlex

    folder = tmp_path / "my bump"
    planned = Bump("0.5.17", "0.5.23", folder, ROWS, tree=("--site-packages", "/srv/site packages"),
                   files={"keep.patch": b"diff\n", "fix.tree/sglang/srt/a.py": b"x = 1\n"}, inputs=INPUTS)
    bump.write(planned)
    steps = bump.read(folder).next_steps()
    assert steps == planned.next_steps()
    commands = steps[-1].split("`")[1::2]  # unfinished: both with --allow-incomplete (issue 40.1)
    assert all("..." not in command for command in commands)
    image, apply = (shlex.split(command) for command in commands)
    assert apply == ["patchkit", "--patches", str(folder), "apply", "--site-packages", "/srv/site packages",
                     "--allow-incomplete"]
    assert image[:4] == ["patchkit", "--patches", str(folder), "image"]
    assert image[4:] == ["build", "--base", "lmsysorg/sglang:v0.5.23", "--target", "0.5.23",
                         "-t", "sglang:v0.5.23-patched", "--allow-incomplete"]  # image build's required options
    # The step to resolve and continue: `bump --continue DIR` with DIR one word, as the shell reads it.
    (resolve,) = [step for step in steps if step.startswith("resolve the")]
    assert shlex.split(resolve.split("`")[1]) == ["patchkit", "bump", "--continue", str(folder)]


def test_a_folder_of_other_files_is_refused_and_left_as_it_was(tmp_path):
    import pytest

    from patchkit.base.errors import UsageError

    (tmp_path / "mine.txt").write_text("mine")
    with pytest.raises(UsageError, match="not a new or empty folder"):
        bump.write(Bump("0.5.17", "0.5.23", tmp_path, ROWS, files={"keep.patch": b"x"}))
    assert [p.name for p in tmp_path.iterdir()] == ["mine.txt"]


def test_a_read_only_folder_is_an_environment_failure_and_leaves_nothing(tmp_path, monkeypatch):
    """EROFS injected where the check writes its probe file: exit 6's error, the folder not left made."""
    import errno
    import os
    import tempfile

    import pytest

    from patchkit.base.errors import EnvironmentFailure

    def read_only(*args, **kwargs):
        raise OSError(errno.EROFS, "Read-only file system")

    real_open = os.open

    def read_only_tmpfile(path, flags, *args, **kwargs):
        if flags & os.O_TMPFILE == os.O_TMPFILE:
            read_only()
        return real_open(path, flags, *args, **kwargs)

    monkeypatch.setattr(tempfile, "mkstemp", read_only)
    monkeypatch.setattr(os, "open", read_only_tmpfile)
    with pytest.raises(EnvironmentFailure, match="cannot make a folder there and write in it"):
        bump.check_folder(tmp_path / "new" / "out")
    assert not (tmp_path / "new").exists()


def test_the_left_out_files_are_in_the_report_and_the_record(tmp_path):
    left = ("/set/truncated.patch: line 127: the diff ends inside the hunk of line 53",)
    planned = Bump("0.5.17", "0.5.23", tmp_path / "out", ROWS[3:], left_out=left, files={"keep.patch": b"diff\n"})
    assert planned.to_dict()["complete"] is False and planned.to_dict()["left_out"] == list(left)
    bump.write(planned)
    assert bump.read(tmp_path / "out").left_out == left
    text = (tmp_path / "out" / bump.REPORT).read_text()
    assert f"## Left out (cannot be loaded; not in DIR)\n\n- {left[0]}" in text


class _Release:
    """V's files for `resume`: none (the diffs below create theirs)."""

    version = "0.5.23"

    def read(self, rel: str) -> bytes | None:
        return None

    def python_files(self) -> list[str]:
        return []

    def package_files(self) -> list[str]:
        return []


def test_continue_refuses_a_resolution_that_does_not_compile(tmp_path):
    out = tmp_path / "out"
    diff = b"diff --git a/sglang/x.py b/sglang/x.py\nnew file mode 100644\n--- /dev/null\n+++ b/sglang/x.py\n" \
           b"@@ -0,0 +1,2 @@\n+x = 1\n+def def f():\n"
    row = PatchRow("keep", "diff", "applies", "applies", bump.CARRIES, written="keep.patch")
    bump.write(Bump("0.5.17", "0.5.23", out, (row,), files={"keep.patch": diff}))
    done = bump.resume(bump.read(out), _Release(), lambda line: None)  # type: ignore[arg-type]
    assert done.blocked and "keep.patch" not in done.files
    (found,) = done.patches
    assert found.action == bump.CONFLICTS and [c.name for c in found.conflicts] == ["sglang/x.py:2"]
    # it had no tree (it carried over): one is written to fix it in, V's file with the diff applied
    assert found.tree == "keep.tree" and done.files["keep.tree/sglang/x.py"] == b"x = 1\ndef def f():\n"


def _tree_of(folder: Path) -> dict[str, bytes]:
    return {p.relative_to(folder).as_posix(): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def test_a_new_plan_replaces_the_earlier_outputs_and_a_failure_leaves_them(tmp_path, monkeypatch):
    """Written again into its DIR, a bump removes only what the earlier record names (the user's file
    stays); a write failing half-way (injected) leaves the earlier folder byte for byte."""
    import pytest

    out = tmp_path / "out"
    bump.write(Bump("0.5.17", "0.5.23", out, ROWS, files={"keep.patch": b"old\n", "fix.tree/sglang/srt/a.py": b"x\n"},
                    inputs=INPUTS))
    (out / "notes.txt").write_text("mine")
    earlier = _tree_of(out)
    calls = []

    def failing(root, rel, data, mode=0o644):
        calls.append(rel)
        if len(calls) == 2:
            raise OSError(28, "No space left on device")
        return real(root, rel, data, mode)

    real = confined.write
    monkeypatch.setattr(confined, "write", failing)
    again = Bump("0.5.17", "0.5.16", out, ROWS[3:], files={"keep.patch": b"new\n", "other.patch": b"o\n"})
    with pytest.raises(OSError, match="No space"):
        bump.write(again)
    assert len(calls) == 2 and _tree_of(out) == earlier
    monkeypatch.setattr(confined, "write", real)
    bump.write(again)
    assert sorted(_tree_of(out)) == [bump.RECORD, bump.REPORT, "keep.patch", "notes.txt", "other.patch"]
    assert (out / "keep.patch").read_bytes() == b"new\n" and not (out / "fix.tree").exists()


def test_continue_names_a_written_diff_deleted_from_dir(tmp_path):
    import pytest

    from patchkit.base.errors import UsageError

    out = tmp_path / "out"
    row = PatchRow("keep", "diff", "applies", "applies", bump.CARRIES, written="keep.patch")
    bump.write(Bump("0.5.17", "0.5.23", out, (row,), files={"keep.patch": b"diff\n"}))
    (out / "keep.patch").unlink()
    with pytest.raises(UsageError, match="keep.patch, which the bump wrote there, is gone"):
        bump.resume(bump.read(out), _Release(), lambda line: None)  # type: ignore[arg-type]


def _remade_when_rebase_raises(monkeypatch, error: Exception) -> PatchRow:
    """The stacked diff of ROWS re-made (bump --continue) with the rebase raising `error`."""
    from types import SimpleNamespace

    from patchkit.diffs import rebase as rebasing

    diff = (b"--- a/sglang/srt/a.py\n+++ b/sglang/srt/a.py\n@@ -1 +1 @@\n-x = 1\n+x = 2\n")
    planned = Bump("0.5.17", "0.5.23", Path("out"), ROWS,
                   inputs={"fix": ("fix.patch", diff), "fix-extra": ("fix-extra.patch", diff)})

    def raising(*args, **kwargs):
        raise error

    monkeypatch.setattr(rebasing, "rebase", raising)
    to = SimpleNamespace(version="0.5.23", python_files=(), package_files=())
    return bump_continue._remake(ROWS[2], planned, lambda rel: None, to, {})


def test_a_remade_diff_that_cannot_be_rebased_fails_and_is_never_a_drop(monkeypatch):
    from patchkit.base.errors import PlanError

    row = _remade_when_rebase_raises(monkeypatch, PlanError("fix-extra.patch: line 3: a hunk header is corrupt"))
    assert (row.action, row.detail) == (bump.FAILED, "fix-extra.patch: line 3: a hunk header is corrupt")
    assert row.on_to != "upstream-fixed" and not row.evidence


def test_a_remade_diff_whose_change_v_has_is_a_drop(monkeypatch):
    from patchkit.diffs.rebase import AlreadyUpstream

    row = _remade_when_rebase_raises(monkeypatch, AlreadyUpstream("fix-extra.patch: SGLang 0.5.23 already has the change"))
    assert (row.action, row.on_to) == (bump.DROP, "upstream-fixed")
    assert row.evidence == ("fix-extra.patch: SGLang 0.5.23 already has the change",)


def test_a_launch_whose_budget_is_not_compared_says_why_and_reads_back(tmp_path):
    """Without GPU facts doctor computes no budget on either release: REPORT.md said '- no change' with no budget
    table and no word of why; the reason is one line there and in the record (read back by --continue)."""
    why = "no GPU memory figure (no nvidia-smi; pass --gpu-memory and --gpu-free)"
    launch = LaunchChange(line=("--model-path", "/m"), budget_note=why)
    planned = Bump("0.5.17", "0.5.23", tmp_path / "out", ROWS[3:], (launch,))
    assert f"- budget not compared: {why}" in planned.markdown().splitlines()
    assert "- no change" not in planned.markdown()
    assert planned.to_dict()["launches"][0]["budget_note"] == why
    bump.write(planned)
    assert bump.read(tmp_path / "out").launches == (launch,)


def test_json_names_what_keeps_the_set_from_being_complete():
    """complete: false names its cause: the patches in conflict or failed (blocked) or the files left out; a failed
    row has no conflict, so complete was false beside left_out [] and conflicts [] with nothing to say why."""
    failed = PatchRow("broken", "diff", "applies", "broken", bump.FAILED, detail="a hunk header is corrupt")
    for rows, blocked in ((ROWS, ["fix", "fix-extra"]), ((failed, ROWS[3]), ["broken"]), (ROWS[3:], [])):
        data = Bump("0.5.17", "0.5.23", Path("out"), rows).to_dict()
        assert data["blocked"] == blocked
        assert data["complete"] == (not data["blocked"] and not data["left_out"])


def test_an_unfinished_bump_offers_continue_and_never_a_command_its_folder_refuses():
    """issue 40.1: an unfinished bump's next steps offered `--patches DIR apply` and `image build`,
    which that folder then refuses (exit 1). While unfinished the step is to finish it (`bump
    --continue DIR`, or the bump again for what failed), and apply/image come only with
    --allow-incomplete, naming what they leave out; a finished bump offers them plainly."""
    failed = PatchRow("broken", "diff", "applies", "broken", bump.FAILED, detail="a hunk header is corrupt")
    conflicted = Bump("0.5.17", "0.5.23", Path("out"), ROWS).next_steps()
    assert "`patchkit bump --continue out`" in conflicted[0]
    for steps, lacking in ((conflicted, "fix, fix-extra"),
                           (Bump("0.5.17", "0.5.23", Path("out"), (failed, ROWS[3])).next_steps(), "broken"),
                           (Bump("0.5.17", "0.5.23", Path("out"), ROWS[3:], left_out=("x.diff: bad",)).next_steps(),
                            "x.diff")):
        commands = [command for step in steps for command in step.split("`")[1::2]
                    if command.startswith("patchkit --patches")]
        assert len(commands) == 2 and all(command.endswith(" --allow-incomplete") for command in commands), steps
        assert f"leaving out {lacking} (--allow-incomplete)" in steps[-1], steps
    assert "run this bump again" in Bump("0.5.17", "0.5.23", Path("out"), (failed,)).next_steps()[0]
    finished = Bump("0.5.17", "0.5.23", Path("out"), ROWS[3:]).next_steps()
    assert [step.split("`")[1] for step in finished] == [
        "patchkit --patches out image build --base lmsysorg/sglang:v0.5.23 --target 0.5.23 -t sglang:v0.5.23-patched",
        "patchkit --patches out apply"]


def test_an_unfinished_bump_says_the_order_of_the_diffs_written_so_far():
    planned = Bump("0.5.17", "0.5.23", Path("out"), ROWS)
    assert not planned.complete and planned.to_dict()["order"] == ["keep.patch"]
    assert "## Apply order\n\n1. `keep.patch`\n\nApply in this order; `patchkit apply` does it.\n" in planned.markdown()
    assert "sort order" not in planned.markdown()  # one name: its sort order is its order
