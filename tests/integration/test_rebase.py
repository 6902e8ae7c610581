"""`patchkit rebase` on real releases: upstream's own change to offloader.py between 0.5.20 and
0.5.21 (made by real git from the two releases' files) re-made against older releases. Where it
resolves, `git apply --check` takes the rebased diff on a checkout of that release, the diff
loads as a patch that is pending there, and `patchkit apply` writes what `git apply` writes;
where a unit conflicts it is listed, exit 1."""

from __future__ import annotations

import re

import pytest

from testing.checkout import checkout, git, package_bytes, wheel_home
from testing.cli import run
from testing.diffs import git_diff, fails_only_beside_the_built_in
from testing.releases import pristine

pytestmark = pytest.mark.integration

OFFLOADER = "sglang/srt/utils/offloader.py"
HEADER = "Patchkit-Id: offload-tied\nPatchkit-Title: the offload hook keeps tied parameters tied (0.5.21's change)\n\n"


@pytest.fixture
def home(tmp_path, monkeypatch):
    monkeypatch.setenv("PATCHKIT_HOME", str(wheel_home(tmp_path / "home", ("0.5.17", "0.5.19", "0.5.20"))))


def upstream_diff(prefix: str = "", format_patch: bool = False) -> bytes:
    before, after = ((pristine(v) / OFFLOADER).read_bytes() for v in ("0.5.20", "0.5.21"))
    return git_diff({OFFLOADER: before}, {OFFLOADER: after}, prefix=prefix, header=HEADER, format_patch=format_patch)


def test_rebased_where_every_unit_resolves(home, release, tmp_path):
    diff = tmp_path / "offload-tied.diff"
    diff.write_bytes(upstream_diff())
    out = tmp_path / "rebased.diff"
    result = run("rebase", diff, "--to", "0.5.19", "-o", out, "--json")
    assert result.exit_code == 0, result.stderr
    report = result.json()
    assert report["from"] == ["0.5.20 (1/1 files)"] and report["conflicts"] == []
    assert report["counts"]["transplanted"] >= 4, report["counts"]
    text = out.read_bytes()
    assert text.startswith(HEADER.encode())  # header kept, same prefix as the input (a/sglang/...)
    base = (pristine("0.5.19") / OFFLOADER).read_bytes()
    from patchkit.diffs.unidiff import git_blob_sha1
    assert f"\nindex {git_blob_sha1(base)}..".encode() in text and b"\n--- a/sglang/srt/utils/offloader.py\n" in text

    site = release("0.5.19")
    repo = checkout(site, tmp_path / "repo")
    checked = git(repo, "apply", "--directory=python", "--check", out, check=False)
    assert checked.returncode == 0, checked.stderr
    git(repo, "apply", "--directory=python", out)
    states = {p["id"]: p for p in run("--patches", out, "status", "--site-packages", site, "--json").json()["patches"]}
    assert fails_only_beside_the_built_in(states["offload-tied"]), states["offload-tied"]
    applied = run("--patches", out, "apply", "--only", "offload-tied", "--site-packages", site)
    assert applied.exit_code == 0, applied.stderr
    assert package_bytes(site)[OFFLOADER] == package_bytes(repo / "python")[OFFLOADER]


def test_rebased_with_a_conflicting_unit(home, release, tmp_path):
    """0.5.17 has no create_offloader (0.5.21 changed its signature; 0.5.17 calls it
    create_offloader_from_server_args): that unit conflicts, written as its own block carrying its
    change (it was once left out, and the rest loaded `pending`: the change silently dropped)."""
    diff = tmp_path / "offload-tied.diff"
    diff.write_bytes(upstream_diff())
    out = tmp_path / "rebased.diff"
    result = run("rebase", diff, "--to", "0.5.17", "-o", out)
    assert result.exit_code == 1, result.stderr
    assert "conflict: sglang/srt/utils/offloader.py:create_offloader: not in the file" in result.stderr
    assert "1 unit(s) conflict on SGLang 0.5.17" in result.stderr
    text = out.read_text()
    assert "+<<<<<<< release: sglang/srt/utils/offloader.py:create_offloader not in the file" in text
    assert "+>>>>>>> patch: the diff's change to create_offloader" in text
    site = release("0.5.17")
    repo = checkout(site, tmp_path / "repo")
    checked = git(repo, "apply", "--directory=python", "--check", out, check=False)
    assert checked.returncode == 0, checked.stderr
    refused = run("--patches", out, "status", "--site-packages", site)
    assert refused.exit_code == 2 and "an unresolved conflict block" in refused.stderr


