"""A folder `bump` wrote and has not finished is not a patch set to ship (issue 40.1): every
command that loads `--patches DIR` refuses it (exit 1, naming the patches in conflict and `bump
--continue DIR`), unless --allow-incomplete takes the rest of it and says what it leaves out; once
`--continue` finishes it, it loads as any folder. Built from a real bump 0.5.17 -> 0.5.23 that
conflicts."""

from __future__ import annotations

from pathlib import Path

import pytest

from testing.cli import run
from tests.integration.test_bump import _own_module, home, tree_hashes  # noqa: F401  (home: a fixture)

pytestmark = pytest.mark.integration

MODEL_CONFIG = "sglang/srt/configs/model_config.py"
DEVICE_CONFIG = "sglang/srt/configs/device_config.py"  # the same bytes on 0.5.13-0.5.23


def _diff(rel: str, old: bytes, new: bytes) -> bytes:
    from testing.diffs import git_diff
    from testing.releases import pristine

    before = (pristine("0.5.17") / rel).read_bytes()
    assert before.count(old) == 1, (rel, old)
    return git_diff({rel: before}, {rel: before.replace(old, new)}, prefix="python/")


def conflicting_set(folder: Path) -> None:
    """The user's set on 0.5.17: a module of their own, a diff that carries over, and a one-line
    change to ModelConfig.get_num_attention_heads, whose line 0.5.23 changed (a conflict)."""
    _own_module(folder)
    (folder / "heads-fix.patch").write_bytes(_diff(
        MODEL_CONFIG, b"        total_num_attention_heads = self.num_attention_heads\n",
        b"        total_num_attention_heads = int(self.num_attention_heads)\n"))
    (folder / "device-fix.patch").write_bytes(_diff(
        DEVICE_CONFIG, b'            raise RuntimeError(f"Not supported device type: {device}")\n',
        b'            raise RuntimeError(f"Not a supported device type: {device}")\n'))


