"""verify's advice for a patch that failed (its own code raised): the commands it names work,
`patchkit status` says why and `patchkit apply --skip ID` applies the others (on the synthetic tree)."""

from __future__ import annotations

import re
import shlex

from testing import synthetic
from testing.cli import run

CRASHING = synthetic.PATCHES["syn_fix"].replace("SynFix", "SynCrash").replace('ID = "syn-fix"', 'ID = "syn-crash"') \
    .replace("        return False\n", "        return [][0]  # a bug in the patch: IndexError\n", 1).replace("patchkit syn-fix", "patchkit syn-crash")


def test_verify_on_a_failed_patch_names_commands_that_work(scratch):
    site = synthetic.make_tree(scratch / "site")
    patches = synthetic.write_patches(scratch / "patches")
    (patches / "syn_crash.py").write_text(CRASHING)
    result = run("--patches", patches, "verify", "--site-packages", site)
    line = next(line for line in result.stdout.splitlines() if "patch syn-crash is failed" in line)
    steps = [shlex.split(step)[1:] for step in re.findall(r"`(patchkit [^`]+)`", line)]
    assert [step[:3] for step in steps] == [["--patches", str(patches), verb] for verb in ("status", "apply")], line
    status = run(*steps[0])  # as printed: this run's --patches and tree
    assert "syn-crash" in status.stdout and "IndexError" in status.stdout + status.stderr
    applied = run(*steps[1])
    assert applied.exit_code == 0, applied.stdout + applied.stderr
    states = {p["id"]: p["state"] for p in run("--patches", patches, "status", "--site-packages", site,
                                                 "--json").json()["patches"]}
    assert states["syn-fix"] == "applied"  # the others were applied