def test_a_format_patch_of_a_checkout_stays_one(home, release, tmp_path):
    diff = tmp_path / "0001-offload-tied.patch"
    diff.write_bytes(upstream_diff(prefix="python/", format_patch=True))
    out = tmp_path / "0001-rebased.patch"
    assert run("rebase", diff, "--to", "0.5.19", "-o", out).exit_code == 0
    text = out.read_text()
    assert text.startswith("From ") and "\nSubject: [PATCH] " in text and "\n---\n python/sglang/srt/utils/offloader.py |" in text
    assert "\ndiff --git a/python/sglang/srt/utils/offloader.py b/python/sglang/srt/utils/offloader.py\n" in text
    repo = checkout(release("0.5.19"), tmp_path / "repo")
    am = git(repo, "am", out, check=False)
    assert am.returncode == 0, am.stdout + am.stderr


def test_from_names_the_base_where_the_index_lines_do_not(home, tmp_path):
    """Without index lines the hunks are placed by their context alone (0.5.19: they are, as
    git apply would); on 0.5.17 they are not, and only --from 0.5.20 gives the per-unit way."""
    diff = tmp_path / "offload-tied.diff"
    diff.write_bytes(re.sub(rb"\nindex [0-9a-f]+\.\.[0-9a-f]+ 100644", b"", upstream_diff()))
    assert run("rebase", diff, "--to", "0.5.19").exit_code == 0
    unknown = run("rebase", diff, "--to", "0.5.17", "--json")
    assert unknown.exit_code == 1 and unknown.json()["from"] == []
    assert unknown.json()["counts"]["transplanted"] == 0
    assert any("--from V" in note for note in unknown.json()["notes"])
    known = run("rebase", diff, "--to", "0.5.17", "--from", "0.5.20", "--json")
    assert known.exit_code == 1 and known.json()["from"] == ["0.5.20"]
    assert known.json()["counts"]["transplanted"] >= 3 and [c["unit"] for c in known.json()["conflicts"]] == ["create_offloader"]


def test_no_wheel_for_the_release(home, tmp_path):
    diff = tmp_path / "offload-tied.diff"
    diff.write_bytes(upstream_diff())
    out = tmp_path / "rebased.diff"
    missing = run("rebase", diff, "--to", "0.5.99", "-o", out)
    assert missing.exit_code == 3 and "cannot download SGLang 0.5.99" in missing.stderr, missing.stderr
    assert not out.exists()


def test_a_release_that_has_the_change_already(home, tmp_path):
    """The diff reversed (0.5.21 -> 0.5.20) on 0.5.20 itself: every unit is there already."""
    before, after = ((pristine(v) / OFFLOADER).read_bytes() for v in ("0.5.20", "0.5.21"))
    diff = tmp_path / "undo.diff"
    diff.write_bytes(git_diff({OFFLOADER: after}, {OFFLOADER: before}, header=HEADER))
    out = tmp_path / "rebased.diff"
    done = run("rebase", diff, "--to", "0.5.20", "-o", out)
    assert done.exit_code == 1 and "SGLang 0.5.20 already has the change" in done.stderr, done.stderr
    assert not out.exists()


