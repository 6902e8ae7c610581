"""engine/bump_record.py, offline: what a bump's record says remains decides whether its folder
loads as a patch set (issue 40.1); the registry refuses it where `--patches` folders are read."""

from __future__ import annotations

import pytest

from patchkit.base.errors import PlanError, UsageError
from patchkit.engine import bump, bump_record, registry
from patchkit.engine.bump import Bump, Conflict, PatchRow
from testing.cli import run

DROPPED = PatchRow("gone", "module", "applies", "upstream-fixed", bump.DROP)
CONFLICT = PatchRow("fix", "diff", "applies", "broken", bump.CONFLICTS, tree="fix.tree",
                    conflicts=(Conflict("sglang/srt/a.py", "A.f", "changed here and by the diff"),))
FAILED = PatchRow("mine", "module", "applies", "failed", bump.FAILED, detail="ValueError: x")


def _folder(tmp_path, rows, left_out=()):
    out = tmp_path / "out"
    files = {"fix.tree/sglang/srt/a.py": b"x = 1\n"} if CONFLICT in rows else {}
    bump.write(Bump("0.5.17", "0.5.23", out, tuple(rows), left_out=tuple(left_out), files=files))
    return out


@pytest.mark.parametrize("rows, left_out, said, step", [
    ((DROPPED, CONFLICT), (), "in conflict: fix", "resolve the blocks in {}/*.tree/ and run `patchkit bump --continue {}`"),
    ((FAILED,), (), "failed: mine", "fix what failed (REPORT.md) and run the bump again"),
    ((DROPPED,), ("/u/set/bad.patch: line 3: a hunk ends early",), "left out (cannot be loaded): /u/set/bad.patch",
     "fix each file left out and run the bump again"),
], ids=["conflict", "failed", "left-out"])
def test_an_unfinished_bump_is_refused_naming_what_remains(tmp_path, rows, left_out, said, step):
    out = _folder(tmp_path, rows, left_out)
    sets = registry.PatchSets([str(out)])
    with pytest.raises(PlanError) as raised:
        sets.patch_ids()
    message = str(raised.value)
    assert message.startswith(f"--patches {out}: an unfinished bump (SGLang 0.5.17 -> 0.5.23), {said}"), message
    assert step.format(out, out) in message and "--allow-incomplete" in message
    sets = registry.PatchSets([str(out)], allow_incomplete=True)
    assert "fix" not in sets.patch_ids()
    (found,) = sets.incomplete()
    assert found.warning().endswith(f"left out: {said}")


def test_the_refusals_continue_command_is_pasteable_as_printed(tmp_path):
    """issue 40 item 9: a folder whose name holds a space came unquoted in `bump --continue DIR`."""
    import shlex

    out = tmp_path / "my bump"
    bump.write(Bump("0.5.17", "0.5.23", out, (CONFLICT,), files={"fix.tree/sglang/srt/a.py": b"x = 1\n"}))
    sets = registry.PatchSets([str(out)])
    with pytest.raises(PlanError) as raised:
        sets.patch_ids()
    command = str(raised.value).split("`")[1]
    assert shlex.split(command) == ["patchkit", "bump", "--continue", str(out)], command


def test_a_finished_bump_loads_and_other_folders_are_not_asked(tmp_path):
    out = _folder(tmp_path, (DROPPED,))
    sets = registry.PatchSets([str(out), str(tmp_path)])
    sets.patch_ids()
    assert sets.incomplete() == [] and bump_record.unfinished(out, "out") is None


@pytest.mark.parametrize("record", [b"{", b'{"patches": 5}', b'{"from": "0.5.17", "to": "0.5.23", "patches": [{}]}'])
def test_a_record_that_cannot_be_read_is_exit_2_naming_it(tmp_path, record):
    (tmp_path / bump_record.RECORD).write_bytes(record)
    sets = registry.PatchSets([str(tmp_path)])
    with pytest.raises(UsageError, match=rf"its \{bump_record.RECORD} cannot be read \(.*\), so what it lacks is not "
                                         "known; run `patchkit bump --continue"):
        sets.patch_ids()


def test_the_cli_refuses_it_with_exit_1_and_takes_it_with_allow_incomplete(tmp_path):
    out = _folder(tmp_path, (DROPPED, CONFLICT))
    for argv in (("--patches", out, "list"), ("list", "--patches", out), ("new", "x-y", "--target", "sglang/srt/a.py",
                                                                         "--out", tmp_path / "new", "--patches", out)):
        refused = run(*argv)
        assert refused.exit_code == 1, refused.stderr
        assert refused.stderr.startswith(f"error: --patches {out}: an unfinished bump") and not (tmp_path / "new").exists()
    for argv in (("--patches", out, "--allow-incomplete", "list"), ("list", "--patches", out, "--allow-incomplete"),
                 ("--allow-incomplete", "list", "--patches", out)):
        taken = run(*argv)
        assert taken.exit_code == 0, taken.stderr
        assert taken.stderr == (f"warning: --allow-incomplete: --patches {out} is an unfinished bump (SGLang 0.5.17 "
                                "-> 0.5.23); left out: in conflict: fix\n")


def test_a_bump_folders_report_and_trees_are_not_patches(tmp_path):
    out = _folder(tmp_path, (DROPPED, CONFLICT))
    assert bump_record.not_patches(out) == {"REPORT.md", "fix.tree"}
    (tmp_path / "plain").mkdir()
    (tmp_path / "plain" / "REPORT.md").write_text("mine")
    assert bump_record.not_patches(tmp_path / "plain") == frozenset()


