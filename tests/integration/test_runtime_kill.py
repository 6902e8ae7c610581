"""A SIGKILL at every os.replace of an apply that writes the runtime report (the plugin package and
its dist-info, patchkit/store/runtime_plugin.py) on real 0.5.17, whose sglang/srt/plugins/ is copied so that the
report is written (the minimal copies of the other kill tests and the fault sweep have no plugin
system, so none of them ever wrote these files). After each kill: `status` says a run is pending;
the next `apply` finishes it and says so (it said 'nothing to do: no file changed' while it moved
files into place); the report's files then hold exactly the bytes patchkit renders; `revert`
leaves the tree exactly as it was before apply, plugin folders included."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from patchkit.store import runtime_plugin as runtime
from patchkit.base.constants import RUNTIME_DIST_INFO, RUNTIME_MODULE
from testing.cli import run, states
from testing.releases import snapshot
from tests.integration.test_transaction import SUBSET

pytestmark = pytest.mark.integration

# Counts only the replaces into the tree (a cold verdict or blob cache in PATCHKIT_HOME adds its own).
KILLER = textwrap.dedent("""
    import os, signal, sys
    kill_at, site = int(sys.argv[1]), os.path.realpath(sys.argv[2])
    calls = 0
    real = os.replace
    def replace(src, dst):
        global calls
        if os.path.realpath(dst).startswith(site + os.sep):
            calls += 1
            if calls == kill_at:
                os.kill(os.getpid(), signal.SIGKILL)
        real(src, dst)
    os.replace = replace
    sys.argv = ["patchkit", "apply", "--site-packages", site, *sys.argv[3:]]
    from patchkit.cli.app import main
    main()
""")


def killed(kill_at: int, site: Path) -> int:
    return subprocess.run([sys.executable, "-c", KILLER, str(kill_at), str(site), *SUBSET],
                          capture_output=True).returncode


# SUBSET: 3 backups + 3 staged + 4 staged report files + journal + 3 + 4 moves + state = 19 replaces.
REPLACES = 19


def report_files(site) -> dict[str, bytes]:
    return {p.relative_to(site).as_posix(): p.read_bytes()
            for folder in (RUNTIME_MODULE, RUNTIME_DIST_INFO) for p in sorted((site / folder).rglob("*")) if p.is_file()}


@pytest.fixture(scope="module")
def reference(tmp_path_factory) -> dict[str, bytes]:
    """The report's files after an apply of SUBSET that nothing interrupted."""
    from testing.releases import copy_minimal

    site = copy_minimal("0.5.17", tmp_path_factory.mktemp("reference") / "site", (runtime.PLUGINS_MODULE,))
    assert run("apply", "--site-packages", site, *SUBSET).exit_code == 0
    return report_files(site)


def test_every_replace_is_a_kill_point(release, reference):
    """REPLACES is the count of os.replace calls: a kill after one more is never reached."""
    assert set(reference) == {f"{RUNTIME_MODULE}/__init__.py", *(f"{RUNTIME_DIST_INFO}/{name}" for name in (
        "METADATA", "entry_points.txt", "RECORD"))}
    site = release("0.5.17", extra=(runtime.PLUGINS_MODULE,))
    assert killed(REPLACES + 1, site) == 0
    assert report_files(site) == reference


@pytest.mark.parametrize("kill_at", range(1, REPLACES + 1))
def test_sigkill_during_an_apply_writing_the_runtime_report(release, reference, kill_at):
    site = release("0.5.17", extra=(runtime.PLUGINS_MODULE,))
    before = snapshot(site)
    assert killed(kill_at, site) == -9
    status = run("status", "--site-packages", site)
    assert status.exit_code == 0
    pending = (site / ".patchkit" / "journal.json").exists()
    assert ("an interrupted patchkit run is pending" in status.stderr) == pending, status.stderr
    again = run("apply", "--site-packages", site, *SUBSET)
    assert again.exit_code == 0, again.stderr
    if pending:  # past the commit point: this run finished the killed one and must say so
        assert "nothing to do: no file changed" not in again.stdout, again.stdout
        assert "finished an interrupted earlier run first" in again.stdout, again.stdout
    assert states(site)["mtp-layer-detection"] == states(site)["symm-mem-kill-switch"] == "applied"
    assert report_files(site) == reference
    assert run("revert", "--site-packages", site).exit_code == 0
    assert snapshot(site) == before
