"""`patchkit bump` on real releases (issue 30): every patch in force moved to a new release in one
command, with a verdict each, and nothing in the tree changed by any of it."""

from __future__ import annotations

import hashlib
import re
from pathlib import Path

import pytest

from testing.checkout import wheel_home
from testing.cli import run

pytestmark = pytest.mark.integration

UPSTREAM_FIXED_ON_0_5_23 = {"cpu-offload-tied-params", "eagle3-capture-hook", "mtp-layer-detection"}


def tree_hashes(root: Path) -> dict[str, str]:
    """sha256 of every file under `root` (and the set of them): what `bump` must leave as it was."""
    return {p.relative_to(root).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*")) if p.is_file() and not p.is_symlink()}


@pytest.fixture
def home(tmp_path, monkeypatch):
    monkeypatch.setenv("PATCHKIT_HOME", str(wheel_home(tmp_path / "home", ("0.5.17", "0.5.23"))))


def test_the_built_in_set_from_0_5_17_to_0_5_23(home, tmp_path, release):
    """The tree (0.5.17, patched: its state file says the release) is read, never written: V0 comes
    from it; three patches are upstream-fixed on 0.5.23, each a drop with its upstream reference
    and the units of 0.5.23 that hold the patched form; mtp-layer-detection's upstream fix is
    narrower (the depth hard-coded to 1); the rest carry over; exit 0."""
    site = release("0.5.17")
    assert run("apply", "--site-packages", site).exit_code == 0
    before = tree_hashes(site)
    out = tmp_path / "bump"
    done = run("bump", "--to", "0.5.23", "--site-packages", site, "-o", out, "--json")
    assert done.exit_code == 0, done.stderr
    report = done.json()
    assert (report["from"], report["to"], report["complete"]) == ("0.5.17", "0.5.23", True)
    rows = {row["id"]: row for row in report["patches"]}
    drops = {pid for pid, row in rows.items() if row["action"] == "drop"}
    assert drops == UPSTREAM_FIXED_ON_0_5_23 == set(report["drops"])
    for pid in drops:
        assert rows[pid]["on_from"] == "applies" and rows[pid]["on_to"] == "upstream-fixed"
        assert rows[pid]["upstream"] and rows[pid]["evidence"], rows[pid]
    assert any(e.startswith("sglang/srt/utils/offloader.py:") for e in rows["cpu-offload-tied-params"]["evidence"])
    assert "sets the MTP depth to 1" in rows["mtp-layer-detection"]["detail"]
    assert {row["action"] for pid, row in rows.items() if pid not in drops} <= {"carries over"}
    assert not report["conflicts"]
    text = (out / "REPORT.md").read_text()
    assert "| patch | on 0.5.17 | on 0.5.23 | action |" in text
    assert "| `mtp-layer-detection` | applies | upstream-fixed | drop |" in text
    assert "narrower than this patch" in text and "## Drops" in text
    assert run("bump", "--to", "0.5.23", "--from", "0.5.17", "--markdown", "-o", tmp_path / "md").stdout == \
        (tmp_path / "md" / "REPORT.md").read_text()
    assert tree_hashes(site) == before  # nothing in the tree (state file included) changed


FIELD_ID = "v0-5-15-post1-sglang"


def _field_set(folder: Path) -> tuple[Path, Path]:
    """Two diffs built from real upstream changes: the field's 30-file diff on 0.5.15.post1 and a
    4-file diff stacked on it (testing.field_diffs)."""
    from testing.field_diffs import field_diff, stacked_diff

    folder.mkdir()
    return field_diff("0.5.15.post1").write(folder), stacked_diff("0.5.15.post1").write(folder)


@pytest.mark.slow
def test_two_real_diffs_one_stacked_to_0_5_16(tmp_path, monkeypatch, release):
    """V0 from the diffs' index hashes (no tree, no --from): 0.5.15.post1; to 0.5.16 the field's diff
    is re-made unit by unit, but 5 of its files back-port 0.5.17 code that imports what 0.5.16 does
    not have (`sglang.srt.configs.kimi_k3`, `runtime_context.get_serving`, ...): a conflict naming
    each import (issue 40, item 2), its tree written; the stacked one carries over onto it. Those 5
    files' changes dropped in the tree, `--continue` finishes it: both written under their own names,
    and they apply on 0.5.16 in order."""
    from testing.checkout import checkout, git
    from testing.field_diffs import field_diff
    from testing.releases import pristine

    monkeypatch.setenv("PATCHKIT_HOME", str(wheel_home(tmp_path / "home", ("0.5.15.post1", "0.5.16"))))
    lower, upper = _field_set(tmp_path / "set")
    out = tmp_path / "bump"
    made = run("--patches", tmp_path / "set", "bump", "--to", "0.5.16", "-o", out, "--json")
    assert made.exit_code == 1, made.stderr
    assert made.json()["from"] == "0.5.15.post1"
    rows = {row["id"]: row for row in made.json()["patches"]}
    assert rows[FIELD_ID]["action"] == "conflicts" and rows[FIELD_ID]["counts"]
    broken = {c["file"]: c["detail"] for c in rows[FIELD_ID]["conflicts"]}
    assert broken["sglang/srt/configs/__init__.py"] == (
        "breaks on 0.5.16: `from sglang.srt.configs.kimi_k3 import KimiK3Config`: 0.5.16 has no module "
        "sglang.srt.configs.kimi_k3 (an ImportError)")
    assert len(broken) == 5 and all(d.startswith("breaks on 0.5.16: `from sglang.") for d in broken.values()), broken
    assert rows[FIELD_ID + "-extra"]["on_from"] == "applies"  # on top of the field's diff
    assert rows[FIELD_ID + "-extra"]["action"] in ("carries over", "rebased")
    for rel in broken:  # the maintainer drops what needs 0.5.17
        (out / rows[FIELD_ID]["tree"] / rel).write_bytes((pristine("0.5.16") / rel).read_bytes())
    done = run("bump", "--continue", out, "--json")
    assert done.exit_code == 0, done.stderr
    rows = {row["id"]: row for row in done.json()["patches"]}
    assert rows[FIELD_ID]["action"] == "rebased"
    repo = checkout(release("0.5.16", extra=tuple(field_diff("0.5.15.post1").after)), tmp_path / "repo")
    for name in (lower.name, upper.name):
        applied = git(repo, "apply", out / name, check=False)
        assert applied.returncode == 0, (name, applied.stderr)


@pytest.mark.slow
def test_two_real_diffs_to_0_5_23_conflicts_resolved_in_dir_and_continue(tmp_path, monkeypatch, release):
    """To 0.5.23 the field's diff conflicts (named `file:Class.method`, a tree to resolve in DIR) and
    the stacked one waits on it (it conflicts in the files they share): exit 1, nothing of the tree
    touched. Resolved the way the docs say (each block in DIR/NAME.tree/), `--continue` re-makes the
    stacked one on top (its own blocks, a second round), then exit 0 with a set that applies on
    0.5.23 in order and is `pending` there."""
    from testing.checkout import checkout, git
    from testing.field_diffs import take_the_patch_side

    monkeypatch.setenv("PATCHKIT_HOME", str(wheel_home(tmp_path / "home", ("0.5.15.post1", "0.5.23"))))
    from testing.releases import copy_minimal

    _field_set(tmp_path / "set")
    site = copy_minimal("0.5.23", tmp_path / "tree", ())
    before = tree_hashes(site)
    out = tmp_path / "bump"
    made = run("--patches", tmp_path / "set", "bump", "--to", "0.5.23", "--from", "0.5.15.post1",
               "--site-packages", site, "-o", out, "--json")
    assert made.exit_code == 1, made.stderr
    report = made.json()
    rows = {row["id"]: row for row in report["patches"]}
    assert rows[FIELD_ID]["action"] == "conflicts" and rows[FIELD_ID]["tree"] == "v0.5.15.post1-sglang.tree"
    names = {c["name"] for c in rows[FIELD_ID]["conflicts"]}
    assert "sglang/srt/disaggregation/prefill.py:PrefillBootstrapQueue.__init__" in names
    assert all(c["name"].startswith("sglang/") and ":" in c["name"] for c in report["conflicts"])
    assert rows[FIELD_ID + "-extra"]["waits_on"] == [FIELD_ID]
    assert "## Conflicts" in (out / "REPORT.md").read_text()

    def resolve() -> None:
        for path in out.glob("*.tree/sglang/**/*.py"):
            path.write_bytes(take_the_patch_side(path.read_bytes()))

    resolve()
    # A resolution that does not compile on 0.5.23 is refused, named FILE:LINE, the set not completed.
    pynccl = next(out.glob("*.tree/sglang/srt/distributed/device_communicators/pynccl.py"))
    good = pynccl.read_bytes()
    cut = good.index(b"    def ")
    pynccl.write_bytes(good[:cut] + b"    def def " + good[cut + len(b"    def "):])
    broken = run("bump", "--continue", out, "--json")
    assert broken.exit_code == 1 and not broken.json()["complete"], broken.stderr
    line = good[:cut].count(b"\n") + 1
    found = {c["name"]: c["detail"] for c in broken.json()["conflicts"] if c["id"] == FIELD_ID}
    assert found.pop(f"sglang/srt/distributed/device_communicators/pynccl.py:{line}").startswith("does not compile")
    # the patch side of other blocks uses names 0.5.23's files do not define (issue 40, item 2)
    assert found and all(detail.startswith("breaks on 0.5.23: ") for detail in found.values()), found
    assert not (out / "v0.5.15.post1-sglang.patch").exists()
    pynccl.write_bytes(good)
    _drop_what_breaks(out, broken.json(), "0.5.23")
    second = run("bump", "--continue", out, "--json")
    rows = {row["id"]: row for row in second.json()["patches"]}
    assert rows[FIELD_ID]["action"] == "rebased"
    # The stacked diff, re-made on top, has blocks of its own where the lower one's resolution took
    # away lines it changes (a round more); with blocks the size of the change (issue 40 item 6) the
    # patch side no longer brings the old units back, and it may finish in this round.
    assert second.exit_code == 0 or rows[FIELD_ID + "-extra"]["tree"], second.stderr
    # 0.5.23 has no encode_grpc_server.py; its blocks taken out, the file is not created, and said so.
    grpc = "sglang/srt/disaggregation/encode_grpc_server.py"
    assert any(note.startswith(f"not created: {grpc} ") for note in rows[FIELD_ID]["notes"]), rows[FIELD_ID]["notes"]
    assert not any(note.endswith(f"bytes: {grpc}") for note in rows[FIELD_ID]["notes"])
    resolve()
    done = run("bump", "--continue", out, "--json") if second.exit_code else second
    while done.exit_code == 1 and _drop_what_breaks(out, done.json(), "0.5.23"):  # the stacked one's own
        done = run("bump", "--continue", out, "--json")
    assert done.exit_code == 0, done.stderr
    assert done.json()["complete"] and not done.json()["conflicts"]
    written = [out / "v0.5.15.post1-sglang.patch", out / "v0.5.15.post1-sglang-extra.patch"]
    files = {rel for path in written for rel in _files_of(path)}
    fresh = release("0.5.23", extra=tuple(files))
    repo = checkout(fresh, tmp_path / "repo")
    for path in written:  # the set applies on 0.5.23, in order
        applied = git(repo, "apply", path, check=False)
        assert applied.returncode == 0, (path.name, applied.stderr)
    states = {p["id"]: p["state"] for p in run("--patches", written[0], "status", "--site-packages", fresh,
                                                "--json").json()["patches"]}
    assert states[FIELD_ID] == "pending"
    assert tree_hashes(site) == before


def _drop_what_breaks(out: Path, report: dict, version: str) -> bool:
    """A maintainer's answer to `breaks on V` (a name V does not define): the change to that file
    dropped in the tree (V's bytes; emptied where V has no such file); whether there was any."""
    from testing.releases import pristine

    rows = {row["id"]: row for row in report["patches"]}
    found = [(rows[c["id"]]["tree"], c["name"].rpartition(":")[0]) for c in report["conflicts"]
             if c["detail"].startswith(f"breaks on {version}: ")]
    for tree, rel in found:
        own = pristine(version) / rel
        (out / tree / rel).write_bytes(own.read_bytes() if own.is_file() else b"")
    return bool(found)


@pytest.mark.slow
def test_siblings_on_a_lower_diff_keep_each_others_lines(tmp_path, monkeypatch, release):
    """Two diffs made on the field diff's post-image (siblings, not a chain: testing.field_diffs'
    stacked_diff and sibling_diff), both changing sglang/srt/arg_groups/deepseek_v4_hook.py, where
    the lower one conflicts on 0.5.23: both wait, are re-made on top of it in one round, each with
    blocks of its own. Resolved, `--continue` must make the later sibling's diff on top of the
    earlier one as finished (as git rebase does), never diff its stale tree against the newer file:
    every `+` line the siblings bring is in the set applied in order on 0.5.23, or in 0.5.23's
    file already, or left out by the resolution itself (a change that found no place on 0.5.23, or
    dropped where it breaks there). Before: exit 0 and the sibling's diff deleted the stacked
    one's lines."""
    from testing.checkout import checkout, git
    from testing.field_diffs import field_diff, stacked_diff
    from testing.releases import pristine

    out, sibling, _ = _sibling_bump(tmp_path, monkeypatch)
    given_up: set[bytes] = set()
    for _ in range(4):
        done = _round(out, given_up)
        if done.exit_code != 1:
            break
    assert done.exit_code == 0 and done.json()["complete"], done.stderr
    inputs = [field_diff("0.5.15.post1"), stacked_diff("0.5.15.post1"), sibling]
    written = [out / diff.name for diff in inputs]
    fresh = release("0.5.23", extra=tuple({rel for path in written for rel in _files_of(path)}))
    repo = checkout(fresh, tmp_path / "repo")
    for path in written:  # the set applies on 0.5.23, in order
        applied = git(repo, "apply", path, check=False)
        assert applied.returncode == 0, (path.name, applied.stderr)
    for diff in inputs[1:]:
        for rel, after in diff.after.items():
            final = set(_lines(repo / "python" / rel))
            there = set(_lines(pristine("0.5.23") / rel))
            lost = [line for line in after.splitlines() if line not in set(diff.before[rel].splitlines())
                    and line.strip() and line not in final and line not in there and line not in given_up]
            assert not lost, (diff.name, rel, lost)


def _sibling_bump(tmp_path: Path, monkeypatch) -> tuple[Path, object, dict]:
    """The field diff, the stacked one and its sibling (one file shared) bumped to 0.5.23: exit 1,
    both siblings depending on the lower diff, which conflicts in that file; and the report."""
    from testing.field_diffs import sibling_diff, stacked_diff

    monkeypatch.setenv("PATCHKIT_HOME", str(wheel_home(tmp_path / "home", ("0.5.15.post1", "0.5.23"))))
    _field_set(tmp_path / "set")
    sibling = sibling_diff("0.5.15.post1")
    assert set(sibling.after) & set(stacked_diff("0.5.15.post1").after) == {SIBLINGS_SHARE}
    sibling.write(tmp_path / "set")
    out = tmp_path / "bump"
    made = run("--patches", tmp_path / "set", "bump", "--to", "0.5.23", "--from", "0.5.15.post1", "-o", out, "--json")
    assert made.exit_code == 1, made.stderr
    rows = {row["id"]: row for row in made.json()["patches"]}
    assert rows[FIELD_ID + "-extra"]["waits_on"] == rows[FIELD_ID + "-sibling"]["waits_on"] == [FIELD_ID]
    return out, sibling, made.json()


SIBLINGS_SHARE = "sglang/srt/arg_groups/deepseek_v4_hook.py"


@pytest.mark.slow
def test_round_one_names_the_stacked_diffs_own_conflicts(tmp_path, monkeypatch):
    """issue 40 item 7: the diffs on top of one that conflicts are re-made in round one on its files
    with its blocks taken as its own side, so the first report names their own conflicts (each a
    block in its own tree; one in a file the lower one has not finished says so), never only
    `<stack>` entries. Before: both waited with `<stack>` entries and no tree, and their blocks came
    one `--continue` later. Resolved all at once (and the lower one's `breaks on V` answered by
    dropping its change there), the blocks asked again are only where that drop took away what the
    stacked diff changes; then one `--continue` finishes the set."""
    out, _, report = _sibling_bump(tmp_path, monkeypatch)
    rows = {row["id"]: row for row in report["patches"]}
    extra, sibling = rows[FIELD_ID + "-extra"], rows[FIELD_ID + "-sibling"]
    assert extra["tree"] == "v0.5.15.post1-sglang-extra.tree" and sibling["tree"] == "v0.5.15.post1-sglang-sibling.tree"
    assert "sglang/srt/configs/update_config.py:adjust_config_with_unaligned_cpu_tp" in \
        {c["name"] for c in extra["conflicts"]}
    own = {c["name"]: c["detail"] for c in sibling["conflicts"]}
    assert f"made on {FIELD_ID}'s file" in own[f"{SIBLINGS_SHARE}:apply_deepseek_v4_defaults"]
    assert not [c for c in report["conflicts"] if "<stack>" in c["name"]]
    text = (out / "REPORT.md").read_text()
    assert f"`{FIELD_ID}-sibling`: `{SIBLINGS_SHARE}:apply_deepseek_v4_defaults`" in text
    for tree in (extra["tree"], sibling["tree"]):
        assert b">>>>>>> patch" in b"".join(p.read_bytes() for p in (out / tree).rglob("*.py"))
    done = _round(out)  # every block resolved once
    rows = {row["id"]: row for row in done.json()["patches"]}
    assert rows[FIELD_ID]["action"] == "rebased"
    assert not any(c["detail"].startswith(f"stacked on {FIELD_ID},") for c in done.json()["conflicts"])
    if done.exit_code == 1:  # blocks asked again only where the lower one's drop took away what it changes
        again = {c["name"] for c in rows[FIELD_ID + "-extra"]["conflicts"]}
        assert again and {name.rpartition(":")[0] for name in again} == {SIBLINGS_SHARE}, again
        assert rows[FIELD_ID + "-sibling"]["action"] == "conflicts"  # after the extra one in that file: next round
        done = _round(out)
    assert done.exit_code == 0 and done.json()["complete"], done.stderr


def _round(out: Path, given_up: set[bytes] | None = None, leave: str | None = None):
    """One round of resolving: every block takes the patch's side, `--continue`, and a change that
    breaks on 0.5.23 dropped in its tree (then `--continue` again) until none does. `given_up`
    gets the lines this resolution itself leaves out (a block's change that found no place on
    0.5.23, a file's change dropped where it breaks). `leave`: a tree left as it is this round."""
    import re

    from testing.field_diffs import take_the_patch_side

    given_up = set() if given_up is None else given_up
    for path in out.glob("*.tree/sglang/**/*.py"):
        if leave is not None and path.is_relative_to(out / leave):
            continue
        text = path.read_bytes()
        for block in re.finditer(rb"<<<<<<< release: [^\n]*\n=======\n(.*?)>>>>>>> patch", text, flags=re.S):
            given_up.update(line[1:] if line[:1] in (b"+", b" ") else line for line in block.group(1).splitlines())
        path.write_bytes(take_the_patch_side(text))
    done = run("bump", "--continue", out, "--json")
    while done.exit_code == 1:
        before = {path: path.read_bytes() for path in out.glob("*.tree/sglang/**/*.py")}
        if not _drop_what_breaks(out, done.json(), "0.5.23"):
            break
        for path, text in before.items():
            given_up.update(set(text.splitlines()) - set(_lines(path)))
        done = run("bump", "--continue", out, "--json")
    return done


@pytest.mark.slow
def test_a_siblings_resolution_that_clashes_with_the_earlier_one_is_a_conflict_again(tmp_path, monkeypatch):
    """The later sibling's resolution changes a line the earlier one's resolution changes too (0.5.23's
    `if cfg.cp_strategy == "zigzag" and not is_npu():`, each its own way; the patch side of a block
    that set the whole old unit against 0.5.23's lines did it before blocks were the size of the
    change): made onto the earlier one as finished, that is a conflict, its tree written again with
    the block (exit 1), never one side taken in silence; the later sibling waits while the earlier
    one is not finished in their file; resolved, the set is complete and holds the later side."""
    from testing.field_diffs import take_the_patch_side

    out, _, _ = _sibling_bump(tmp_path, monkeypatch)
    for path in out.glob("*.tree/sglang/**/*.py"):
        path.write_bytes(take_the_patch_side(path.read_bytes()))
    mine = out / "v0.5.15.post1-sglang-sibling.tree" / SIBLINGS_SHARE
    theirs = out / "v0.5.15.post1-sglang-extra.tree" / SIBLINGS_SHARE
    old = b'    if cfg.cp_strategy == "zigzag" and not is_npu():\n'
    assert mine.read_bytes().count(old) == 1 and theirs.read_bytes().count(old) == 1
    theirs.write_bytes(theirs.read_bytes().replace(old, old.replace(b'== "zigzag"', b'in ("zigzag",)')))
    mine.write_bytes(mine.read_bytes().replace(old, old.replace(b"not is_npu()", b"not (is_npu())")))
    for _ in range(3):
        clash = _round(out)
        rows = {row["id"]: row for row in clash.json()["patches"]}
        if rows[FIELD_ID + "-extra"]["action"] == "rebased":
            break
    assert clash.exit_code == 1, clash.stderr
    later = rows[FIELD_ID + "-sibling"]
    assert later["action"] == "conflicts" and "conflicts with the diffs before it" in later["detail"]
    assert {c["file"] for c in later["conflicts"]} == {SIBLINGS_SHARE} and b">>>>>>> patch" in mine.read_bytes()
    done = _round(out)
    assert done.exit_code == 0 and done.json()["complete"], done.stderr
    assert b'+    if cfg.cp_strategy == "zigzag" and not (is_npu()):' in \
        (out / "v0.5.15.post1-sglang-sibling.patch").read_bytes()


def _lines(path: Path) -> list[bytes]:
    return path.read_bytes().splitlines() if path.is_file() else []


def _files_of(path: Path) -> list[str]:
    from patchkit.diffs import unidiff

    return [f.path for f in unidiff.parse(path.read_bytes(), path.name).files]


@pytest.mark.slow
def test_a_launch_line_whose_flag_0_5_23_renamed(home, tmp_path):
    """--cuda-graph-max-bs is a deprecated alias of --cuda-graph-max-bs-decode on 0.5.14-0.5.19 (the
    line runs on 0.5.17) and gone from 0.5.20 (argparse rejects it): the renamed flag, the error that
    appears and the note that goes, and the budget on both; the launch does not change the exit code."""
    from testing.doctor import model_folder

    model = model_folder(tmp_path / "qwen3.8-27b")
    line = f"--model-path {model} --cuda-graph-max-bs 8 --context-length 65536"
    done = run("bump", "--from", "0.5.17", "--to", "0.5.23", "-o", tmp_path / "bump", "--gpus", "1",
               "--gpu-memory", "80", "--gpu-free", "79", "--sm", "9.0", "--launch", line, "--json")
    assert done.exit_code == 0, done.stderr
    (launch,) = done.json()["launches"]
    assert launch["renamed"] == [["--cuda-graph-max-bs", "--cuda-graph-max-bs-decode"]]
    assert any(text.startswith("error flag-removed: --cuda-graph-max-bs is not a flag of SGLang 0.5.23")
               for text in launch["appeared"])
    assert any(text.startswith("info flag-deprecated: --cuda-graph-max-bs") for text in launch["disappeared"])
    budget = {what: (old, new) for what, old, new in launch["budget"]}
    assert {"KV tokens", "state slots", "max safe --mem-fraction-static"} <= set(budget)
    assert all(old != "?" and new != "?" for old, new in budget.values())
    text = (tmp_path / "bump" / "REPORT.md").read_text()
    assert "- renamed on 0.5.23: `--cuda-graph-max-bs` -> `--cuda-graph-max-bs-decode`" in text
    missing = run("bump", "--from", "0.5.17", "--to", "0.5.23", "-o", tmp_path / "none",
                  "--launch", f"--model-path {tmp_path / 'nothing'}")
    assert missing.exit_code == 2 and not (tmp_path / "none").exists()


@pytest.mark.slow
def test_a_launch_line_without_gpu_facts_says_why_its_budget_is_not_compared(home, tmp_path, monkeypatch):
    """No nvidia-smi and no --gpu-memory/--gpu-free: doctor computes no budget on either release, so bump's launch
    section had no budget table and said '- no change', its --json launch 'budget': [], without a word of why."""
    from patchkit.doctor import gpu
    from testing.doctor import model_folder

    monkeypatch.setattr(gpu, "_nvidia_smi", lambda argv: None)  # a machine without nvidia-smi
    model = model_folder(tmp_path / "qwen3.8-27b")
    done = run("bump", "--from", "0.5.17", "--to", "0.5.23", "-o", tmp_path / "bump", "--launch",
               f"--model-path {model}", "--json")
    assert done.exit_code == 0, done.stderr
    (launch,) = done.json()["launches"]
    why = "no GPU memory figure (no nvidia-smi; pass --gpu-memory and --gpu-free)"
    assert (launch["budget"], launch["budget_note"]) == ([], why)
    assert f"- budget not compared: {why}" in (tmp_path / "bump" / "REPORT.md").read_text().splitlines()
    text = run("bump", "--from", "0.5.17", "--to", "0.5.23", "-o", tmp_path / "again", "--launch",
               f"--model-path {model}")
    assert f"  launch: budget not compared: {why}" in text.stdout.splitlines(), text.stdout


def test_latest_takes_the_newest_release_on_the_index(home, tmp_path):
    """--latest: V is the newest release the package index lists (here its list as patchkit keeps
    it for a day: 0.5.17 ... 0.5.23, a pre-release left out)."""
    import json
    import os
    import time

    listed = ["0.5.16", "0.5.17", "0.5.23", "0.5.24rc1"]
    home_dir = Path(os.environ["PATCHKIT_HOME"])
    (home_dir / "index-versions.json").write_text(json.dumps({"at": time.time(), "versions": listed}))
    done = run("bump", "--latest", "--from", "0.5.17", "-o", tmp_path / "out", "--json")
    assert done.exit_code == 0, done.stderr
    assert done.json()["to"] == "0.5.23"
    assert "patch(es) on SGLang 0.5.23" in done.stderr
    assert "mtp-layer-detection: applies on 0.5.17, upstream-fixed on 0.5.23: drop" in done.stderr  # per patch


def _own_module(folder: Path) -> Path:
    """A patch module of the user's own folder (`patchkit new`), in force on 0.5.17 and 0.5.23."""
    made = run("new", "my-load-fix", "--target", "sglang/srt/configs/load_config.py", "--class", "LoadConfig",
               "--method", "__post_init__", "--out", folder)
    assert made.exit_code == 0, made.stderr
    return folder / "my_load_fix.py"


def test_the_users_own_patch_modules_are_in_dir(home, tmp_path):
    """A patch module of a --patches folder that carries over is copied into DIR byte for byte, so
    that `--patches DIR list` (and apply, image build) has the whole set the report names."""
    module = _own_module(tmp_path / "mine")
    out = tmp_path / "bump"
    done = run("--patches", tmp_path / "mine", "bump", "--from", "0.5.17", "--to", "0.5.23", "-o", out, "--json")
    assert done.exit_code == 0, done.stderr
    rows = {row["id"]: row for row in done.json()["patches"]}
    assert rows["my-load-fix"]["action"] == "carries over" and rows["my-load-fix"]["written"] == "my_load_fix.py"
    assert (out / "my_load_fix.py").read_bytes() == module.read_bytes()
    assert f"patchkit --patches {out} apply" in done.json()["next"][-1]
    listed = run("--patches", out, "list", "--json")
    assert listed.exit_code == 0, listed.stderr
    assert "my-load-fix" in listed.stdout


def test_a_patch_file_that_cannot_be_loaded_is_named_and_the_set_incomplete(home, tmp_path):
    """A damaged diff in the folder: the rest of the set is bumped, the file is named with its cause in
    REPORT.md and --json (complete: false), and the run exits 2 (issue 29's rule for a file left out)."""
    module = _own_module(tmp_path / "mine")
    (tmp_path / "mine" / "truncated.patch").write_bytes(b"diff --git a/x.py b/x.py\n--- a/x.py\n+++ b/x.py\n"
                                                        b"@@ -1,3 +1,4 @@\n x = 1\n")
    out = tmp_path / "bump"
    done = run("--patches", tmp_path / "mine", "bump", "--from", "0.5.17", "--to", "0.5.23", "-o", out, "--json")
    assert done.exit_code == 2, done.stderr
    report = done.json()
    assert report["complete"] is False
    (left,) = report["left_out"]
    assert "truncated.patch" in left and "truncated.patch" in done.stderr
    assert "truncated.patch" in (out / "REPORT.md").read_text().split("## Left out")[1]
    assert (out / module.name).is_file()  # the rest of the set is there


def test_a_diff_whose_files_are_gone_is_no_longer_applicable(home, tmp_path):
    """A change to sglang/srt/mem_cache/chunk_cache.py made on 0.5.17, which 0.5.23 no longer has:
    no longer applicable (exit 0, no tree written), as docs/bump.md's table says; not a conflict."""
    from testing.diffs import git_diff
    from testing.releases import pristine

    rel = "sglang/srt/mem_cache/chunk_cache.py"
    before = (pristine("0.5.17") / rel).read_bytes()
    assert not (pristine("0.5.23") / rel).exists()
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "gone-file-fix.patch").write_bytes(
        git_diff({rel: before}, {rel: before.replace(b"\nclass ChunkCache(", b"\n# a local fix\nclass ChunkCache(", 1)},
                 prefix="python/"))
    out = tmp_path / "bump"
    done = run("--patches", tmp_path / "mine", "bump", "--from", "0.5.17", "--to", "0.5.23", "-o", out, "--json")
    assert done.exit_code == 0, done.stderr
    row = next(row for row in done.json()["patches"] if row["id"] == "gone-file-fix")
    assert (row["on_from"], row["on_to"], row["action"]) == ("applies", "not-applicable", "no longer applicable")
    assert rel in row["detail"] and not row["conflicts"] and not list(out.glob("*.tree"))