def test_continue_refuses_a_resolution_that_does_not_work_on_the_release(home, tmp_path):
    """`rebase --continue` checks the resolved files as `bump --continue` does (works_on.static):
    a resolution that does not compile, or uses a name 0.5.17's file does not define, is exit 1
    naming FILE:LINE, and nothing is written (-o FILE not made; without -o no diff on stdout).
    Before: exit 0 and the diff written, a module that fails at import once applied."""
    diff = tmp_path / "offload-tied.diff"
    diff.write_bytes(upstream_diff())
    tree = tmp_path / "fix"
    made = run("rebase", diff, "--to", "0.5.17", "--tree", tree)
    assert made.exit_code == 1, made.stderr
    path = tree / OFFLOADER
    good = re.sub(rb"<<<<<<< release[^\n]*\n=======\n.*?>>>>>>> patch[^\n]*\n", b"", path.read_bytes(), flags=re.S)
    anchor = b"def set_offloader("
    line = good[:good.index(anchor)].count(b"\n") + 1
    out = tmp_path / "offload-tied-0.5.17.diff"
    for broken, detail in ((good.replace(anchor, b"def def set_offloader("), "does not compile: "),
                           (good.replace(anchor, b"def set_offloader_unused():\n    return no_such_name\n\n\n" + anchor),
                            "breaks on 0.5.17: undefined name 'no_such_name'")):
        path.write_bytes(broken)
        for args in (("-o", out), ()):
            refused = run("rebase", "--continue", tree, *args)
            assert refused.exit_code == 1, refused.stderr
            assert f"{OFFLOADER}:{line + (1 if 'undefined' in detail else 0)}: {detail}" in refused.stderr
            assert "rebase --continue" in refused.stderr.splitlines()[-1]
            assert not out.exists() and refused.stdout == ""
    path.write_bytes(good)
    done = run("rebase", "--continue", tree, "-o", out)
    assert done.exit_code == 0, done.stderr
    assert out.is_file()


def test_continue_takes_a_guarded_import_of_what_the_release_lacks(home, tmp_path):
    """An import of a module 0.5.17 lacks that the resolution guards (inside `try:` whose handler
    catches ImportError, or under `if TYPE_CHECKING:`) never runs into an ImportError on 0.5.17: a
    patch made to serve several releases is written so. `rebase --continue` writes the diff; the
    same import unguarded is still refused, naming FILE:LINE. Before: the guarded ones were refused
    too ("breaks on 0.5.17: ... (an ImportError)"), exit 1, no diff written."""
    diff = tmp_path / "offload-tied.diff"
    diff.write_bytes(upstream_diff())
    tree = tmp_path / "fix"
    assert run("rebase", diff, "--to", "0.5.17", "--tree", tree).exit_code == 1
    path = tree / OFFLOADER
    good = re.sub(rb"<<<<<<< release[^\n]*\n=======\n.*?>>>>>>> patch[^\n]*\n", b"", path.read_bytes(), flags=re.S)
    anchor = b"def set_offloader("
    missing = b"from sglang.srt.no_such_module import no_such_name\n"
    out = tmp_path / "offload-tied-0.5.17.diff"
    for guarded in (b"try:\n    " + missing + b"except ImportError:\n    no_such_name = None\n",
                    b"try:\n    " + missing + b"except (ModuleNotFoundError, AttributeError):\n    pass\n",
                    b"from typing import TYPE_CHECKING\n\nif TYPE_CHECKING:\n    " + missing):
        path.write_bytes(good.replace(anchor, guarded + b"\n\n" + anchor))
        done = run("rebase", "--continue", tree, "-o", out)
        assert done.exit_code == 0, done.stderr
        assert b"no_such_module" in out.read_bytes()
        out.unlink()
    line = good[:good.index(anchor)].count(b"\n") + 1
    for unguarded in (missing, b"try:\n    " + missing + b"except KeyError:\n    pass\n"):
        path.write_bytes(good.replace(anchor, unguarded + b"\n\n" + anchor))
        refused = run("rebase", "--continue", tree, "-o", out)
        assert refused.exit_code == 1, refused.stderr
        at = line + (1 if unguarded.startswith(b"try") else 0)
        assert f"{OFFLOADER}:{at}: breaks on 0.5.17: `from sglang.srt.no_such_module import no_such_name`" in refused.stderr
        assert not out.exists()


