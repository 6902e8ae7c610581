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