def test_rerun_into_an_earlier_bumps_folder_keeps_none_of_its_outputs(home, tmp_path):
    """DIR written by an earlier bump (its own module copy and a diff it re-made): a second bump of
    another set into it removes the files the earlier record names, keeps the user's own file."""
    _own_module(tmp_path / "mine")
    out = tmp_path / "bump"
    assert run("--patches", tmp_path / "mine", "bump", "--from", "0.5.17", "--to", "0.5.23", "-o", out).exit_code == 0
    (out / "notes.txt").write_text("mine")
    again = run("bump", "--from", "0.5.17", "--to", "0.5.23", "-o", out, "--json")
    assert again.exit_code == 0, again.stderr
    assert sorted(p.name for p in out.iterdir()) == [".patchkit-bump.json", "REPORT.md", "notes.txt"]
    assert "my-load-fix" not in (out / "REPORT.md").read_text()


TOP_FILES = ("sglang/srt/constrained/xgrammar_backend.py", "sglang/srt/configs/load_config.py")


def _top_diff():
    """A third diff, three deep: made on the stacked diff's post-image of xgrammar_backend.py and on
    the field diff's of load_config.py (a local function added at the end of each)."""
    from testing.diffs import git_diff
    from testing.field_diffs import FieldDiff, field_diff, stacked_diff

    field, extra = field_diff("0.5.15.post1"), stacked_diff("0.5.15.post1")
    before = {TOP_FILES[0]: extra.after[TOP_FILES[0]], TOP_FILES[1]: field.after[TOP_FILES[1]]}
    after = {rel: data + b"\n\ndef _local_probe():\n    return None\n" for rel, data in before.items()}
    return FieldDiff("v0.5.15.post1-sglang-top.patch", "0.5.15.post1", before, after,
                     git_diff(before, after, prefix="python/"))


