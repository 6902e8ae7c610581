"""engine/bump_writer.py: bump's folder (DIR) against a hostile environment (issue 41 items 2 and 3, issue 40
item 11): every name read back from a record is a plain file in DIR, a damaged record is exit 2
naming it, nothing under DIR is followed out of it (exit 6, checked before anything is written),
and the bump removes or replaces only files it wrote. Each case hashes every byte beside DIR
before and after, and DIR's own bytes where the run is refused."""

from __future__ import annotations

import base64
import hashlib
import json
import os
from pathlib import Path

import pytest

from patchkit.base.errors import EnvironmentFailure, UsageError
from patchkit.engine import bump
from patchkit.engine.bump import Bump, Conflict, PatchRow
from testing.releases import entry_hashes as _bytes

KEEP = b"diff --git a/sglang/k.py b/sglang/k.py\nnew file mode 100644\n--- /dev/null\n+++ b/sglang/k.py\n" \
       b"@@ -0,0 +1 @@\n+k = 1\n"
TREE_RECORD = {"schema": 1, "id": "fix", "name": "fix.patch", "to": "0.5.23", "prefix": "",
               "header": base64.b64encode(b"Subject: [PATCH] fix\n\n---\n").decode(), "files": {"sglang/x.py": False}}
ROWS = (PatchRow("keep", "diff", "applies", "applies", bump.CARRIES, written="keep.patch"),
        PatchRow("fix", "diff", "applies", "broken", bump.CONFLICTS, tree="fix.tree",
                 conflicts=(Conflict("sglang/x.py", "f", "not in the file"),)))
FILES = {"keep.patch": KEEP, "fix.tree/sglang/x.py": b"x = 1\n<<<<<<< release\n=======\nx = 2\n>>>>>>> patch\n",
         "fix.tree/.patchkit-rebase.json": json.dumps(TREE_RECORD).encode()}
INPUTS = {"keep": ("keep.patch", KEEP), "fix": ("fix.patch", b"diff\n")}


class _Release:
    """V's files for `resume`: none (the diffs here create theirs)."""

    version = "0.5.23"

    def read(self, rel: str) -> bytes | None:
        return None


@pytest.fixture
def world(tmp_path):
    """DIR written by a bump (a carried diff and a conflict tree), a user's file in it, and the
    user's other files beside it (`outside`, `checkout`)."""
    out = tmp_path / "out"
    bump.write(Bump("0.5.17", "0.5.23", out, ROWS, files=dict(FILES), inputs=INPUTS))
    (out / "MYNOTES.txt").write_text("mine\n")
    (tmp_path / "outside").mkdir()
    (tmp_path / "outside" / "keep.txt").write_text("outside DIR\n")
    (tmp_path / "outside" / "fix.patch").write_bytes(KEEP)
    (tmp_path / "checkout" / "sglang").mkdir(parents=True)
    (tmp_path / "checkout" / "sglang" / "x.py").write_text("the user's checkout\n")
    (tmp_path / "checkout" / ".patchkit-rebase.json").write_text(json.dumps(TREE_RECORD))
    return tmp_path


def _edit_record(out: Path, change) -> None:
    record = json.loads((out / bump.RECORD).read_text())
    change(record)
    (out / bump.RECORD).write_text(json.dumps(record))


def _edit_tree_record(out: Path, change) -> None:
    path = out / "fix.tree" / ".patchkit-rebase.json"
    record = json.loads(path.read_text())
    change(record)
    path.write_text(json.dumps(record))


def _resolve(out: Path) -> None:
    (out / "fix.tree" / "sglang" / "x.py").write_text("x = 2\n")


def _continue(out: Path) -> None:
    bump.write(bump.resume(bump.read(out), _Release(), lambda line: None), fresh=False)  # type: ignore[arg-type]


def _again(out: Path) -> None:
    bump.write(Bump("0.5.17", "0.5.23", out, ROWS, files=dict(FILES), inputs=INPUTS))


def _refused(world: Path, run, error: type, *named: str) -> None:
    """`run` raises `error` (exit 2 or 6) naming each of `named`, and changes no byte anywhere."""
    out = world / "out"
    beside, inside = _bytes(world, skip=out), _bytes(out)
    with pytest.raises(error) as caught:
        run(out)
    assert caught.value.exit_code == (2 if error is UsageError else 6)
    for name in named:
        assert name in str(caught.value), caught.value
    assert _bytes(world, skip=out) == beside and _bytes(out) == inside