def test_an_unfinished_bump_folder_is_refused_until_continue_finishes_it(home, tmp_path):  # noqa: F811
    from testing.field_diffs import take_the_patch_side
    from testing.releases import copy_minimal

    conflicting_set(tmp_path / "mine")
    out = tmp_path / "bump"
    made = run("--patches", tmp_path / "mine", "bump", "--from", "0.5.17", "--to", "0.5.23", "-o", out, "--json")
    assert made.exit_code == 1, made.stderr
    rows = {row["id"]: row for row in made.json()["patches"]}
    assert rows["heads-fix"]["action"] == "conflicts" and rows["heads-fix"]["tree"] == "heads-fix.tree"
    assert rows["device-fix"]["action"] == "carries over" and (out / "device-fix.patch").is_file()
    assert (out / "my_load_fix.py").is_file() and not (out / "heads-fix.patch").exists()

    site = copy_minimal("0.5.23", tmp_path / "tree", (MODEL_CONFIG, DEVICE_CONFIG))
    before = tree_hashes(site)
    wheel = tmp_path / "sglang_patchkit-0.1.0-py3-none-any.whl"
    wheel.write_bytes(b"PK")
    dockerfile = ("image", "dockerfile", "--base", "b", "--target", "0.5.23", "--wheel", wheel)
    commands = {"apply": ("--site-packages", site), "status": ("--site-packages", site), "list": (),
                "image dockerfile": (*dockerfile[2:], "-o", tmp_path / "refused" / "Dockerfile")}
    (tmp_path / "refused").mkdir()
    for name, rest in commands.items():
        words = name.split()
        for refused in (run("--patches", out, *words, *rest), run(*words, "--patches", out, *rest)):
            assert refused.exit_code == 1, (name, refused.stderr)
            assert "unfinished bump (SGLang 0.5.17 -> 0.5.23)" in refused.stderr, (name, refused.stderr)
            assert "in conflict: heads-fix" in refused.stderr and f"patchkit bump --continue {out}" in refused.stderr
            assert "--allow-incomplete" in refused.stderr and "Traceback" not in refused.stderr
    assert tree_hashes(site) == before and sorted(p.name for p in (tmp_path / "refused").iterdir()) == []

    # --allow-incomplete: the rest of the set, and each command says what it leaves out.
    said = "warning: --allow-incomplete: --patches {} is an unfinished bump (SGLang 0.5.17 -> 0.5.23); left out: " \
           "in conflict: heads-fix".format(out)
    listed = run("--patches", out, "--allow-incomplete", "list", "--json")
    assert listed.exit_code == 0 and said in listed.stderr, listed.stderr
    ids = {p["id"] for p in listed.json()["patches"]}
    assert {"device-fix", "my-load-fix"} <= ids and "heads-fix" not in ids
    applied = run("apply", "--patches", out, "--allow-incomplete", "--site-packages", site, "--only", "device-fix")
    assert applied.exit_code == 0 and said in applied.stderr, applied.stderr
    assert b"Not a supported device type" in (site / DEVICE_CONFIG).read_bytes()
    states = run("--allow-incomplete", "--patches", out, "status", "--site-packages", site, "--json")
    assert states.exit_code == 0 and said in states.stderr, states.stderr
    assert {p["id"]: p["state"] for p in states.json()["patches"]}["device-fix"] == "applied"
    assert run("--patches", out, "revert", "--site-packages", site, "--allow-incomplete").exit_code == 0
    assert tree_hashes(site) == before
    # The image's build context holds the set, never the bump's report or its trees (issue 43.6).
    context = tmp_path / "context"
    context.mkdir()
    image = run("--patches", out, "--allow-incomplete", *dockerfile, "-o", context / "Dockerfile")
    assert image.exit_code == 0 and said in image.stderr, image.stderr
    (copied,) = (context / "patchkit-patches").iterdir()
    assert sorted(p.name for p in copied.iterdir()) == ["device-fix.patch", "my_load_fix.py"]

    # Finished by `bump --continue`: a folder like any other.
    for path in out.glob("heads-fix.tree/sglang/**/*.py"):
        path.write_bytes(take_the_patch_side(path.read_bytes()))
    done = run("bump", "--continue", out, "--json")
    assert done.exit_code == 0 and done.json()["complete"], done.stderr
    listed = run("--patches", out, "list", "--json")
    assert listed.exit_code == 0 and "unfinished" not in listed.stderr, listed.stderr
    assert {"device-fix", "heads-fix", "my-load-fix"} <= {p["id"] for p in listed.json()["patches"]}
    states = run("--patches", out, "status", "--site-packages", site, "--json")
    assert states.exit_code == 0, states.stderr
    assert {p["id"]: p["state"] for p in states.json()["patches"]}["heads-fix"] == "pending"
    finished = tmp_path / "finished"
    finished.mkdir()
    assert run("--patches", out, *dockerfile, "-o", finished / "Dockerfile").exit_code == 0
    (copied,) = (finished / "patchkit-patches").iterdir()
    assert sorted(p.name for p in copied.iterdir()) == ["device-fix.patch", "heads-fix.patch", "my_load_fix.py"]


def test_one_diff_of_an_unfinished_bump_folder_is_refused_as_the_folder_is(home, tmp_path):  # noqa: F811
    """issue 40.1: `--patches DIR/x.patch` (one diff file of an unfinished bump's folder) skipped the
    refusal the folder gets and loaded as finished; it is refused alike (exit 1, naming the patch in
    conflict and `bump --continue DIR`), nothing written, and taken under --allow-incomplete."""
    from testing.releases import copy_minimal

    conflicting_set(tmp_path / "mine")
    out = tmp_path / "bump"
    made = run("--patches", tmp_path / "mine", "bump", "--from", "0.5.17", "--to", "0.5.23", "-o", out, "--json")
    assert made.exit_code == 1, made.stderr
    steps = made.json()["next"]  # never a command the folder refuses
    assert any(f"`patchkit bump --continue {out}`" in step for step in steps), steps
    assert all(c.endswith(" --allow-incomplete") for step in steps for c in step.split("`")[1::2]
               if c.startswith("patchkit --patches")), steps
    site = copy_minimal("0.5.23", tmp_path / "tree", (MODEL_CONFIG, DEVICE_CONFIG))
    before = tree_hashes(site)
    one = out / "device-fix.patch"
    for refused in (run("--patches", one, "apply", "--site-packages", site), run("list", "--patches", one),
                    run("--patches", one, "status", "--site-packages", site)):
        assert refused.exit_code == 1, refused.stderr
        assert "unfinished bump (SGLang 0.5.17 -> 0.5.23)" in refused.stderr, refused.stderr
        assert "in conflict: heads-fix" in refused.stderr and f"patchkit bump --continue {out}" in refused.stderr
        assert "Traceback" not in refused.stderr
    assert tree_hashes(site) == before
    applied = run("--patches", one, "--allow-incomplete", "apply", "--site-packages", site)
    assert applied.exit_code == 0 and "left out: in conflict: heads-fix" in applied.stderr, applied.stderr
    assert b"Not a supported device type" in (site / DEVICE_CONFIG).read_bytes()