@pytest.mark.slow
def test_a_three_deep_stack_drops_a_finished_lower_ones_stack_entry(tmp_path, monkeypatch):
    """issue 40 item 7 (a stale "stacked on X, which conflicts here" after X was finished) on a stack
    three deep (issue 44 item 5): the third diff depends on the field diff (load_config.py) and on
    the stacked one (xgrammar_backend.py, which the stacked one has not finished: it is stacked on
    the field diff there), a `<stack>` entry each in round one. Once the field diff is finished and
    the stacked one is not (its tree left with its blocks this round), the third waits on the
    stacked one only, and says only that (before: the field diff's entry stayed). Resolved, the next
    round finishes all three, the third re-made on top with its change."""
    monkeypatch.setenv("PATCHKIT_HOME", str(wheel_home(tmp_path / "home", ("0.5.15.post1", "0.5.23"))))
    _field_set(tmp_path / "set")
    _top_diff().write(tmp_path / "set")
    out = tmp_path / "bump"
    made = run("--patches", tmp_path / "set", "bump", "--to", "0.5.23", "--from", "0.5.15.post1", "-o", out, "--json")
    assert made.exit_code == 1, made.stderr
    top = {row["id"]: row for row in made.json()["patches"]}[FIELD_ID + "-top"]
    assert top["waits_on"] == [FIELD_ID, FIELD_ID + "-extra"] and top["tree"] is None
    assert {(c["file"], c["unit"]) for c in top["conflicts"]} == {(TOP_FILES[1], "<stack>"), (TOP_FILES[0], "<stack>")}
    extra = {row["id"]: row for row in made.json()["patches"]}[FIELD_ID + "-extra"]
    assert extra["tree"]
    done = _round(out, leave=extra["tree"])
    rows = {row["id"]: row for row in done.json()["patches"]}
    assert (rows[FIELD_ID]["action"], rows[FIELD_ID + "-extra"]["action"]) == ("rebased", "conflicts"), done.stderr
    top = rows[FIELD_ID + "-top"]
    assert top["action"] == "conflicts"
    assert [c["detail"].split(",")[0] for c in top["conflicts"]] == [f"stacked on {FIELD_ID}-extra"], top["conflicts"]
    last = _round(out)
    assert last.exit_code == 0 and last.json()["complete"], last.stderr
    assert (out / "v0.5.15.post1-sglang-top.patch").read_bytes().count(b"+def _local_probe():") == 2