def test_the_world_is_a_bump_folder_that_continues(world):
    """The fixture itself: resolved, `--continue` writes fix.patch and keeps the user's file."""
    _resolve(world / "out")
    _continue(world / "out")
    assert (world / "out" / "fix.patch").read_bytes().startswith(b"Subject: [PATCH] fix")
    assert (world / "out" / "MYNOTES.txt").read_text() == "mine\n"
    _again(world / "out")  # a new plan removes the finished tree's files too (the bump read them)
    assert not (world / "out" / "fix.patch").exists() and (world / "out" / "MYNOTES.txt").exists()


@pytest.mark.parametrize("name", ["../outside/pwned.patch", "ABSOLUTE", "sub/fix.patch", ".patchkit-bump.json", "",
                                  "fix\n.patch"])
def test_continue_writes_the_finished_diff_only_under_a_plain_name_in_dir(world, name):
    """Item 2: a tree's record naming the finished diff `../outside/pwned.patch` or an absolute path
    was written there, exit 0; now the record is damaged: exit 2 naming it, nothing written."""
    _resolve(world / "out")
    target = str(world / "outside" / "pwned.patch") if name == "ABSOLUTE" else name
    _edit_tree_record(world / "out", lambda record: record.update(name=target))
    _refused(world, _continue, UsageError, "fix.tree/.patchkit-rebase.json", "damaged")
    assert not (world / "outside" / "pwned.patch").exists()


@pytest.mark.parametrize("rel", ["../../outside/keep.txt", "/etc/hostname", "sglang/../../MYNOTES.txt"])
def test_a_tree_record_naming_a_file_outside_the_tree_is_damaged(world, rel):
    _resolve(world / "out")
    _edit_tree_record(world / "out", lambda record: record["files"].update({rel: True}))
    _refused(world, _continue, UsageError, ".patchkit-rebase.json", "damaged")


DAMAGES = {
    "from missing": lambda r: r.pop("from"),
    "notes a number": lambda r: r.update(notes=5),
    "to not a release": lambda r: r.update(to="../../x"),
    "patches not a list": lambda r: r.update(patches={"a": 1}),
    "a row without its id": lambda r: r["patches"][0].pop("id"),
    "a row with a field it has not": lambda r: r["patches"][0].update(extra=1),
    "a conflict of the wrong type": lambda r: r["patches"][1].update(conflicts=[5]),
    "counts not numbers": lambda r: r["patches"][1].update(counts={"conflict": "1"}),
    "written outside": lambda r: r["patches"][0].update(written="../outside/fix.patch"),
    "written absolute": lambda r: r["patches"][0].update(written="/etc/hostname"),
    "tree outside": lambda r: r["patches"][1].update(tree="../checkout"),
    "tree a path": lambda r: r["patches"][1].update(tree="fix.tree/sglang"),
    "waits on no diff": lambda r: r["patches"][1].update(waits_on=["nothing"]),
    "outputs outside": lambda r: r["outputs"].append("../outside/keep.txt"),
    "outputs absolute": lambda r: r["outputs"].append("/etc/hostname"),
    "outputs a number": lambda r: r["outputs"].append(5),
    "outputs bump's own": lambda r: r["outputs"].append(".patchkit-bump-new/x"),
    "digests not strings": lambda r: r["digests"].update({"keep.patch": 5}),
    "an input named outside": lambda r: r["inputs"]["fix"].update(name="../fix.patch"),
    "an input not base64": lambda r: r["inputs"]["fix"].update(data="!!"),
    "launches not objects": lambda r: r.update(launches=[5]),
    "not json": None,
}


