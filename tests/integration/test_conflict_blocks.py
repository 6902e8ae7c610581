"""Conflict blocks a person can resolve (issue 40 item 6): a block carries the diff's own hunk, says
where the release has the code (FILE:LINE) and what it did to the unit, and sits on that code where
it is in the same file, never a whole old unit set against the release's. Three real shapes
(testing.field_diffs): a one-line change to a `ServerArgs` field, whose class header 0.5.23 emptied
into arg_groups/fields/ (a block from line 241 to 3198 before: the 0.5.17 class body against an empty
release side); a log line added to a 67-line method 0.5.23 nests a level deeper (a 58-line block of
the old method's tail before); an import change on 0.5.14, which joined the file's two import
sections (the 140-line section against 2 lines before)."""

from __future__ import annotations

import pytest

from testing.blocks import blocks, conflict_lines, insert_after, take_patch_side, without
from testing.checkout import wheel_home
from testing.cli import run
from testing.field_diffs import (FP4, HTTP_SERVER, SERVER_ARGS, import_section_diff, log_line_diff,
                                 moved_field_diff)

pytestmark = pytest.mark.integration

SERVING = "sglang/srt/arg_groups/fields/serving.py"
CASES = {"moved-field": moved_field_diff, "log-line": log_line_diff, "import-section": import_section_diff}
# Per case: the file with the blocks, the unit whose hunk is a block, where the release's code is
# (its file, and a line there that the named line or the few after it hold), the lines of conflict
# before (main at 74c3b92) and the most allowed now (the hunk, its context, the markers).
EXPECTED = {
    "moved-field": (SERVER_ARGS, "ServerArgs", SERVING, b"tokenizer_worker_num: A[", 2958, 14),
    "log-line": (FP4, "ModelOptFp4LinearMethod.apply", FP4, b"# Pad activations to match weight K-dimension padding",
                 58, 14),
    "import-section": (HTTP_SERVER, "<imports>#2", HTTP_SERVER, b"import numpy as np", 144 + 7, 22 + 7),
}


def _rebased(case: str):
    from patchkit.diffs import rebase, unidiff
    from patchkit.releases.pristine import WheelSource
    from testing.releases import HOME

    field, to = CASES[case]()
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("PATCHKIT_HOME", str(HOME))
        source = WheelSource(to)
        made = rebase.rebase(unidiff.load(field.text, field.name), field.text, to, source.read,
                             python_files=source.python_files, package_files=source.package_files)
    return made, source


@pytest.mark.parametrize("case", CASES)
def test_a_block_is_the_diffs_hunk_on_the_code_it_names(case):
    rel, unit, home, code, before, most = EXPECTED[case]
    made, source = _rebased(case)
    (change,) = made.changes
    assert change.rel == rel and change.after is not None
    found = blocks(change.after)
    assert conflict_lines(change.after) <= most < before, [(b.start, b.lines) for b in found]
    (hunk,) = [b for b in found if f"{rel}:{unit} " in b.where]
    assert not hunk.release and hunk.patch.startswith(b"@@ -")  # the diff's hunk, numbered as in its pre-image
    assert hunk.added and all(line in (CASES[case]()[0].after[rel]) for line in hunk.added)
    place = hunk.place
    assert place is not None and place[0] == home, hunk.where
    lines = (source.read(home) or b"").splitlines()
    assert any(code in line for line in lines[place[1] - 1:place[1] + 2]), (place, lines[place[1] - 1])
    detail = next(u.detail for u in made.conflicts if u.unit == unit)
    assert f"this release has that code at {home}:{place[1]} (" in detail  # REPORT.md and --json say it too
    if home == rel:  # in the same file the block sits right above that code
        after = change.after.splitlines()[hunk.start - 1 + hunk.lines:]
        assert any(code in line for line in after[:3]), after[:3]


