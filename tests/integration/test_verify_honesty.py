"""verify says exactly what it checked: "verified" only when every check it counts ran."""

from __future__ import annotations

import pytest

from testing.cli import run

pytestmark = pytest.mark.integration


def test_skipped_checks_are_not_verified(release):
    # A plain folder: verify's child is this test's Python, which has no numpy, so the imports
    # of the patched modules cannot run (the whole release: verify imports them).
    site = release("0.5.14", whole=True)
    assert run("apply", "--site-packages", site).exit_code == 0

    plain = run("verify", "--site-packages", site)
    assert plain.exit_code == 0, plain.stdout
    assert "  skipped  import sglang.srt.configs.model_config  (needs numpy)" in plain.stdout
    last = plain.stdout.strip().splitlines()[-1]
    assert last.startswith("NOT fully verified: ") and "could not run here" in last

    strict = run("verify", "--site-packages", site, "--strict")
    assert strict.exit_code == 1
    assert "check(s) could not run (--allow-skipped accepts that)" in strict.stdout.strip().splitlines()[-1]

    allowed = run("verify", "--site-packages", site, "--strict", "--allow-skipped", "--json")
    assert allowed.exit_code == 0, allowed.stdout
    data = allowed.json()
    assert data["ok"] is True and data["verified"] is False
    assert "import sglang.srt.configs.model_config" in data["skipped"]
    assert data["summary"].startswith("NOT fully verified")


def test_unpatched_tree_is_not_called_verified(release):
    site = release("0.5.14")
    plain = run("verify", "--site-packages", site, "--json")
    assert plain.exit_code == 0
    assert plain.json()["verified"] is False and plain.json()["checks"] == []
    assert plain.json()["summary"].startswith("NOT verified: patchkit has patched nothing here")
    assert "mtp-layer-detection" in plain.json()["not_applied"]
    strict = run("verify", "--site-packages", site, "--strict")
    assert strict.exit_code == 1 and "needed patch(es) not applied" in strict.stdout