OFFLOADER = "sglang/srt/utils/offloader.py"
_BYTES = (b"int(server_args.cpu_offload_gb * 1024**3)", b"int(server_args.cpu_offload_gb * (1 << 30))")
_CALL = (b"        return OffloaderV1(\n            cpu", b"        return  OffloaderV1(\n            cpu")


@pytest.mark.parametrize("with_lowers", [True, False], ids=["holding-the-lowers-change", "its-own-change-only"])
def test_a_stacked_resolution_next_to_the_lowers_change_is_merged_not_asked_again(home, tmp_path, with_lowers):
    """A lower diff changes a line of 0.5.17's create_offloader_from_server_args, and a diff stacked
    on it the line right above (0.5.23 renamed and rewrote the function as create_offloader: both
    conflict in round one). Each tree is resolved in 0.5.23's create_offloader, the upper's the
    way its block shows it (the lower's change with it) or with its own change only: nothing the
    upper changes was taken away by the lower's resolution, so `--continue` merges it onto the
    lower's finished file, exit 0, and the two diffs applied in order hold both changes. Before:
    exit 1, the upper's block asked again ("changed here and by the diff in the same lines")."""
    from testing.diffs import git_diff
    from testing.releases import pristine

    v0 = (pristine("0.5.17") / OFFLOADER).read_bytes()
    lower = v0.replace(*_BYTES)
    upper = lower.replace(*_CALL)
    assert v0 != lower != upper
    (tmp_path / "set").mkdir()
    (tmp_path / "set" / "a-lower.patch").write_bytes(git_diff({OFFLOADER: v0}, {OFFLOADER: lower}, prefix="python/"))
    (tmp_path / "set" / "b-upper.patch").write_bytes(git_diff({OFFLOADER: lower}, {OFFLOADER: upper}, prefix="python/"))
    out = tmp_path / "bump"
    made = run("--patches", tmp_path / "set", "bump", "--from", "0.5.17", "--to", "0.5.23", "-o", out, "--json")
    assert made.exit_code == 1, made.stderr
    rows = {row["id"]: row for row in made.json()["patches"]}
    assert rows["a-lower"]["tree"] == "a-lower.tree" and rows["b-upper"]["tree"] == "b-upper.tree"
    assert rows["b-upper"]["waits_on"] == ["a-lower"]
    there = [(old.replace(b"server_args.", b"get_exec().offload."), new.replace(b"server_args.", b"get_exec().offload."))
             for old, new in (_BYTES, _CALL)]
    for tree, changes in (("a-lower.tree", there[:1]), ("b-upper.tree", there if with_lowers else there[1:])):
        path = out / tree / OFFLOADER
        text = re.sub(rb"<<<<<<< release[^\n]*\n=======\n.*?>>>>>>> patch[^\n]*\n", b"", path.read_bytes(), flags=re.S)
        for old, new in changes:
            assert text.count(old) == 1
            text = text.replace(old, new)
        path.write_bytes(text)
    done = run("bump", "--continue", out, "--json")
    assert done.exit_code == 0, (done.stderr, done.json()["conflicts"])
    rows = {row["id"]: row for row in done.json()["patches"]}
    assert rows["a-lower"]["action"] == rows["b-upper"]["action"] == "rebased"
    final = (pristine("0.5.23") / OFFLOADER).read_bytes()
    for name in ("a-lower.patch", "b-upper.patch"):
        final = _applied(final, (out / name).read_bytes(), name)
    expected = (pristine("0.5.23") / OFFLOADER).read_bytes()
    for old, new in there:
        expected = expected.replace(old, new)
    assert final == expected


