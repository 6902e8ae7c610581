"""The registry: ids, the declared stacking order on shared files."""

from __future__ import annotations

import pytest

from patchkit.engine import registry
from patchkit.base.errors import PatchkitError, UsageError
from patchkit.base.patch_id import is_patch_id


def test_every_shared_file_has_a_declared_stacking_order():
    assert registry.unordered_pairs(registry.load_all()) == []


class _P:
    TARGETS = ("f.py",)
    STACK_AFTER: tuple[str, ...] = ()


def _patch(pid: str, after: tuple[str, ...] = ()) -> type:
    return type(pid, (_P,), {"ID": pid, "STACK_AFTER": after})


def test_stack_follows_declarations_not_names():
    classes = {"a": _patch("a", ("z",)), "z": _patch("z")}
    assert registry.stack(["a", "z"], classes) == ["z", "a"]
    assert registry.unordered_pairs(list(classes.values())) == []
    assert registry.unordered_pairs([_patch("a"), _patch("b")]) == [("f.py", "a", "b")]


def test_a_cycle_is_an_error():
    classes = {"a": _patch("a", ("b",)), "b": _patch("b", ("a",))}
    with pytest.raises(PatchkitError, match="cycle"):
        registry.stack(["a", "b"], classes)


@pytest.mark.parametrize("good", ["mtp-layer-detection", "a", "0fix", "fix-2"])
def test_the_id_rule_accepts_lower_case_dashed_ids(good):
    assert is_patch_id(good)


@pytest.mark.parametrize("bad", ["fixA", "-fix", "fix_a", "fix.a", "", "fix a", "fix\n", None, 3])
def test_the_id_rule_refuses_what_the_state_file_refuses(bad):
    assert not is_patch_id(bad)


def test_a_module_whose_id_breaks_the_rule_is_a_usage_error_naming_the_file(tmp_path):
    (tmp_path / "fixA.py").write_text("")
    with pytest.raises(UsageError, match=r"fixA\.py .*'fixA' is not a valid patch id") as raised:
        registry.PatchSets([str(tmp_path)]).patch_ids()
    assert raised.value.exit_code == 2
    assert str(tmp_path / "fixA.py") in str(raised.value)


@pytest.mark.parametrize("source, line, says", [
    ("x = (\n", 1, "does not compile: '(' was never closed"),
    ("\n\nimport patchkit_no_such_module\n", 3, "ModuleNotFoundError: No module named 'patchkit_no_such_module'"),
    ("from patchkit.authoring.template import Snippet\n\nFIX = Snippet('''\nd = {}\n''')\n", 3,
     "a literal brace in the snippet's code is written doubled: {{ and }}"),
])
def test_a_broken_patch_module_is_exit_2_naming_the_file_and_line(tmp_path, source, line, says):
    """An author's mistake in a patch module is a usage error (exit 2) that points at it, not 70."""
    from testing.cli import run

    (tmp_path / "my_fix.py").write_text(source)
    result = run("--patches", tmp_path, "list")
    assert result.exit_code == 2, (result.stdout, result.stderr)
    (message,) = result.stderr.splitlines()
    assert message.startswith(f"error: {tmp_path / 'my_fix.py'}:{line}: ") and says in message, message


_DIFF = ("diff --git a/sglang/srt/x.py b/sglang/srt/x.py\n--- a/sglang/srt/x.py\n+++ b/sglang/srt/x.py\n"
         "@@ -1 +1 @@\n-a\n+b\n")


def test_a_folder_loads_the_field_s_file_names_and_names_a_damaged_diff_at_the_end(tmp_path, patchkit_home):
    from testing.cli import run

    (tmp_path / "v0.5.15.post1-sglang.patch").write_text(_DIFF)
    (tmp_path / "damaged.patch").write_text(_DIFF.replace("-a\n+b\n", "-a\n"))  # cut short
    (tmp_path / "bad-header.diff").write_text("Patchkit-Id: Bad_Id\n" + _DIFF)
    result = run("--patches", tmp_path, "list", "--json")
    ids = {p["id"] for p in result.json()["patches"]}
    assert "v0-5-15-post1-sglang" in ids and not {"damaged", "bad-header"} & ids
    # Each named with its cause after the work; the run is not 0, so CI notices.
    assert result.exit_code == 2
    assert f"{tmp_path / 'damaged.patch'}: line 5: the diff ends inside the hunk of line 4" in result.stderr
    assert f"{tmp_path / 'bad-header.diff'}: 'Bad_Id' is not a valid patch id" in result.stderr
    # A diff named alone is refused at once.
    alone = run("--patches", tmp_path / "damaged.patch", "list")
    assert alone.exit_code == 2 and "left out" not in alone.stderr and "damaged.patch" in alone.stderr


def test_two_files_deriving_one_id_are_a_usage_error_naming_both(tmp_path, patchkit_home):
    from testing.cli import run

    (tmp_path / "Fix.A.patch").write_text(_DIFF)
    (tmp_path / "fix_a.diff").write_text(_DIFF)
    result = run("--patches", tmp_path, "list")
    assert result.exit_code == 2
    assert "'fix-a' is defined twice" in result.stderr
    assert str(tmp_path / "Fix.A.patch") in result.stderr and str(tmp_path / "fix_a.diff") in result.stderr


@pytest.mark.parametrize(("typed", "meant"), [("mamba-slot-gracefull", "mamba-slot-graceful"),
                                              ("fp4-kv", "fp4-kv-sm100"), ("symm-mem", "symm-mem-kill-switch")])