def test_a_patch_module_that_conflicts_is_a_tree_to_fix_and_continue_takes_it_back(home, tmp_path):  # noqa: F811
    """A module of the user's set that works on PrefetchOperation.increment (0.5.17; gone on 0.5.23)
    conflicts: it is never copied into DIR as if it worked (issue 40.11d) but written as
    NAME.tree/ (the module and 0.5.23's file it targets), the next step says to fix it there; once
    fixed, `--continue` judges it on 0.5.23 and copies it into DIR."""
    from testing.releases import pristine

    target = "sglang/srt/managers/cache_controller.py"
    made = run("new", "prefetch-fix", "--target", target, "--class", "PrefetchOperation", "--method", "increment",
               "--out", tmp_path / "mine")
    assert made.exit_code == 0, made.stderr
    out = tmp_path / "bump"
    done = run("--patches", tmp_path / "mine", "bump", "--from", "0.5.17", "--to", "0.5.23", "-o", out, "--json")
    assert done.exit_code == 1, done.stderr
    row = next(row for row in done.json()["patches"] if row["id"] == "prefetch-fix")
    assert (row["action"], row["written"], row["tree"]) == ("conflicts", None, "prefetch_fix.tree")
    assert not (out / "prefetch_fix.py").exists()
    tree = out / "prefetch_fix.tree"
    assert (tree / "prefetch_fix.py").read_bytes() == (tmp_path / "mine" / "prefetch_fix.py").read_bytes()
    assert (tree / target).read_bytes() == (pristine("0.5.23") / target).read_bytes()
    steps = done.json()["next"]
    assert steps[0].startswith("fix each patch module that does not work on SGLang 0.5.23 in its tree") and \
        f"{tree}/prefetch_fix.py" in steps[0] and steps[0].endswith(f"`patchkit bump --continue {out}`")

    again = run("bump", "--continue", out, "--json")  # not fixed yet: still a conflict, nothing copied
    assert again.exit_code == 1 and not (out / "prefetch_fix.py").exists(), again.stderr
    module = tree / "prefetch_fix.py"
    module.write_bytes(module.read_bytes().replace(b'METHOD = "increment"', b'METHOD = "mark_terminate"'))
    finished = run("bump", "--continue", out, "--json")
    assert finished.exit_code == 0 and finished.json()["complete"], finished.stderr
    row = next(row for row in finished.json()["patches"] if row["id"] == "prefetch-fix")
    assert (row["on_to"], row["action"], row["written"]) == ("applies", "rebased", "prefetch_fix.py")
    assert (out / "prefetch_fix.py").read_bytes() == module.read_bytes()
    listed = run("--patches", out, "list", "--json")
    assert listed.exit_code == 0 and [p["id"] for p in listed.json()["patches"]].count("prefetch-fix") == 1


SERVER_ARGS = "sglang/srt/server_args.py"
SCHEDULE = "sglang/srt/arg_groups/fields/schedule.py"  # ServerArgs' scheduling fields, on 0.5.23