def _applied(data: bytes, diff: bytes, name: str) -> bytes:
    """`git apply` of `diff` (one file, offloader.py) on `data`."""
    from testing.diffs import git_apply

    code, files, err = git_apply({"python/" + OFFLOADER: data}, diff)
    assert code == 0, (name, err)
    return files["python/" + OFFLOADER]


# Empty on 0.5.14 and on 0.5.15 alike (the mlx backend's moe package, new in 0.5.14).
EMPTY_MOE_INIT = "sglang/srt/hardware_backend/mlx/moe/__init__.py"


@pytest.mark.parametrize("made, v0, states, row", [
    ("on-the-empty-file", "0.5.14", ("pending", "pending"), ("applies", "applies", "carries over")),
    ("as-a-new-file", "0.5.14", ("failed", "failed"), ("broken", "broken", "conflicts")),
    ("on-the-empty-file", "0.5.13", ("not-applicable", "pending"), ("not-applicable", "applies", "carries over")),
], ids=["made-on-it", "made-as-new-file", "from-a-release-without-it"])
def test_a_diff_of_an_empty_init_reads_on_v0_as_status_reads_it(tmp_path, monkeypatch, made, v0, states, row):
    """`X = 1` put into the empty __init__.py, bumped V0 -> 0.5.15: bump's verdict on V0 is status's
    there. Made on the file (git's `index e69de29..`) it applies on 0.5.14 and 0.5.15 and carries
    over. Bump read every file as bytes, an absent one as empty: made as a new file (`--- /dev/null`),
    which status refuses on both releases ("the diff creates it, and it is there"), it `applied` on
    0.5.14 and was `broken` on 0.5.15, whose file is the same; and from 0.5.13, which has no such
    file (status: not-applicable), the edit `applied` there."""
    from testing.diffs import git_diff
    from testing.releases import pristine

    monkeypatch.setenv("PATCHKIT_HOME", str(wheel_home(tmp_path / "home", ("0.5.13", "0.5.14", "0.5.15"))))
    assert (pristine("0.5.14") / EMPTY_MOE_INIT).read_bytes() == b"" == (pristine("0.5.15") / EMPTY_MOE_INIT).read_bytes()
    assert not (pristine("0.5.13") / EMPTY_MOE_INIT).exists()
    before: dict[str, bytes | None] = {EMPTY_MOE_INIT: b""} if made == "on-the-empty-file" else {}
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "empty-init.patch").write_bytes(git_diff(before, {EMPTY_MOE_INIT: b"X = 1\n"}))
    status = []
    for version in (v0, "0.5.15"):
        shown = run("--patches", tmp_path / "mine", "status", "--source", pristine(version), "--json")
        assert shown.exit_code in (0, 1), shown.stderr
        status.append(next(p for p in shown.json()["patches"] if p["id"] == "empty-init")["state"])
    assert tuple(status) == states
    done = run("--patches", tmp_path / "mine", "bump", "--from", v0, "--to", "0.5.15", "-o", tmp_path / "bump", "--json")
    assert done.exit_code == (1 if row[2] == "conflicts" else 0), done.stderr
    found = next(r for r in done.json()["patches"] if r["id"] == "empty-init")
    assert (found["on_from"], found["on_to"], found["action"]) == row, found
    if row[2] == "carries over":
        assert not found["counts"] and (tmp_path / "bump" / "empty-init.patch").is_file()


