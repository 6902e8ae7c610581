"""`bump` in a hostile folder (issue 41, its last paragraph): a real DIR written by a bump from
0.5.17 to 0.5.23 (a conflict tree, the record), then a symlink or a `..` put in every name bump
reads back, or a file of the user's in DIR, and the real CLI run on it (`bump -o DIR` again and
`bump --continue DIR`). Each case hashes every byte outside DIR (a folder beside it, the user's
checkout) before and after, and DIR's own bytes where the run is refused."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from pathlib import Path

import pytest

from testing.checkout import wheel_home
from testing.cli import run
from testing.releases import entry_hashes as _bytes

pytestmark = [pytest.mark.integration, pytest.mark.slow]

OFFLOADER = "sglang/srt/utils/offloader.py"
TREE = "offload-bytes.tree"
V0, V = "0.5.17", "0.5.23"


@pytest.fixture(scope="module")
def seed(tmp_path_factory):
    """The DIR a real bump wrote (exit 1: the offload diff conflicts on 0.5.23, a tree to resolve),
    the same resolved, and the set it was made from."""
    from testing.diffs import git_diff
    from testing.field_diffs import take_the_patch_side
    from testing.releases import pristine

    root = tmp_path_factory.mktemp("hostile")
    os.environ["PATCHKIT_HOME"] = str(wheel_home(root / "home", (V0, V)))
    before = (pristine(V0) / OFFLOADER).read_bytes()
    after = before.replace(b"int(server_args.cpu_offload_gb * 1024**3)", b"int(server_args.cpu_offload_gb * (1 << 30))")
    (root / "set").mkdir()
    (root / "set" / "offload-bytes.patch").write_bytes(
        git_diff({OFFLOADER: before}, {OFFLOADER: after}, header="Subject: [PATCH] offload bytes\n\n---\n"))
    made = run("--patches", root / "set", "bump", "--from", V0, "--to", V, "-o", root / "bumped")
    assert made.exit_code == 1, made.stderr
    shutil.copytree(root / "bumped", root / "resolved")
    path = root / "resolved" / TREE / OFFLOADER
    path.write_bytes(take_the_patch_side(path.read_bytes()).replace(b"offload_gb * 1024**3)",
                                                                    b"offload_gb * (1 << 30))"))
    yield root
    os.environ.pop("PATCHKIT_HOME", None)


def _world(seed: Path, tmp_path: Path, which: str) -> Path:
    """DIR (`out`, a copy of the seed's) with the user's file in it, beside `outside` and `checkout`."""
    shutil.copytree(seed / which, tmp_path / "out", symlinks=True)
    (tmp_path / "out" / "MYNOTES.txt").write_text("the user's notes\n")
    (tmp_path / "outside").mkdir()
    (tmp_path / "outside" / "keep.txt").write_text("outside DIR\n")
    (tmp_path / "outside" / "offload-bytes.patch").write_bytes((seed / "set" / "offload-bytes.patch").read_bytes())
    shutil.copytree(tmp_path / "out" / TREE, tmp_path / "checkout")  # the user's checkout, shaped like the tree
    return tmp_path / "out"


def _record(out: Path, change, name: str = ".patchkit-bump.json") -> None:
    path = out / name
    data = json.loads(path.read_text())
    change(data)
    path.write_text(json.dumps(data))


def _tree_record(out: Path, change) -> None:
    _record(out, change, f"{TREE}/.patchkit-rebase.json")


def _symlink(path: Path, target: Path) -> None:
    shutil.rmtree(path) if path.is_dir() and not path.is_symlink() else path.unlink()
    os.symlink(target, path)


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


# (case, DIR it starts from, what is done to it, the command: "again" a new bump, "continue"; exit, named)
CASES = {
    "tree name ..": ("resolved", lambda t, out: _tree_record(out, lambda r: r.update(name="../outside/pwned.patch")),
                     "continue", 2, ".patchkit-rebase.json"),
    "tree name absolute": ("resolved", lambda t, out: _tree_record(out, lambda r: r.update(
        name=str(t / "outside" / "pwned.patch"))), "continue", 2, ".patchkit-rebase.json"),
    "tree files ..": ("resolved", lambda t, out: _tree_record(out, lambda r: r["files"].update(
        {"../../outside/keep.txt": True})), "continue", 2, ".patchkit-rebase.json"),
    "tree base ..": ("resolved", lambda t, out: _tree_record(out, lambda r: r.update(
        base={"../x.py": "eA=="})), "continue", 2, ".patchkit-rebase.json"),
    "outputs ..": ("bumped", lambda t, out: _record(out, lambda r: r["outputs"].append("../outside/keep.txt")),
                   "again", 2, ".patchkit-bump.json"),
    "outputs absolute": ("bumped", lambda t, out: _record(out, lambda r: r["outputs"].append(
        str(t / "outside" / "keep.txt"))), "again", 2, ".patchkit-bump.json"),
    "digests ..": ("bumped", lambda t, out: _record(out, lambda r: r["digests"].update({"../outside/keep.txt": "0"})),
                   "again", 2, ".patchkit-bump.json"),
    "written ..": ("resolved", lambda t, out: _record(out, lambda r: r["patches"][-1].update(
        written="../outside/offload-bytes.patch")), "continue", 2, ".patchkit-bump.json"),
    "tree ..": ("resolved", lambda t, out: _record(out, lambda r: r["patches"][-1].update(tree="../checkout")),
                "continue", 2, ".patchkit-bump.json"),
    "input name ..": ("resolved", lambda t, out: _record(out, lambda r: next(iter(r["inputs"].values())).update(
        name="../outside/x.patch")), "continue", 2, ".patchkit-bump.json"),
    "from missing": ("resolved", lambda t, out: _record(out, lambda r: r.pop("from")), "continue", 2,
                     ".patchkit-bump.json"),
    "notes a number": ("resolved", lambda t, out: _record(out, lambda r: r.update(notes=5)), "continue", 2,
                       ".patchkit-bump.json"),
    "outputs name the user's file": ("bumped", lambda t, out: _record(out, lambda r: (
        r["outputs"].append("MYNOTES.txt"), r["digests"].update({"MYNOTES.txt": "0" * 64}))), "again", 2,
        "MYNOTES.txt"),
    "tree a symlink to the checkout": ("bumped", lambda t, out: _symlink(out / TREE, t / "checkout"), "again", 6,
                                       TREE),
    "tree a symlink, continued": ("resolved", lambda t, out: _symlink(out / TREE, t / "checkout"), "continue", 6,
                                  TREE),
    "a folder a symlink out, in outputs": ("bumped", lambda t, out: (os.symlink(t / "outside", out / "sub"), _record(
        out, lambda r: (r["outputs"].append("sub/keep.txt"),
                        r["digests"].update({"sub/keep.txt": _digest(t / "outside" / "keep.txt")})))), "again", 6,
        "sub"),
    "the record a symlink": ("resolved", lambda t, out: (shutil.copy(out / ".patchkit-bump.json", t / "outside" / "r"),
                                                         _symlink(out / ".patchkit-bump.json", t / "outside" / "r")),
                             "continue", 6, ".patchkit-bump.json"),
    "the record a symlink, again": ("bumped", lambda t, out: (
        shutil.copy(out / ".patchkit-bump.json", t / "outside" / "r"),
        _symlink(out / ".patchkit-bump.json", t / "outside" / "r")), "again", 6, ".patchkit-bump.json"),
    "a tree file a symlink": ("resolved", lambda t, out: _symlink(out / TREE / OFFLOADER, t / "outside" / "keep.txt"),
                              "continue", 2, OFFLOADER),
}


@pytest.mark.parametrize("case", CASES, ids=list(CASES))
def test_a_hostile_folder_changes_nothing_outside_and_is_refused(seed, tmp_path, case):
    which, tamper, how, code, named = CASES[case]
    out = _world(seed, tmp_path, which)
    tamper(tmp_path, out)
    beside, inside = _bytes(tmp_path, skip=out), _bytes(out)
    args = ("bump", "--continue", out) if how == "continue" else \
        ("--patches", seed / "set", "bump", "--from", V0, "--to", V, "-o", out)
    done = run(*args)
    assert done.exit_code == code, done.stderr
    assert named in done.stderr and "Traceback" not in done.stderr, done.stderr
    assert _bytes(tmp_path, skip=out) == beside, "a byte outside DIR changed"
    assert _bytes(out) == inside, "DIR changed though the run was refused"


def test_a_users_file_in_dir_stays_through_a_new_bump_and_continue(seed, tmp_path):
    out = _world(seed, tmp_path, "bumped")
    beside = _bytes(tmp_path, skip=out)
    again = run("--patches", seed / "set", "bump", "--from", V0, "--to", V, "-o", out)
    assert again.exit_code == 1, again.stderr
    shutil.rmtree(out / TREE)
    shutil.copytree(seed / "resolved" / TREE, out / TREE)
    done = run("bump", "--continue", out)
    assert done.exit_code == 0, done.stderr
    assert (out / "MYNOTES.txt").read_text() == "the user's notes\n" and (out / "offload-bytes.patch").is_file()
    assert _bytes(tmp_path, skip=out) == beside