@pytest.mark.parametrize("where", ["other.tree -> a file", "other.tree -> a folder", "the record", "REPORT.md"])
def test_a_symlink_where_a_bump_folders_record_report_or_tree_is_is_refused_never_followed(tmp_path, where):
    """not_patches (what an image's build context leaves out of a bump's folder) follows nothing:
    a symlink in place of the record, REPORT.md or a NAME.tree is NotPlain (exit 6) naming it.
    Before: `other.tree` pointing at a file was not left out (the context's copy took the file it
    points at into the image), one pointing at a folder was followed to tell it was one, and a
    symlinked record made any folder a bump's."""
    from patchkit.base.confined import NotPlain

    out = _folder(tmp_path, (DROPPED, CONFLICT))
    outside = tmp_path / "outside"
    (outside / "sub").mkdir(parents=True)
    (outside / "secret.py").write_text("TOKEN = 'x'\n")
    name = {"other.tree -> a file": "other.tree", "other.tree -> a folder": "other.tree",
            "the record": bump_record.RECORD, "REPORT.md": bump_record.REPORT}[where]
    if name in (bump_record.RECORD, bump_record.REPORT):
        (out / name).rename(outside / name)
        (out / name).symlink_to(outside / name)
    else:
        (out / name).symlink_to(outside / ("sub" if "folder" in where else "secret.py"))
    with pytest.raises(NotPlain) as refused:
        bump_record.not_patches(out)
    assert str(out / name) in str(refused.value) and "a symlink" in str(refused.value)
    assert (outside / "secret.py").read_text() == "TOKEN = 'x'\n"


def test_a_folder_whose_switch_was_killed_is_refused_until_a_bump_finishes_it(tmp_path):
    """Issue 41.4: a bump killed between its commit point and the journal's removal leaves DIR with
    parts of the earlier set beside the new one until the next `bump` on it finishes the switch; a
    command loading it meanwhile is refused, naming the journal (before, it loaded the mix)."""
    out = _folder(tmp_path, (DROPPED,))
    (out / bump.JOURNAL).write_text('{"schema": 1, "add": [], "remove": {}}')
    sets = registry.PatchSets([str(out)])
    with pytest.raises(PlanError, match=r"a bump's write of it was interrupted \(\.patchkit-bump-journal\.json"):
        sets.patch_ids()
    bump.recover(out)  # what the next `bump` on DIR does first
    sets = registry.PatchSets([str(out)])
    assert not (out / bump.JOURNAL).exists() and "gone" not in sets.patch_ids()  # loads: nothing refused


def test_a_symlinked_record_is_refused_by_apply_as_by_bump(tmp_path):
    """Review of issue 40.1: the registry read a bump's record through a symlink (bump_record.unfinished,
    partial checks) where `bump --continue` refuses one (exit 6); now one reader (bump_record.load,
    base/confined) serves both. A finished bump's record moved out of DIR and linked back: `apply`
    and `list` loaded the folder (exit 0) before; now both are exit 6 naming it, as `bump --continue`."""
    from patchkit.cli.exit_codes import EXIT_ENVIRONMENT
    from testing.synthetic import make_tree

    out = _folder(tmp_path, (DROPPED,))
    elsewhere = tmp_path / "elsewhere.json"
    (out / bump_record.RECORD).rename(elsewhere)
    (out / bump_record.RECORD).symlink_to(elsewhere)
    site = make_tree(tmp_path / "site")
    before = {p: p.read_bytes() for p in site.rglob("*") if p.is_file()}
    for argv in (("--patches", out, "apply", "--site-packages", site), ("--patches", out, "list"),
                 ("bump", "--continue", out)):
        refused = run(*argv)
        assert refused.exit_code == EXIT_ENVIRONMENT == 6, (argv, refused.stderr)
        assert f"{out / bump_record.RECORD}: a symlink" in refused.stderr, refused.stderr
    assert {p: p.read_bytes() for p in site.rglob("*") if p.is_file()} == before  # nothing applied


def test_a_damaged_record_is_read_as_bump_reads_it(tmp_path):
    """The registry's reader checks the whole record, as bump's: a row missing its action was
    loaded as a finished folder's before (the partial check read only ids and actions it found)."""
    out = _folder(tmp_path, (DROPPED,))
    data = (out / bump_record.RECORD).read_text().replace('"action": "drop"', '"action": 5')
    (out / bump_record.RECORD).write_text(data)
    sets = registry.PatchSets([str(out)])
    with pytest.raises(UsageError, match=r"cannot be read \(patches\[0\]\.action: 5 is not str\)"):
        sets.patch_ids()


def test_a_folder_from_the_environment_is_named_so(tmp_path, monkeypatch):
    """The refusal of an unfinished folder said `--patches DIR` where the folder came from
    $PATCHKIT_PATCHES; it says how the folder was named."""
    out = _folder(tmp_path, (DROPPED, CONFLICT))
    monkeypatch.setenv("PATCHKIT_PATCHES", str(out))
    refused = run("list")
    assert refused.exit_code == 1
    assert refused.stderr.startswith(f"error: $PATCHKIT_PATCHES {out}: an unfinished bump"), refused.stderr
    taken = run("--allow-incomplete", "list")
    assert taken.exit_code == 0 and f"--allow-incomplete: $PATCHKIT_PATCHES {out} is an unfinished" in taken.stderr
    both = run("--patches", out, "list")  # named on the command line too: said as given there
    assert both.stderr.startswith(f"error: --patches {out}: an unfinished bump"), both.stderr