def test_an_unknown_id_gets_a_did_you_mean(typed, meant):
    """Issue 43.6: --only, --skip, `export ID` with a typo listed every id and suggested none."""
    with pytest.raises(UsageError) as raised:
        registry.select(registry.patch_ids(), (typed,))
    assert str(raised.value).startswith(f"unknown patch id {typed!r}; did you mean {meant!r}? known: ")


def test_no_did_you_mean_where_nothing_is_close_or_several_are():
    for typed in ("zzz", "mtp"):  # nothing like it; two ids start with mtp-
        with pytest.raises(UsageError) as raised:
            registry.select(registry.patch_ids(), (), (typed,))
        assert "did you mean" not in str(raised.value) and str(raised.value).startswith(f"unknown patch id {typed!r}; known: ")


def test_the_cli_says_it_too(tmp_path):
    from testing.cli import run

    result = run("revert", "--only", "mamba-slot-gracefull", "--site-packages", tmp_path)
    assert result.exit_code == 2
    assert result.stderr.startswith("error: unknown patch id 'mamba-slot-gracefull'; did you mean 'mamba-slot-graceful'?")


def test_a_folder_s_modules_are_listed_as_pkgutil_lists_them(tmp_path):
    """The patch ids come from a listing made here, not by pkgutil (issue 43.3: a cost of every
    command); it must name the modules pkgutil.iter_modules names, packages as packages."""
    import importlib.machinery
    import pkgutil

    extension = importlib.machinery.EXTENSION_SUFFIXES[0]
    for name in ("fix_a.py", "fix_b.pyc", f"native{extension}", "abi.abi3.so", "plain.so", "_private.py",
                 "__init__.py", "two.dots.py", ".py", "README.md", "both.py", "fix_a.pyc"):
        (tmp_path / name).write_bytes(b"")
    for folder, inner in (("both", "__init__.py"), ("pkg", "__init__.pyc"), ("plain_dir", "x.py"),
                          ("dotted.pkg", "__init__.py"), ("tests", "__init__.py")):
        (tmp_path / folder).mkdir()
        (tmp_path / folder / inner).write_bytes(b"")
    expected = sorted((info.name, info.ispkg) for info in pkgutil.iter_modules([str(tmp_path)]))
    assert registry._modules_in(tmp_path) == expected
    assert ("both", True) in expected and ("fix_a", False) in expected  # the folder wins over both.py
    assert registry._modules_in(tmp_path / "missing") == []


# --- the patch sets of one run are an object passed, not module state (issue 44 item 4) ----------


def _two_sets(tmp_path):
    from testing import synthetic as syn

    first = syn.write_patches(tmp_path / "first")
    second = tmp_path / "second"
    second.mkdir()
    (second / "broken.patch").write_text("not a diff\n")
    return first, second


def test_two_loads_of_different_sets_do_not_see_each_others_state(tmp_path):
    from testing import synthetic as syn

    first, second = _two_sets(tmp_path)
    one, other = registry.PatchSets([str(first)]), registry.PatchSets([str(second)])
    assert syn.FIX in one.patch_ids() and syn.FIX not in other.patch_ids()
    assert [cls.ID for cls in one.load_all() if cls.ID.startswith("syn-")] == list(syn.IDS)
    # The second load neither forgets the first's files nor lends it its own left-out diff.
    assert one.source_file(syn.FIX) == first / "syn_fix.py" and one.origin(syn.FIX) == f"folder {first}"
    assert one.unloadable() == [] and [str(second / "broken.patch") in str(e) for e in other.unloadable()] == [True]
    assert one.folders == (str(first),) and other.folders == (str(second),)
    # Neither is the run's: outside a command, the built-in set alone.
    assert syn.FIX not in registry.patch_ids() and registry.unloadable() == []


def test_a_command_run_in_process_leaves_no_patch_set_behind(tmp_path):
    from testing import synthetic as syn
    from testing.cli import run

    first, second = _two_sets(tmp_path)
    listed = run("--patches", first, "list", "--patches", second, "--json")
    assert listed.exit_code == 2 and "broken.patch" in listed.stderr  # the left-out diff said (a usage error)
    assert syn.FIX in {row["id"] for row in listed.json()["patches"]}
    assert syn.FIX not in registry.patch_ids() and registry.unloadable() == [] and registry.given_folders() == ()


def test_one_folder_named_twice_is_one_set_not_a_clash(tmp_path, monkeypatch):
    """The same folder given twice under two spellings (`--patches DIR` and `--patches DIR/`, or
    an image's $PATCHKIT_PATCHES and the user's `--patches` of that folder) is one set: each id of it
    once, never exit 2 saying the folder's own patches are 'defined twice' by it and by it."""
    from testing import synthetic as syn
    from testing.cli import run

    first, _ = _two_sets(tmp_path)
    monkeypatch.chdir(tmp_path)
    for given in (("--patches", first, "--patches", f"{first}/"), ("--patches", "first", "list", "--patches", first)):
        listed = run(*given, *(("list",) if "list" not in given else ()), "--json")
        assert listed.exit_code == 0, listed.stderr
        ids = [row["id"] for row in listed.json()["patches"]]
        assert [pid for pid in ids if pid.startswith("syn-")] == list(syn.IDS)
    monkeypatch.setenv(registry.ENV_PATCHES, f"{first}/")
    assert run("--patches", first, "list").exit_code == 0
    # A folder and a diff file of it, or two folders that share an id, are still a clash (exit 2).
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "syn_fix.diff").write_text(_DIFF)
    clash = run("--patches", tmp_path / "other", "list")
    assert clash.exit_code == 2 and f"'{syn.FIX}' is defined twice" in clash.stderr
