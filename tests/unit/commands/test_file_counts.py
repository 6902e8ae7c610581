"""What `apply` and `revert` count is the SGLang files they patch or restore, not the runtime
report's files written or removed beside them (issue 34: a one-file patch said "patched 5
file(s)" on a release with SGLang's plugin system: its file and the report's four)."""

from __future__ import annotations

from testing import synthetic as syn
from testing.synthetic import ALPHA, ALPHA_EXT, FIX, Synthetic

PLUGINS = "sglang/srt/plugins/__init__.py"  # SGLang's plugin system: the runtime report is written


def test_apply_and_revert_count_the_sglang_files(scratch, tmp_path):
    tree = Synthetic(syn.make_tree(scratch / "site", overrides={PLUGINS: ""}), syn.write_patches(tmp_path / "set"))
    applied = tree.run("apply", "--only", FIX, "--json")
    assert applied.exit_code == 0, applied.stderr
    written = applied.json()["files"]
    assert {ALPHA, ALPHA_EXT} < set(written) and len(written) > 2  # the report's files were written too
    reverted = tree.run("revert", "--only", FIX)
    assert reverted.exit_code == 0 and "restored 2 file(s)" in reverted.stdout, reverted.stdout
    again = tree.run("apply", "--only", FIX)
    assert again.exit_code == 0 and "patched 2 file(s)" in again.stdout, again.stdout
    everything = tree.run("revert")
    assert everything.exit_code == 0 and "restored 2 file(s)" in everything.stdout, everything.stdout


def test_revert_says_removed_for_a_file_patchkit_had_created(scratch, tmp_path):
    """Issue 43.6: a revert that took out a file a diff patch had created said "restored 3 file(s)",
    counting that file as restored."""
    from testing.diffs import many_sections

    patches = syn.write_patches(tmp_path / "set")
    (patches / "syn-new-module.patch").write_bytes(many_sections(1, "syn-new-module"))
    tree = Synthetic(syn.make_tree(scratch / "site"), patches)
    applied = tree.run("apply", "--only", FIX, "--only", "syn-new-module")
    assert applied.exit_code == 0 and "patched 3 file(s)" in applied.stdout, (applied.stdout, applied.stderr)
    reverted = tree.run("revert")
    assert reverted.exit_code == 0, reverted.stderr
    assert reverted.stdout.splitlines()[-1] == "restored 2 file(s), removed 1 file(s) patchkit had created"
    assert not (tree.site / "sglang/srt/section_00000.py").exists()