def _resolve(case: str, tree, to: str) -> None:
    """What a maintainer does with the blocks: the change made where the block says the code is,
    the block deleted; git's block (a small conflict) taken on the diff's side."""
    from testing.releases import pristine

    rel, unit, home, _, _, _ = EXPECTED[case]
    path = tree / rel
    data = path.read_bytes()
    (hunk,) = [b for b in blocks(data) if f"{rel}:{unit} " in b.where]
    assert hunk.place is not None
    file, line = hunk.place
    data = without(data, hunk)
    if file != rel:  # moved to another file of V: put it in the tree and change it there
        target = (pristine(to) / file).read_bytes().splitlines(keepends=True)
        at = next(i for i in range(line - 1, len(target)) if target[i].strip() == b"] = 1")
        target[at] = target[at].replace(b"] = 1", b"] = 2")
        (tree / file).parent.mkdir(parents=True, exist_ok=True)
        (tree / file).write_bytes(b"".join(target))
    else:
        lines = hunk.patch.splitlines(keepends=True)[1:]
        for at, entry in enumerate(lines):
            if entry.startswith(b"+") and not lines[at - 1].startswith(b"+"):
                run_of = [x[1:] for x in lines[at:]]
                run_of = run_of[:next((i for i, x in enumerate(lines[at:]) if not x.startswith(b"+")), len(run_of))]
                data = insert_after(data, line, lines[at - 1][1:], run_of)
    for other in blocks(data):
        data = take_patch_side(data, other)
        break
    assert not blocks(data)
    path.write_bytes(data)


@pytest.mark.slow
@pytest.mark.parametrize("case", CASES)
def test_a_block_resolved_where_it_says_and_continue_finishes(case, tmp_path, monkeypatch, release):
    """bump writes the tree with the block; made where the block names and the block deleted,
    `bump --continue` finishes (exit 0) with a diff that `git apply`s on V and carries the change."""
    from testing.checkout import checkout, git

    field, to = CASES[case]()
    monkeypatch.setenv("PATCHKIT_HOME", str(wheel_home(tmp_path / "home", (field.base, to))))
    (tmp_path / "set").mkdir()
    field.write(tmp_path / "set")
    out = tmp_path / "bump"
    made = run("--patches", tmp_path / "set", "bump", "--to", to, "-o", out, "--json")
    assert made.exit_code == 1, made.stderr
    (row,) = [r for r in made.json()["patches"] if r["kind"] == "diff"]
    rel, unit, home, _, _, _ = EXPECTED[case]
    assert row["action"] == "conflicts" and row["tree"]
    named = next(c for c in row["conflicts"] if c["unit"] == unit)
    assert f"this release has that code at {home}:" in named["detail"]
    assert f"this release has that code at {home}:" in (out / "REPORT.md").read_text()
    _resolve(case, out / row["tree"], to)
    done = run("bump", "--continue", out, "--json")
    assert done.exit_code == 0, done.stderr
    written = out / field.name
    text = written.read_bytes()
    added = [line[1:] for line in field.text.splitlines(keepends=True) if line.startswith(b"+") and
             not line.startswith(b"+++") and b"HEALTH_CHECK" not in line]
    assert added and all(any(line[1:].strip() == want.strip() for line in text.splitlines(keepends=True)
                             if line.startswith(b"+")) for want in added), text.decode()
    repo = checkout(release(to, extra=(rel, home)), tmp_path / "repo")
    applied = git(repo, "apply", written, check=False)
    assert applied.returncode == 0, applied.stderr