def test_a_resolution_that_moves_the_change_to_another_file_of_v_is_taken(home, tmp_path):  # noqa: F811
    """Issue 40.8: a one-line change of ServerArgs.chunked_prefill_size's default on 0.5.17, where
    0.5.23 keeps the field in arg_groups/fields/schedule.py. The maintainer leaves server_args.py
    as 0.5.23 has it and makes the change in schedule.py, put into the tree at its path: --continue
    takes that file into the diff, says so on stderr and in REPORT.md, exit 0 (before: exit 1,
    'every file has SGLang 0.5.23's bytes', the edit only 'ignored'). A file the tree holds that is
    not 0.5.23's is an error naming it, the diff not written."""
    from testing.releases import pristine

    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "chunk-default.patch").write_bytes(_diff(
        SERVER_ARGS, b'NS("schedule"),\n    ] = None\n    enable_dynamic_chunking', b'NS("schedule"),\n    ] = 8192\n'
                     b'    enable_dynamic_chunking'))
    out = tmp_path / "bump"
    made = run("--patches", mine, "bump", "--from", "0.5.17", "--to", "0.5.23", "-o", out, "--json")
    assert made.exit_code == 1, made.stderr
    row = next(row for row in made.json()["patches"] if row["id"] == "chunk-default")
    assert row["action"] == "conflicts" and row["tree"] == "chunk-default.tree"
    tree = out / "chunk-default.tree"
    (tree / SERVER_ARGS).write_bytes((pristine("0.5.23") / SERVER_ARGS).read_bytes())  # left as 0.5.23 has it
    field = (pristine("0.5.23") / SCHEDULE).read_bytes()
    at = field.index(b"    chunked_prefill_size: A[")
    end = field.index(b"] = None\n", at) + len(b"] = ")
    (tree / SCHEDULE).parent.mkdir(parents=True, exist_ok=True)
    (tree / SCHEDULE).write_bytes(field[:end] + b"8192" + field[end + len(b"None"):])
    stray = tree / "sglang/srt/arg_groups/fields/mine.py"
    stray.write_bytes(b"X = 1\n")
    refused = run("bump", "--continue", out, "--json")
    assert refused.exit_code == 1 and f"{stray}: not a file of SGLang 0.5.23's package" in refused.stderr
    assert not (out / "chunk-default.patch").exists()
    stray.unlink()
    done = run("bump", "--continue", out, "--json")
    assert done.exit_code == 0 and done.json()["complete"], done.stderr
    assert f"taken from chunk-default.tree: {SCHEDULE}" in done.stderr
    assert f"taken: {SCHEDULE}" in (out / "REPORT.md").read_text()
    diff = (out / "chunk-default.patch").read_bytes()
    assert b"+++ b/python/" + SCHEDULE.encode() in diff and b"+    ] = 8192\n" in diff
    assert SERVER_ARGS.encode() not in diff


def test_a_block_left_in_a_tree_names_bumps_own_continue_pasteable(home, tmp_path):  # noqa: F811
    """`bump --continue` with a conflict block still in NAME.tree: the diff stays a conflict whose
    detail names the file and line, and the command to run again is the folder's own `patchkit bump
    --continue DIR`, quoted for a shell (issue 44 item 6). It said `patchkit rebase --continue
    DIR/NAME.tree` (rebase's command, unquoted: a folder with a space became two words)."""
    import shlex

    conflicting_set(tmp_path / "mine")
    out = tmp_path / "my bump"
    made = run("--patches", tmp_path / "mine", "bump", "--from", "0.5.17", "--to", "0.5.23", "-o", out, "--json")
    assert made.exit_code == 1, made.stderr
    again = run("bump", "--continue", out, "--json")
    assert again.exit_code == 1, again.stderr
    row = {row["id"]: row for row in again.json()["patches"]}["heads-fix"]
    assert row["action"] == "conflicts" and f"{out}/heads-fix.tree/{MODEL_CONFIG}:" in row["detail"], row
    assert ": a conflict block is still there (<<<<<<< " in row["detail"], row["detail"]
    assert shlex.split(row["detail"].split("`")[-2]) == ["patchkit", "bump", "--continue", str(out)], row["detail"]