@pytest.mark.parametrize("damage", DAMAGES, ids=list(DAMAGES))
@pytest.mark.parametrize("how", ["--continue", "-o"])
def test_a_damaged_record_is_exit_2_naming_it(world, damage, how):
    """Issue 40 item 11, issue 41 item 2: `KeyError: 'from'`, `"notes": 5` and every other damage
    (a key missing, a value of the wrong type, a name that is not a plain file in DIR) is exit 2
    naming the record, for `--continue` and for a new bump into the folder alike, never 70."""
    out = world / "out"
    if DAMAGES[damage] is None:
        (out / bump.RECORD).write_bytes(b"{\"schema\": 1, \"from\": ")
    else:
        _edit_record(out, DAMAGES[damage])
    _refused(world, (lambda out: bump.read(out)) if how == "--continue" else _again, UsageError,
             str(out / bump.RECORD))


def test_outputs_never_name_a_file_of_the_users(world):
    """Item 2: the record's `outputs` naming MYNOTES.txt made the next bump delete it; outputs are
    only files whose bytes are the ones the bump wrote (the record keeps their sha256)."""
    _edit_record(world / "out", lambda r: r["outputs"].append("MYNOTES.txt"))
    _refused(world, _again, UsageError, "MYNOTES.txt")
    _edit_record(world / "out", lambda r: r["digests"].update({"MYNOTES.txt": hashlib.sha256(b"x").hexdigest()}))
    _refused(world, _again, UsageError, "MYNOTES.txt")


def test_an_edited_tree_is_not_removed_by_a_new_bump(world):
    """A tree the user edited and did not `--continue` holds work the bump did not write: refused."""
    (world / "out" / "fix.tree" / "sglang" / "x.py").write_text("x = 3  # half resolved\n")
    _refused(world, _again, UsageError, "fix.tree/sglang/x.py", "changed since")


def test_a_user_file_where_the_bump_writes_is_never_overwritten(world):
    (world / "out" / "other.patch").write_text("mine too\n")
    again = Bump("0.5.17", "0.5.23", world / "out", ROWS, files={**FILES, "other.patch": KEEP}, inputs=INPUTS)
    _refused(world, lambda out: bump.write(again), UsageError, "other.patch")


@pytest.mark.parametrize("run", [_again, _continue], ids=["a new bump writes", "--continue reads"])
def test_a_tree_replaced_by_a_symlink_to_a_checkout_is_never_followed(world, run):
    """Item 3: `NAME.tree` a symlink to the user's checkout: a new bump replaced the checkout's file;
    `--continue` never reads a tree through the link either."""
    out = world / "out"
    import shutil

    shutil.rmtree(out / "fix.tree")
    os.symlink(world / "checkout", out / "fix.tree")
    _refused(world, run, EnvironmentFailure, str(out / "fix.tree"), "symlink")


def test_a_symlinked_folder_in_outputs_is_refused_before_anything_is_written(world):
    """Item 3: `DIR/sub` a symlink to an outside folder and `sub/keep.txt` in outputs (its sha256 in
    the record too): the outside file was moved into DIR and deleted, then exit 6; now exit 6
    before anything is written."""
    out = world / "out"
    os.symlink(world / "outside", out / "sub")
    digest = hashlib.sha256((world / "outside" / "keep.txt").read_bytes()).hexdigest()
    _edit_record(out, lambda r: (r["outputs"].append("sub/keep.txt"), r["digests"].update({"sub/keep.txt": digest})))
    _refused(world, _again, EnvironmentFailure, str(out / "sub"), "symlink")


def test_continue_never_reads_a_written_diff_through_a_symlink(world):
    out = world / "out"
    (out / "keep.patch").unlink()
    os.symlink(world / "outside" / "fix.patch", out / "keep.patch")
    _refused(world, _continue, EnvironmentFailure, str(out / "keep.patch"), "symlink")


@pytest.mark.parametrize("how", ["--continue", "-o"])
def test_the_record_is_never_read_through_a_symlink(world, how):
    out = world / "out"
    (world / "outside" / "record.json").write_bytes((out / bump.RECORD).read_bytes())
    (out / bump.RECORD).unlink()
    os.symlink(world / "outside" / "record.json", out / bump.RECORD)
    _refused(world, (lambda out: bump.read(out)) if how == "--continue" else _again, EnvironmentFailure,
             str(out / bump.RECORD), "symlink")


_STEPS = ("rename", "replace", "unlink", "rmdir", "mkdir", "fsync")