def test_blocks_are_never_nested_and_each_resolved_file_compiles():
    """The field's 30-file diff on 0.5.23 (many units both sides changed): a hunk's block set on its
    code in a unit that also has git's blocks goes above them, never inside one (it was put inside
    one in prefill.py's event_loop_overlap_disagg_prefill, and the resolved file kept a marker)."""
    import re

    from patchkit.diffs import rebase, unidiff
    from patchkit.releases.pristine import WheelSource
    from testing.field_diffs import field_diff, take_the_patch_side
    from testing.releases import HOME

    field = field_diff("0.5.15.post1")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("PATCHKIT_HOME", str(HOME))
        source = WheelSource("0.5.23")
        made = rebase.rebase(unidiff.load(field.text, field.name), field.text, "0.5.23", source.read,
                             python_files=source.python_files, package_files=source.package_files)
    hunks = 0
    for change in made.changes:
        if change.after is None or not change.rel.endswith(".py"):
            continue
        markers = [m.group(1) for m in re.finditer(rb"^(<<<<<<<|=======$|>>>>>>>)", change.after, re.M)]
        assert markers == [b"<<<<<<<", b"=======", b">>>>>>>"] * (len(markers) // 3), change.rel
        hunks += sum(1 for found in blocks(change.after) if found.where)
        compile(take_the_patch_side(change.after), change.rel, "exec")
    assert hunks


OFFLOADER = "sglang/srt/utils/offloader.py"


def test_a_unit_v_renamed_and_rewrote_gets_a_best_guess_said_as_one():
    """A one-line change to 0.5.17's create_offloader_from_server_args on 0.5.23, which renamed it
    create_offloader and rewrote its lines (server_args.X -> get_exec().offload.X): no place holds
    enough of the hunk's lines as they were, so the block said only 'not found'. The def whose name
    shares the stem and holds most of the hunk's names is the best guess, said as one ('likely'), at
    the line the changed one became; never as 'this release has that code at'."""
    from patchkit.diffs import rebase, unidiff
    from patchkit.releases.pristine import WheelSource
    from testing.diffs import git_diff
    from testing.releases import HOME, pristine

    before = (pristine("0.5.17") / OFFLOADER).read_bytes()
    after = before.replace(b"int(server_args.cpu_offload_gb * 1024**3)", b"int(server_args.cpu_offload_gb * (1 << 30))")
    text = git_diff({OFFLOADER: before}, {OFFLOADER: after})
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("PATCHKIT_HOME", str(HOME))
        source = WheelSource("0.5.23")
        made = rebase.rebase(unidiff.load(text, "offload.patch"), text, "0.5.23", source.read,
                             python_files=source.python_files, package_files=source.package_files)
    (change,) = made.changes
    (block,) = blocks(change.after or b"")
    v = (source.read(OFFLOADER) or b"").splitlines()
    line = next(n for n, x in enumerate(v, 1) if b"cpu_offload_max_bytes=int(get_exec().offload.cpu_offload_gb" in x)
    said = f"this release likely has that code at {OFFLOADER}:{line} (create_offloader_from_server_args is not in " \
        "the file; create_offloader holds "
    assert said in block.where and block.place is None, block.where
    (conflict,) = made.conflicts
    assert said in conflict.detail and "not found:" not in conflict.detail


def _rebase_on(text: bytes, to: str, unknown_base: bool = False):
    from patchkit.diffs import rebase, unidiff
    from patchkit.releases.pristine import WheelSource
    from testing.releases import HOME

    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("PATCHKIT_HOME", str(HOME))
        source = WheelSource(to)
        made = rebase.rebase(unidiff.load(text, "user.patch"), text, to, source.read, python_files=source.python_files,
                             package_files=source.package_files, **(
                                 {"base": lambda file: None, "base_label": "a tree"} if unknown_base else {}))
    return made, source


def _line_of(source, rel: str, code: bytes) -> int:
    return next(n for n, line in enumerate((source.read(rel) or b"").splitlines(), 1) if code in line)


def test_a_block_of_a_file_v_lacks_says_where_its_code_went():
    """0.5.17's disaggregation/encode_server.py is not in 0.5.23, and no file of that name is; its
    _get_mm_grid_dim is EncoderPreprocessor._get_mm_grid_dim in disaggregation/encoder/preprocessor.py
    there (a method now: not found by its name). The block said only 'encode_server.py is not in this
    release'; now where the code is, found by the hunk's lines, in the block and the conflict's detail."""
    from testing.diffs import git_diff
    from testing.releases import pristine

    rel = "sglang/srt/disaggregation/encode_server.py"
    before = (pristine("0.5.17") / rel).read_bytes()
    after = before.replace(b'attrs = ("image_grid_hws", "image_grid_thw", "grid_thws")',
                           b'attrs = ("image_grid_hws", "grid_thws", "image_grid_thw")')
    assert after != before
    made, source = _rebase_on(git_diff({rel: before}, {rel: after}), "0.5.23")
    (change,) = made.changes
    (block,) = blocks(change.after or b"")
    home = "sglang/srt/disaggregation/encoder/preprocessor.py"
    assert block.place is not None and block.place[0] == home, block.where
    near = (source.read(home) or b"").splitlines()[block.place[1] - 1:block.place[1] + 6]
    assert any(b'elif model_type == "kimi_vl":' in line for line in near), near
    said = f"{rel} is not in this release; this release has that code at {home}:{block.place[1]} (moved to that " \
        "file, into EncoderPreprocessor._get_mm_grid_dim)"
    assert said in block.where
    (conflict,) = made.conflicts
    assert said in conflict.detail


def test_a_hunk_of_unknown_base_says_where_its_code_is_and_sits_on_it():
    """A diff made on a tree that is no release (its pre-image's blob in none; one context line its
    own): the hunk's context is not in 0.5.23's offloader.py as it is, so it is placed by its lines.
    The block stood at the unit of the line the hunk names and said only that its context lines are
    not there; now it says where 0.5.23 has that code and sits right above it."""
    from testing.diffs import git_diff
    from testing.releases import pristine

    v = (pristine("0.5.23") / OFFLOADER).read_bytes()
    mine = v.replace(b"            mode=get_exec().offload.offload_mode,\n", b'            mode="cpu",\n')
    changed = mine.replace(b"            prefetch_step=get_exec().offload.offload_prefetch_step,\n",
                           b"            prefetch_step=get_exec().offload.offload_prefetch_step,\n"
                           b"            pin_memory=True,\n")
    assert v != mine != changed
    made, source = _rebase_on(git_diff({OFFLOADER: mine}, {OFFLOADER: changed}), "0.5.23", unknown_base=True)
    (change,) = made.changes
    (block,) = blocks(change.after or b"")
    line = _line_of(source, OFFLOADER, b"group_size=get_exec().offload.offload_group_size,")
    said = f"this release has that code at {OFFLOADER}:{line} (create_offloader is there, changed in those lines)"
    assert said in block.where, block.where
    (conflict,) = made.conflicts
    assert conflict.unit == "create_offloader" and said in conflict.detail
    below = (change.after or b"").splitlines()[block.start - 1 + block.lines]
    assert below.strip() == b"group_size=get_exec().offload.offload_group_size,", below


def test_a_hunk_of_a_file_that_is_not_python_says_where_its_code_is():
    """A .cuh hunk whose context holds a line of the user's own (another epsilon) does not fit 0.5.23's
    file: searched by its lines in that file (no units), its block says where the code is and sits
    above it, where it said only that the hunks do not fit."""
    from testing.diffs import git_diff
    from testing.releases import pristine

    rel = "sglang/kernels/jit/csrc/dsa/fused_store_index_cache.cuh"
    v = (pristine("0.5.23") / rel).read_bytes()
    mine = v.replace(b"fmaxf(1e-4f, abs_max)", b"fmaxf(1e-6f, abs_max)")
    changed = mine.replace(b"const auto inv_scale = 1.0f / scale;", b"const auto inv_scale = __frcp_rn(scale);")
    assert v != mine != changed
    made, source = _rebase_on(git_diff({rel: mine}, {rel: changed}), "0.5.23")
    (change,) = made.changes
    (block,) = blocks(change.after or b"")
    line = _line_of(source, rel, b"const auto abs_max = warp::reduce_max(local_max);")
    said = f"this release has that code at {rel}:{line} (the file is there, changed in those lines)"
    assert said in block.where, block.where
    (conflict,) = made.conflicts
    assert said in conflict.detail
    below = (change.after or b"").splitlines()[block.start - 1 + block.lines]
    assert b"const auto abs_max" in below, below


def test_a_block_of_a_file_v_removed_says_so():
    """0.5.17's compilation/fix_functionalization.py is not in 0.5.23, and no file there holds its
    defunctionalize's lines: the block says the release removed the file (or rewrote that code),
    where it said only that the file is not in this release."""
    from testing.diffs import git_diff
    from testing.releases import pristine

    rel = "sglang/srt/compilation/fix_functionalization.py"
    before = (pristine("0.5.17") / rel).read_bytes()
    after = before.replace(b"        self._remove(node)\n", b"        self._remove(node)\n        graph.lint()\n", 1)
    assert after != before
    made, _ = _rebase_on(git_diff({rel: before}, {rel: after}), "0.5.23")
    (change,) = made.changes
    (block,) = blocks(change.after or b"")
    said = f"{rel} is not in this release, nor the code the diff changes as it was in another file of it: the " \
        "release removed the file (or rewrote that code)"
    assert said in block.where and block.place is None, block.where
    (conflict,) = made.conflicts
    assert conflict.unit == "FixFunctionalizationPass.defunctionalize" and said in conflict.detail


def test_a_block_of_a_unit_moved_to_another_file_names_its_place_there():
    """0.5.15.post1's jit_kernel/utils.py is not in 0.5.17: its load_jit is in kernels/jit/utils/compile.py
    there, found by its name but changed there in the lines the diff changes (a conflict). The block said
    only that no file has the code as it was ('removed the file'); now it names that file and line."""
    from testing.diffs import git_diff
    from testing.releases import pristine

    rel, home = "sglang/jit_kernel/utils.py", "sglang/kernels/jit/utils/compile.py"
    before = (pristine("0.5.15.post1") / rel).read_bytes()
    old = b'    cuda_files = [str((KERNEL_PATH / "csrc" / f).resolve()) for f in cuda_files]\n'
    after = before.replace(old, old.replace(b"for f in cuda_files]", b"for f in sorted(cuda_files)]"))
    assert after != before
    made, source = _rebase_on(git_diff({rel: before}, {rel: after}), "0.5.17")
    line = _line_of(source, home, b"def load_jit(")
    said = f"{rel} is not in this release; this release has that code at {home}:{line} (moved to that file)"
    (conflict,) = made.conflicts
    assert conflict.unit == "load_jit" and said in conflict.detail, conflict.detail
    (change,) = made.changes
    (block,) = blocks(change.after or b"")
    assert said in block.where and block.place == (home, line), block.where


WNA16_MOE = "sglang/srt/layers/quantization/compressed_tensors/schemes/compressed_tensors_wNa16_moe.py"


def test_a_block_of_a_change_the_release_nearly_has_says_what_is_left(tmp_path, monkeypatch):
    """Upstream's own change to wNa16_moe.py between 0.5.13 and 0.5.14 (asymmetric zero points), one of
    its added lines made the user's own, re-applied as a diff onto 0.5.14: create_weights conflicts, git's
    block sets 26 lines of the release against 26 of the diff that differ in one. The block said nothing
    of it (a maintainer compared them line by line); now its `>>>>>>> patch` line and the conflict's
    detail say that 23 of the 24 added lines are there already, where, and the one that is not."""
    from testing.diffs import git_diff
    from testing.releases import pristine

    before, upstream = ((pristine(v) / WNA16_MOE).read_bytes() for v in ("0.5.13", "0.5.14"))
    line = b'            layer.register_parameter("w2_weight_zero_point", w2_qzeros)\n'
    mine = upstream.replace(line, line.replace(b"w2_qzeros)", b"w2_qzeros)  # the user's"))
    assert mine != upstream
    made, source = _rebase_on(git_diff({WNA16_MOE: before}, {WNA16_MOE: mine}), "0.5.14")
    first, last = _line_of(source, WNA16_MOE, b"# add zero param"), _line_of(source, WNA16_MOE, b"set_weight_attrs(w2_qzeros")
    said = (f"23 of 24 added lines already in V at {WNA16_MOE}:{first}-{last}; the rest: "
            '`layer.register_parameter("w2_weight_zero_point", w2_qzeros) # the user\'s`')
    (conflict,) = made.conflicts
    assert conflict.unit == "CompressedTensorsWNA16MoE.create_weights" and conflict.detail.endswith(said), conflict.detail
    (change,) = made.changes
    (block,) = blocks(change.after or b"")
    assert block.where == "" and block.lines == 55  # git's block, as it was
    assert (">>>>>>> patch: " + said).encode() in (change.after or b"").splitlines()
    # bump says it in REPORT.md, --json and its tree
    monkeypatch.setenv("PATCHKIT_HOME", str(wheel_home(tmp_path / "home", ("0.5.13", "0.5.14"))))
    (tmp_path / "set").mkdir()
    (tmp_path / "set" / "zero-points.patch").write_bytes(git_diff({WNA16_MOE: before}, {WNA16_MOE: mine}))
    out = tmp_path / "bump"
    bumped = run("--patches", tmp_path / "set", "bump", "--to", "0.5.14", "-o", out, "--json")
    assert bumped.exit_code == 1, bumped.stderr
    (row,) = [r for r in bumped.json()["patches"] if r["kind"] == "diff"]
    assert [c["detail"].endswith(said) for c in row["conflicts"]] == [True], row["conflicts"]
    assert said in (out / "REPORT.md").read_text()
    assert (">>>>>>> patch: " + said).encode() in (out / row["tree"] / WNA16_MOE).read_bytes().splitlines()


def test_a_block_of_a_unit_moved_out_of_a_file_v_still_has_names_it_there():
    """0.5.16's speculative/dspark_components/dspark_draft.py is in 0.5.17 too, but its
    DsparkDraftSampler.__call__ is in dspark_draft_sampler.py there, rewritten around the line a diff
    changes (`draft_tokens, _ = ...sample_block(` -> `draft_tokens, corrected_logits = ...`): the
    hunk's lines are in no file as they were, so the block said 'not found'. The finder knows the
    unit by its name in that one file: the block and the conflict's detail name it there, at the
    line the changed one became."""
    from testing.diffs import git_diff
    from testing.releases import pristine

    rel, home = "sglang/srt/speculative/dspark_components/dspark_draft.py", \
        "sglang/srt/speculative/dspark_components/dspark_draft_sampler.py"
    before = (pristine("0.5.16") / rel).read_bytes()
    old = b"        draft_tokens, _ = self.markov_head.sample_block(\n"
    after = before.replace(old, old.replace(b"draft_tokens, _ =", b"draft_tokens, draft_logits ="))
    assert after != before and before.count(old) == 1
    made, source = _rebase_on(git_diff({rel: before}, {rel: after}), "0.5.17")
    line = _line_of(source, home, b"draft_tokens, corrected_logits = self.markov_head.sample_block(")
    said = f"this release has that code at {home}:{line} (moved to that file, into DsparkDraftSampler.__call__, " \
        "found by its name: changed there in the lines the diff changes)"
    (conflict,) = made.conflicts
    assert conflict.unit == "DsparkDraftSampler.__call__" and said in conflict.detail, conflict.detail
    assert "not found" not in conflict.detail
    (change,) = made.changes
    assert change.rel == rel
    (block,) = blocks(change.after or b"")
    assert said in block.where and block.place == (home, line), block.where
