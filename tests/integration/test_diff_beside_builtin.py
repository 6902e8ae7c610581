"""A diff patch beside a built-in patch on the same file (0.5.20's offloader.py, which
cpu-offload-tied-params changes): stacked as `apply` stacks them, in `status`, `apply` and
`matrix`. A diff of other functions of the file (upstream's own 0.5.21 change to
create_offloader and OffloaderV2.__init__, made against 0.5.20) applies on top of the built-in;
one of the same code (upstream's tied-parameters fix, OffloaderV1.maybe_offload_to_cpu) is
`failed`, naming both, and `apply` refuses it, nothing written."""

from __future__ import annotations

import pytest

from patchkit.diffs import units
from testing.cli import run
from testing.diffs import OFFLOADER_BUILT_IN, git_diff
from testing.releases import pristine, snapshot
from tests.integration.test_diff_patches import OFFLOADER, offloader_fix_only

pytestmark = pytest.mark.integration

OTHER, SAME = "offloader-dp-rank", "offloader-tied-fix"


def dp_rank_change() -> bytes:
    """0.5.20's offloader.py with 0.5.21's create_offloader and OffloaderV2.__init__ (dp_rank and
    dp_size read from get_parallel()): functions the built-in does not touch."""
    old, new = (units.texts((pristine(v) / OFFLOADER).read_bytes()) for v in ("0.5.20", "0.5.21"))
    taken = ("create_offloader", "OffloaderV2.__init__")
    assert all(old[name] != new[name] for name in taken)
    return b"".join(new[name] if name in taken else text for name, text in old.items())


@pytest.fixture
def diffs(tmp_path, patchkit_home):
    from testing.releases import HOME

    (patchkit_home / "wheels").symlink_to(HOME / "wheels")
    release = (pristine("0.5.20") / OFFLOADER).read_bytes()
    found = {}
    for pid, after in ((OTHER, dp_rank_change()), (SAME, offloader_fix_only())):
        folder = tmp_path / pid
        folder.mkdir()
        (folder / f"{pid}.patch").write_bytes(git_diff({OFFLOADER: release}, {OFFLOADER: after}))
        found[pid] = folder
    return found


def rows(folder, site) -> dict[str, dict]:
    result = run("--patches", folder, "status", "--site-packages", site, "--json")
    assert result.exit_code == 0, result.stderr
    return {p["id"]: p for p in result.json()["patches"]}


def test_a_diff_of_other_functions_stacks_on_the_built_in(release, diffs):
    site = release("0.5.20", extra=(OFFLOADER,))
    before = snapshot(site)
    found = rows(diffs[OTHER], site)
    assert (found[OFFLOADER_BUILT_IN]["state"], found[OTHER]["state"]) == ("pending", "pending")
    result = run("--patches", diffs[OTHER], "apply", "--site-packages", site, "--only", OFFLOADER_BUILT_IN, "--only", OTHER)
    assert result.exit_code == 0, result.stderr
    written = (site / OFFLOADER).read_bytes()
    compile(written, OFFLOADER, "exec")
    texts = units.texts(written)
    assert "_patchkit_device_state" in texts  # the built-in's helper
    assert all(texts[name] == units.texts(dp_rank_change())[name] for name in ("create_offloader", "OffloaderV2.__init__"))
    found = rows(diffs[OTHER], site)
    assert (found[OFFLOADER_BUILT_IN]["state"], found[OTHER]["state"]) == ("applied", "applied")
    assert run("--patches", diffs[OTHER], "revert", "--site-packages", site, "--only", OTHER).exit_code == 0
    assert rows(diffs[OTHER], site)[OTHER]["state"] == "pending"
    assert run("--patches", diffs[OTHER], "revert", "--site-packages", site).exit_code == 0
    assert snapshot(site) == before


def test_a_diff_of_the_same_code_is_failed_naming_both_and_refused(release, diffs):
    site = release("0.5.20", extra=(OFFLOADER,))
    before = snapshot(site)
    found = rows(diffs[SAME], site)
    assert found[OFFLOADER_BUILT_IN]["state"] == "pending"
    assert found[SAME]["state"] == "failed"
    detail = found[SAME]["detail"]
    assert detail.startswith(f"{OFFLOADER}: it does not apply on top of {OFFLOADER_BUILT_IN}, stacked before it"), detail
    assert f"{OFFLOADER}:OffloaderV1.maybe_offload_to_cpu" in detail and f"`--skip {OFFLOADER_BUILT_IN}`" in detail
    text = run("--patches", diffs[SAME], "status", "--site-packages", site).stdout
    assert any(line.split()[:2] == ["failed", SAME] for line in text.splitlines() if line.strip()), text
    result = run("--patches", diffs[SAME], "apply", "--site-packages", site)
    assert result.exit_code == 1
    assert f"patch {SAME} cannot be applied" in result.stderr and OFFLOADER_BUILT_IN in result.stderr
    assert snapshot(site) == before
    # Alone, each applies.
    result = run("--patches", diffs[SAME], "apply", "--site-packages", site, "--skip", OFFLOADER_BUILT_IN)
    assert result.exit_code == 0, result.stderr
    assert (site / OFFLOADER).read_bytes() == offloader_fix_only()
    assert run("--patches", diffs[SAME], "revert", "--site-packages", site).exit_code == 0
    assert snapshot(site) == before

    # The built-in applied first: the diff stays failed, and the advice is to revert the built-in.
    assert run("--patches", diffs[SAME], "apply", "--site-packages", site, "--only", OFFLOADER_BUILT_IN).exit_code == 0
    applied = snapshot(site)
    found = rows(diffs[SAME], site)
    assert found[SAME]["state"] == "failed" and (f"`patchkit --patches {diffs[SAME]} revert --only {OFFLOADER_BUILT_IN} --site-packages {site}`"
                                                in found[SAME]["detail"]), found[SAME]
    result = run("--patches", diffs[SAME], "apply", "--site-packages", site)
    assert result.exit_code == 1 and OFFLOADER_BUILT_IN in result.stderr
    assert snapshot(site) == applied
    assert run("--patches", diffs[SAME], "revert", "--site-packages", site).exit_code == 0
    assert snapshot(site) == before


def test_matrix_says_where_the_diff_clashes_with_the_built_in(diffs):
    folders = ("--patches", diffs[SAME], "--patches", diffs[OTHER])
    table = run(*folders, "matrix", "--from", "0.5.20", "--to", "0.5.21", "--json").json()
    states = {row["id"]: row["states"] for row in table["patches"]}
    assert states[OFFLOADER_BUILT_IN] == states[OTHER] == {"0.5.20": "applies", "0.5.21": "upstream-fixed"}
    assert states[SAME] == {"0.5.20": "broken", "0.5.21": "upstream-fixed"}
    assert [(c["id"], c["version"], c["file"], c["under"]) for c in table["clashes"]] == [
        (SAME, "0.5.20", OFFLOADER, [OFFLOADER_BUILT_IN])]  # it stacks on OTHER: only the built-in is named
    result = run(*folders, "matrix", "--from", "0.5.20", "--to", "0.5.21")
    assert result.exit_code == 0, result.stderr
    assert f"{SAME}: broken on 0.5.20 only on top of {OFFLOADER_BUILT_IN} ({OFFLOADER};" in result.stdout