def test_tree_names_the_diff_to_write_for_the_release_pasteable_as_printed(home, tmp_path):
    """`rebase --tree`'s next step is `rebase --continue TREE -o OUT`, OUT the diff for V beside the
    input (its name with V: offload-tied-0.5.17.diff), never the input: run as printed (once the
    block is resolved), it writes OUT and leaves the input as it was. Before: `-o offload-tied.diff`,
    the input's name, which from the input's folder overwrote it."""
    import shlex

    folder = tmp_path / "my patches"
    folder.mkdir()
    diff = folder / "offload-tied.diff"
    diff.write_bytes(upstream_diff())
    tree = tmp_path / "fix"
    made = run("rebase", diff, "--to", "0.5.17", "--tree", tree)
    assert made.exit_code == 1, made.stderr
    step = next(line for line in made.stdout.splitlines() if line.startswith("next: "))
    words = shlex.split(step.split("`")[1])
    out = folder / "offload-tied-0.5.17.diff"
    assert words == ["patchkit", "rebase", "--continue", str(tree), "-o", str(out)], step
    path = tree / OFFLOADER
    path.write_bytes(re.sub(rb"<<<<<<< release[^\n]*\n=======\n.*?>>>>>>> patch[^\n]*\n", b"", path.read_bytes(),
                            flags=re.S))
    done = run(*words[1:])
    assert done.exit_code == 0, done.stderr
    assert out.is_file() and diff.read_bytes() == upstream_diff()


def test_the_name_for_a_release_replaces_the_one_it_names():
    from patchkit.diffs.rebase_tree import name_for

    assert name_for("v0.5.15.post1-sglang.patch", "0.5.17") == "v0.5.17-sglang.patch"
    assert name_for("offload-tied.diff", "0.5.17") == "offload-tied-0.5.17.diff"
    assert name_for("fix", "0.5.17") == "fix-0.5.17"
    assert name_for("fix-0.5.17.patch", "0.5.17") == "fix-0.5.17-rebased.patch"
    assert name_for("0.5.15-to-0.5.16.patch", "0.5.17") == "0.5.15-to-0.5.16-0.5.17.patch"


def test_a_diff_with_nothing_inside_the_package_is_exit_2_alone_or_in_a_stack(tmp_path, monkeypatch):
    """A diff whose every file is outside the package (a stack's `python/pyproject.toml` pin: a set
    member since 3eac3bc) was read by rebase as one V already has: "SGLang 0.5.19 already has the
    change (every file: )", exit 1, alone; in a stack the same as a note, left out. It is exit 2 saying
    what it is and where its files belong, before any release is read; nothing written."""
    monkeypatch.setenv("PATCHKIT_HOME", str(tmp_path / "no-release-read"))
    pin = tmp_path / "pin.patch"
    pin.write_bytes(git_diff({"pyproject.toml": b'dependencies = ["torch"]\n'},
                             {"pyproject.toml": b'dependencies = ["torch==2.9.1"]\n'}, prefix="python/"))
    fix = tmp_path / "offload-tied.diff"
    fix.write_bytes(upstream_diff())
    folder = tmp_path / "out"
    folder.mkdir()
    said = ("error: pin.patch: a diff with nothing inside the sglang package: nothing to rebase onto SGLang 0.5.19 "
            "(leave it out of rebase's PATCHes; `bump` writes it unchanged); its files belong to an SGLang checkout, "
            "check them against 0.5.19 by hand: python/pyproject.toml")
    for args in ((pin,), (pin, "-o", tmp_path / "pin-0.5.19.patch"), (fix, pin, "-o", folder)):
        result = run("rebase", *args, "--to", "0.5.19")
        assert result.exit_code == 2, (args, result.exit_code, result.stderr)
        assert result.stderr.strip() == said and result.stdout == ""
    assert not (tmp_path / "pin-0.5.19.patch").exists() and list(folder.iterdir()) == []
