"""Stale and orphaned state: `.patchkit/` of a release that pip upgraded or uninstalled."""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from testing.cli import run
from testing.releases import MODEL_CONFIG, REPO, snapshot, tree_bytes
from testing.releases import pristine as pristine_release

pytestmark = pytest.mark.integration


def pip_upgrade(site, version: str) -> None:
    """`pip install --upgrade` of another release into the folder, as a user would (no deps)."""
    wheel = next((pristine_release(version).parent.parent / "wheels").glob(f"sglang-{version}-*.whl"))
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-compile", "--upgrade",
                    "--disable-pip-version-check", "--target", str(site), str(wheel)], check=True, capture_output=True)


def uninstall(site) -> None:
    """What `pip uninstall sglang` removes: the files its RECORD lists, i.e. the package and its metadata."""
    shutil.rmtree(site / "sglang")
    for info in site.glob("sglang-*.dist-info"):
        shutil.rmtree(info)


def test_upgraded_release_state_is_discarded(release):
    site = release("0.5.14")
    assert run("apply", "--site-packages", site).exit_code == 0
    pip_upgrade(site, "0.5.17")
    upgraded = tree_bytes(site / "sglang")

    status = run("status", "--site-packages", site, "--json")
    assert status.exit_code == 0, status.stderr
    assert status.json()["sglang"]["version"] == "0.5.17"
    assert any("stale state" in w and "SGLang 0.5.14" in w for w in status.json()["warnings"])
    assert "pending" in {p["state"] for p in status.json()["patches"]}

    diff = run("diff", "--site-packages", site)
    assert diff.exit_code == 0 and diff.stdout == "" and "stale state" in diff.stderr

    applied = run("apply", "--site-packages", site)
    assert applied.exit_code == 0, applied.stderr
    assert "discarded the stale record of SGLang 0.5.14" in applied.stderr
    state = (site / ".patchkit/state.json").read_text()
    assert '"sglang_version": "0.5.17"' in state
    backups = {p.relative_to(site / ".patchkit/backups").as_posix()
               for p in (site / ".patchkit/backups").rglob("*") if p.is_file()}
    assert all(f'"{rel}"' in state for rel in backups)  # no 0.5.14 backup left behind
    assert run("revert", "--site-packages", site).exit_code == 0
    assert tree_bytes(site / "sglang") == upgraded
    assert not (site / ".patchkit").exists()


def test_stale_record_with_patchkit_bytes_still_in_place_is_refused(release):
    site = release("0.5.14")
    assert run("apply", "--site-packages", site).exit_code == 0
    info = site / "sglang-0.5.14.dist-info"
    meta = (info / "METADATA").read_text().replace("Version: 0.5.14", "Version: 0.5.15")
    (info / "METADATA").unlink()
    (info / "METADATA").write_text(meta)
    before = snapshot(site)
    # --force too: the backups are 0.5.14's bytes, the files patchkit's; neither is 0.5.15's own.
    for command in (("apply",), ("revert",), ("clean",), ("apply", "--force"), ("revert", "--force")):
        result = run(*command, "--site-packages", site)
        assert result.exit_code == 4, (command, result.stderr)
        assert "still holds what patchkit wrote for SGLang 0.5.14" in result.stderr
        assert "--force cannot choose between the two releases' bytes" in result.stderr
        # A plain folder (no venv owns it): pip must be told where.
        assert (f"`pip install --force-reinstall --no-deps --upgrade --target {site} sglang==0.5.15`"
                in result.stderr), result.stderr
    assert snapshot(site) == before