@pytest.mark.parametrize("spelled", ["0.5.23.0", "v0.5.23"])
def test_the_default_folder_is_named_by_the_normalised_release(tmp_path, monkeypatch, spelled):
    """issue 40.1: `bump --to 0.5.21.0` wrote ./patchkit-bump-0.5.21.0 while `0.5.21` and `v0.5.21` wrote
    ./patchkit-bump-0.5.21: one release, one default folder."""
    monkeypatch.setenv("PATCHKIT_HOME", str(wheel_home(tmp_path / "home", ("0.5.17", "0.5.23"))))
    monkeypatch.chdir(tmp_path)
    (tmp_path / "mine").mkdir()
    _own_module(tmp_path / "mine")
    done = run("--patches", tmp_path / "mine", "bump", "--from", "0.5.17", "--to", spelled, "--json")
    assert done.exit_code == 0, done.stderr
    assert sorted(p.name for p in tmp_path.glob("patchkit-bump-*")) == ["patchkit-bump-0.5.23"]
    assert (tmp_path / "patchkit-bump-0.5.23" / "my_load_fix.py").is_file()


@pytest.mark.slow
def test_a_stacked_diff_whose_name_sorts_before_its_lower_one_is_finished_after_it(tmp_path, monkeypatch):
    """--continue finishes the diffs in stack order, never in the order of their names: the diff
    stacked on the field's diff, named so that it sorts first (`a-upper.patch`), waited on the lower
    one while the lower one, after it in the loop, waited on it, and every `--continue` exited 1
    with no block left (found moving an RL framework's real 5-diff stack 0.5.15.post1 -> 0.5.17,
    whose stacked `pull_weights` sorts before the diffs under it). Resolved, the set is finished."""
    out, made = _upper_sorting_first_bump(tmp_path, monkeypatch)
    assert {row["id"]: row for row in made.json()["patches"]}["a-upper"]["waits_on"] == [FIELD_ID]
    done = _finished(out)
    assert {row["id"]: row["action"] for row in done.json()["patches"]}["a-upper"] in ("rebased", "carries over")