def _killed_at(n: int, run) -> int:
    """Run `run` in a forked child that dies (os._exit, no clean-up, as under SIGKILL) at its `n`-th
    call of a step that changes the disk or syncs it; how many such calls it made (n or fewer)."""
    import signal

    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child
        os.close(read_end)
        calls = [0]

        def counted(name):
            real = getattr(os, name)

            def step(*args, **kwargs):
                calls[0] += 1
                os.write(write_end, b".")
                if calls[0] == n:
                    os.kill(os.getpid(), signal.SIGKILL)
                return real(*args, **kwargs)
            return step

        for name in _STEPS:
            setattr(os, name, counted(name))
        try:
            run()
        finally:
            os._exit(0)
    os.close(write_end)
    made = b""
    while chunk := os.read(read_end, 4096):
        made += chunk
    os.close(read_end)
    os.waitpid(pid, 0)
    return len(made)


def test_a_kill_at_any_step_leaves_the_earlier_set_or_the_new_one(world):
    """Item 4: a bump killed at any step of its write into an earlier bump's DIR (every rename,
    removal, folder made or removed, sync) leaves DIR as the earlier set or the new one (a
    `.patchkit-bump-new/` the next run removes aside; where the journal is there, the switch is
    past its commit point), and the next run reaches the new set, the user's file kept."""
    import shutil

    out = world / "out"
    # A tree three folders deep (its emptied folders are removed up to the tree's own, a kill between any two).
    bump.write(Bump("0.5.17", "0.5.23", out, ROWS, files={**FILES, "fix.tree/sglang/srt/utils/deep.py": b"d = 1\n"},
                    inputs=INPUTS))
    new = Bump("0.5.17", "0.5.16", out, ROWS[:1], files={"keep.patch": KEEP + b"+again\n", "other.patch": KEEP},
               inputs=INPUTS)
    start = _bytes(out)
    seed = world / "seed"
    shutil.copytree(out, seed, symlinks=True)
    bump.write(new)
    end = _bytes(out)
    assert end != start
    n, seen = 1, set()
    while True:
        shutil.rmtree(out)
        shutil.copytree(seed, out, symlinks=True)
        made = _killed_at(n, lambda: bump.write(new))
        now = _bytes(out)
        shown = {rel: v for rel, v in now.items() if not rel.startswith(".patchkit-bump-new")}
        if ".patchkit-bump-journal.json" not in now:
            assert shown in (start, end), f"killed at step {n}: {sorted(set(shown.items()) ^ set(start.items()))}"
        seen.add("start" if shown == start else "end" if shown == end else "journal")
        bump.write(new)  # the next run
        assert _bytes(out) == end, f"killed at step {n}: the next run did not reach the new set"
        if made < n:  # the run completed before the n-th step
            break
        n += 1
    assert n > 10 and {"start", "end", "journal"} <= seen, (n, seen)


def test_a_ctrl_c_after_the_commit_point_waits_for_the_switch_and_says_so(world, monkeypatch):
    """A SIGINT at the journal's rename (the commit point) is held until the new set is in place,
    then exit 130 saying DIR holds it; before, KeyboardInterrupt left DIR half switched and the
    error handler said no file was changed."""
    import signal

    from patchkit.base import confined
    from patchkit.base.errors import Interrupted

    out = world / "out"
    new = Bump("0.5.17", "0.5.16", out, ROWS[:1], files={"keep.patch": KEEP + b"+again\n"}, inputs=INPUTS)
    real = confined.rename

    def interrupted(root, src, dst):
        if dst == bump.JOURNAL:
            os.kill(os.getpid(), signal.SIGINT)
        return real(root, src, dst)

    monkeypatch.setattr(confined, "rename", interrupted)
    # SIGINT's default handler, as a terminal's command has it: a process started from a shell's
    # background (.ci/run under nohup ... &) inherits SIGINT ignored, and the switch rightly lets an
    # ignored Ctrl-C pass (test_lock's Ctrl-C child does the same, ba20969).
    default = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        with pytest.raises(Interrupted, match="committed and was put in place first") as caught:
            bump.write(new)
    finally:
        signal.signal(signal.SIGINT, default)
    assert caught.value.exit_code == 130
    monkeypatch.setattr(confined, "rename", real)
    done = _bytes(out)
    bump.write(new)
    assert _bytes(out) == done and not (out / "fix.tree").exists() and (out / "MYNOTES.txt").exists()