def test_stale_record_in_a_git_checkout_names_the_git_command_that_restores_it(release):
    """pip would not rewrite a checkout's files: the advice is the git command, and it works."""
    site = release("0.5.14")
    git = ["git", "-C", str(site), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run([*git, "init", "-q"], check=True)
    subprocess.run([*git, "add", "-A"], check=True)
    subprocess.run([*git, "commit", "-q", "-m", "release"], check=True)
    assert run("apply", "--source", site).exit_code == 0
    info = site / "sglang-0.5.14.dist-info"
    (info / "METADATA").write_text((info / "METADATA").read_text().replace("Version: 0.5.14", "Version: 0.5.14.post1"))
    refused = run("apply", "--source", site)
    assert refused.exit_code == 4, refused.stderr
    assert "pip install" not in refused.stderr
    command = refused.stderr.split("Restore them from git: `")[1].split("`")[0]
    assert command.startswith(f"git -C {site} checkout -- sglang/"), command
    subprocess.run(shlex.split(command), check=True)
    applied = run("apply", "--source", site)
    assert applied.exit_code == 0, applied.stderr
    assert "discarded the stale record of SGLang 0.5.14" in applied.stderr


def test_uninstalled_release_leaves_state_that_clean_removes(release):
    site = release("0.5.14")
    assert run("apply", "--site-packages", site).exit_code == 0
    uninstall(site)
    status = run("status", "--site-packages", site)
    assert status.exit_code == 3
    assert f"{site / '.patchkit'} (left by SGLang 0.5.14)" in status.stderr
    assert f"`patchkit clean --site-packages {site}`" in status.stderr
    cleaned = run("clean", "--site-packages", site, "--json")
    assert cleaned.exit_code == 0, cleaned.stderr
    assert cleaned.json() == {"removed": [f"{site / '.patchkit'} (left by SGLang 0.5.14)"]}
    assert not (site / ".patchkit").exists()
    again = run("clean", "--site-packages", site)
    assert again.exit_code == 0 and again.stdout == "nothing to clean\n"


def test_revert_only_on_an_orphaned_state_removes_nothing(release):
    site = release("0.5.14")
    assert run("apply", "--site-packages", site).exit_code == 0
    uninstall(site)
    before = snapshot(site)
    known = run("revert", "--site-packages", site, "--only", "mtp-layer-detection")
    assert known.exit_code == 3, known.stderr
    assert "nothing to revert for mtp-layer-detection there and nothing was removed" in known.stderr
    unknown = run("revert", "--site-packages", site, "--only", "no-such-patch")
    assert unknown.exit_code == 2 and "unknown patch id 'no-such-patch'" in unknown.stderr
    assert snapshot(site) == before and (site / ".patchkit" / "state.json").is_file()


def test_revert_removes_an_orphaned_state_too(release):
    site = release("0.5.14")
    assert run("apply", "--site-packages", site).exit_code == 0
    uninstall(site)
    result = run("revert", "--site-packages", site)
    assert result.exit_code == 0, result.stderr
    assert not (site / ".patchkit").exists()


def test_clean_refuses_live_patches(release):
    site = release("0.5.14")
    assert run("apply", "--site-packages", site).exit_code == 0
    before = snapshot(site)
    result = run("clean", "--site-packages", site)
    assert result.exit_code == 1 and f"are live, not stale; `patchkit revert --site-packages {site}`" in result.stderr
    assert snapshot(site) == before
    assert (site / MODEL_CONFIG).exists()


@pytest.fixture
def venv_sglang(tmp_path):
    """(python, site-packages) of a fresh venv with SGLang 0.5.14 installed by pip, whose own Python
    can run patchkit (this project and its dependencies on its path, not in its site-packages)."""
    import venv

    from testing.releases import HOME

    pristine_release("0.5.14")  # makes sure the tests' cache has the wheel
    wheel = next((HOME / "wheels").glob("sglang-0.5.14-*.whl"))
    env_dir = tmp_path / "venv"
    venv.EnvBuilder(with_pip=False).create(env_dir)
    python = env_dir / "bin" / "python"
    pip(python, "install", "--no-deps", "--no-compile", str(wheel))
    site = Path(subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                               capture_output=True, text=True, check=True).stdout.strip())
    assert (site / "sglang" / "__init__.py").is_file()
    return python, site


def pip(python: Path, *args: str) -> None:
    """This Python's pip working on another environment (`pip --python`), as a user's pip would."""
    subprocess.run([sys.executable, "-m", "pip", "--python", str(python), "--disable-pip-version-check", "-q", *args],
                   check=True, capture_output=True, text=True)


def patchkit_in(python: Path, *args: str) -> subprocess.CompletedProcess:
    """patchkit run by that environment's own Python, with no targeting flag (default discovery)."""
    ours = next(p for p in sys.path if p.endswith("site-packages") and Path(p, "click").is_dir())
    code = ("import site, sys; site.addsitedir(sys.argv.pop(1)); sys.argv[0] = 'patchkit'; "
            "from patchkit.cli.app import main; main()")
    return subprocess.run([str(python), "-c", code, ours, *args], capture_output=True, text=True, cwd="/",
                          env={**os.environ, "PYTHONPATH": str(REPO)})


def test_orphan_found_by_default_discovery_and_by_python(venv_sglang):
    """`pip uninstall sglang` in a venv: patchkit running in that venv (no flag) and patchkit
    pointed at its Python (`--python`) both name the `.patchkit/` left behind; clean removes it."""
    python, site = venv_sglang
    applied = patchkit_in(python, "apply", "--only", "mtp-layer-detection")  # one file: quick
    assert applied.returncode == 0, applied.stderr
    assert (site / ".patchkit" / "state.json").is_file()
    pip(python, "uninstall", "-y", "sglang")  # the real thing: removes what RECORD lists
    assert not (site / "sglang" / "__init__.py").exists() and (site / ".patchkit").is_dir()
    left = f"{site / '.patchkit'} (left by SGLang 0.5.14)"

    inside = patchkit_in(python, "status")
    assert inside.returncode == 3, inside.stderr
    assert left in inside.stderr and "`patchkit clean`" in inside.stderr, inside.stderr
    as_json = patchkit_in(python, "status", "--json")
    assert as_json.returncode == 3 and left in json.loads(as_json.stdout)["error"]["message"]

    outside = run("status", "--python", python)
    assert outside.exit_code == 3, outside.stderr
    assert left in outside.stderr and f"`patchkit clean --python {python}`" in outside.stderr

    cleaned = run("clean", "--python", python, "--json")
    assert cleaned.exit_code == 0, cleaned.stderr
    assert cleaned.json() == {"removed": [left]}
    assert not (site / ".patchkit").exists()
    again = patchkit_in(python, "clean")
    assert again.returncode == 0 and again.stdout == "nothing to clean\n", again.stderr