def test_a_finished_stack_says_the_order_its_diffs_apply_in_and_the_upper_one_names_its_lower(tmp_path, monkeypatch):
    """A finished bump of a stack says the order its written diffs apply in (REPORT.md's "Apply
    order", `--json`'s `order`), and that it is not their names' sort order; the stacked diff,
    named so that it sorts first (`a-upper.patch`), names the field's diff under it in
    `Patchkit-After:`, so a set loaded from DIR orders it without the report (found bumping an RL
    framework's 4-diff stack 0.5.13 -> 0.5.15.post1: in its own Dockerfile's order `top_p.patch`
    fails, and REPORT.md never said the order)."""
    from patchkit.diffs import unidiff
    out, made = _upper_sorting_first_bump(tmp_path, monkeypatch)
    done = _finished(out)
    written = {row["id"]: row["written"] for row in done.json()["patches"]}
    assert done.json()["order"] == [written[FIELD_ID], "a-upper.patch"]
    assert done.json()["order_sorted"] is False
    report = (out / "REPORT.md").read_text()
    assert f"## Apply order\n\n1. `{written[FIELD_ID]}`\n2. `a-upper.patch`\n" in report
    assert "Apply in this order; `patchkit apply` does it." in report
    assert "not their names' sort order" in report
    assert unidiff.load((out / "a-upper.patch").read_bytes(), "a-upper.patch").after == (FIELD_ID,)
    assert unidiff.load((out / written[FIELD_ID]).read_bytes(), written[FIELD_ID]).after == ()


def _upper_sorting_first_bump(tmp_path: Path, monkeypatch):
    """The field's diff and the diff stacked on it, named so that it sorts first (`a-upper.patch`),
    bumped 0.5.15.post1 -> 0.5.23: exit 1 (the field diff conflicts). The folder and the result."""
    from testing.field_diffs import field_diff, stacked_diff

    monkeypatch.setenv("PATCHKIT_HOME", str(wheel_home(tmp_path / "home", ("0.5.15.post1", "0.5.23"))))
    (tmp_path / "set").mkdir()
    field_diff("0.5.15.post1").write(tmp_path / "set")
    (tmp_path / "set" / "a-upper.patch").write_bytes(stacked_diff("0.5.15.post1").text)
    out = tmp_path / "bump"
    made = run("--patches", tmp_path / "set", "bump", "--to", "0.5.23", "--from", "0.5.15.post1", "-o", out, "--json")
    assert made.exit_code == 1, made.stderr
    return out, made


def _finished(out: Path):
    """Rounds of `_round` until the bump is finished, one more where the lower one's drop took away
    what the upper one changes (at most three): the last `--continue`, finished (exit 0, complete)."""
    done = _round(out)
    for _ in range(2):
        if done.exit_code != 1 or not list(out.glob("*.tree")):
            break
        done = _round(out)
    assert done.exit_code == 0 and done.json()["complete"], done.stderr
    return done
