"""Issue 9, item by item, on real releases 0.5.14 and 0.5.19 (trees holding only the files
patchkit touches): nothing lost, nothing outside the package touched, never a hang."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from patchkit.store import lock as lock_mod
from testing.cli import run, states
from testing.faults import cache_renders, run_faulted, warm_home
from testing.releases import copy_minimal, target_files, tree

pytestmark = pytest.mark.integration

VERSIONS = ["0.5.14", "0.5.19"]


@pytest.fixture(autouse=True)
def _fast(monkeypatch):
    cache_renders(monkeypatch)


@pytest.fixture
def fresh(tmp_path):
    def make(version: str, name: str = "site") -> Path:
        return copy_minimal(version, tmp_path / f"{name}-{version}")

    return make


_APPLIED: dict[str, dict] = {}


def applied_tree(version: str, tmp_path_factory) -> dict:
    """The tree an uninterrupted apply makes of a fresh minimal copy."""
    if version not in _APPLIED:
        site = copy_minimal(version, tmp_path_factory.mktemp("reference") / "site")
        assert run("apply", "--site-packages", site).exit_code == 0
        _APPLIED[version] = tree(site)
    return _APPLIED[version]


def assert_refused(result, code: int, *words: str) -> None:
    assert result.exit_code == code, (result.exit_code, result.stdout, result.stderr)
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    for word in words:
        assert word in lines[0], lines[0]


def stderr_error(proc) -> str:
    lines = [line for line in proc.stderr.splitlines() if line.startswith("error: ")]
    assert len(lines) == 1, proc.stderr
    return lines[0]


def back_to_pristine(site: Path, pristine: dict) -> None:
    result = run("revert", "--site-packages", site)
    assert result.exit_code == 0, result.stderr
    assert tree(site) == pristine


# --- 1. Ctrl-C or an I/O error right after a file is moved into place ------------------------


def target_files_changed(site: Path) -> list[str]:
    return [rel for rel in json.loads((site / ".patchkit/state.json").read_text())["files"]]


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("how", ["interrupt-after", "eio-after"])
def test_ctrl_c_or_io_error_after_a_move_loses_nothing_and_says_what_happened(fresh, version, how, tmp_path_factory):
    reference = applied_tree(version, tmp_path_factory)
    files = len([rel for rel in reference if rel.startswith(".patchkit/backups/") and reference[rel][0] == "file"])
    # backups, staged files, journal, then the moves: the first move, the last, and the state file.
    for at in (files * 2 + 1, files * 2 + 2, files * 3 + 1, files * 3 + 2):
        site = fresh(version, f"at{at}")
        pristine = tree(site)
        proc = run_faulted("replace", at, how, "apply", "--site-packages", site)
        now = tree(site)
        if how == "interrupt-after":
            assert proc.returncode == 130, proc.stderr
            message = stderr_error(proc)
            if at == files * 2 + 1:  # the journal itself: the run had not started to change files
                assert "before any file was changed" in message and now == pristine, message
            else:
                assert "the run was finished first" in message, message
                assert now == reference
        else:
            # An error that does not repeat is retried past the commit point; before it, nothing changed.
            assert (proc.returncode, now) in ((0, reference), (6, pristine)), proc.stderr
        back_to_pristine(site, pristine)


@pytest.mark.parametrize("version", VERSIONS)
def test_ctrl_c_during_backups_leaves_no_stray_backup(fresh, version):
    site = fresh(version)
    pristine = tree(site)
    for at in (1, 2, 3):
        proc = run_faulted("replace", at, "interrupt-after", "apply", "--site-packages", site)
        assert proc.returncode == 130 and "every file was left as it was" in stderr_error(proc)
        assert tree(site) == pristine


# --- 2. recovery looks at the files before it writes ---------------------------------------------


def kill_after_journal(site: Path) -> None:
    # The journal is the first replace after one backup and one staged copy per changed file.
    changed = count_changes(site)
    warm_home(site)
    proc = run_faulted("replace", changed * 2 + 1, "kill-after", "apply", "--site-packages", site)
    assert proc.returncode == -9
    assert (site / ".patchkit/journal.json").exists()


def count_changes(site: Path) -> int:
    result = run("apply", "--site-packages", site, "--dry-run", "--json")
    return len(result.json()["files"])


def test_a_release_upgraded_under_a_pending_journal_is_discarded_without_writing(fresh, tmp_path):
    site = fresh("0.5.19")
    kill_after_journal(site)
    # `pip install --upgrade sglang==0.5.20` over the half-applied tree.
    upgraded = copy_minimal("0.5.20", tmp_path / "upgrade")
    for info in site.glob("sglang-*.dist-info"):
        shutil.rmtree(info)
    shutil.copytree(upgraded, site, dirs_exist_ok=True)
    expected = {rel: v for rel, v in tree(site).items() if not rel.startswith(".patchkit")}
    result = run("revert", "--site-packages", site)
    assert result.exit_code == 0, result.stderr
    assert "discarded without writing" in result.stderr
    assert tree(site) == expected  # every 0.5.20 file as installed, `.patchkit/` gone


@pytest.mark.parametrize("version", VERSIONS)
def test_recovery_stops_on_a_file_edited_under_a_pending_journal(fresh, version):
    site = fresh(version)
    kill_after_journal(site)
    journal = json.loads((site / ".patchkit/journal.json").read_text())
    edited = journal["files"][-1]["rel"]
    with open(site / edited, "ab") as handle:
        handle.write(b"# the user's edit\n")
    before = tree(site)
    for command in ("revert", "apply"):
        assert_refused(run(command, "--site-packages", site), 4, edited, "nothing was written")
        assert tree(site) == before
    # --force finishes the run and keeps the user's bytes.
    result = run("apply", "--site-packages", site, "--force")
    assert result.exit_code == 0, result.stderr
    assert "overwritten" in result.stdout and edited in result.stdout
    copies = list((site / ".patchkit/overwritten").rglob(Path(edited).name))
    assert len(copies) == 1 and copies[0].read_bytes().endswith(b"# the user's edit\n")


# --- 4. `.patchkit/` is never followed out of the package --------------------------------------


@pytest.mark.parametrize("where", [".patchkit", ".patchkit/backups", ".patchkit/lock", "backup-file"])
def test_symlinks_under_patchkit_are_refused(fresh, tmp_path, where):
    site = fresh("0.5.19")
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "precious.txt").write_bytes(b"not patchkit's\n")
    if where == "backup-file":
        assert run("apply", "--site-packages", site).exit_code == 0
        rel = target_files_changed(site)[0]
        backup = site / ".patchkit/backups" / rel
        backup.unlink()
        backup.symlink_to(outside / "precious.txt")
    else:
        if where != ".patchkit":
            (site / ".patchkit").mkdir()
        (site / where).symlink_to(outside if where != ".patchkit/lock" else outside / "precious.txt")
    site_before, outside_before = tree(site), tree(outside)
    for command in ("apply", "revert", "status"):
        assert_refused(run(command, "--site-packages", site), 3, "symlink", "refuses")
        assert tree(site) == site_before and tree(outside) == outside_before


# --- 5. --only / --skip never overwrite a drifted file; --force names it and keeps it -------------


@pytest.mark.parametrize("version", VERSIONS)
def test_apply_only_leaves_a_drifted_file_of_another_patch_alone(fresh, version):
    site = fresh(version)
    assert run("apply", "--site-packages", site, "--only", "draft-lmhead-placeholder").exit_code == 0
    drifted = target_files_changed(site)[0]
    with open(site / drifted, "ab") as handle:
        handle.write(b"# local fix\n")
    edited = (site / drifted).read_bytes()
    for selection in (("--only", "autoround-packed-mapping"), ("--skip", "draft-lmhead-placeholder")):
        result = run("apply", "--site-packages", site, *selection)
        assert result.exit_code == 0, result.stderr
        assert (site / drifted).read_bytes() == edited
    assert states(site)["draft-lmhead-placeholder"] == "drifted"
    assert_refused(run("apply", "--site-packages", site), 4, drifted)
    assert (site / drifted).read_bytes() == edited
    result = run("apply", "--site-packages", site, "--force", "--json")
    assert result.exit_code == 0, result.stderr
    [item] = result.json()["overwritten"]
    assert item["file"] == drifted and (site / item["kept"]).read_bytes() == edited
    assert states(site)["draft-lmhead-placeholder"] == "applied"
    assert run("revert", "--site-packages", site, "--only", "autoround-packed-mapping").exit_code == 0
    assert (site / item["kept"]).read_bytes() == edited  # kept until the next full revert
    assert run("revert", "--site-packages", site).exit_code == 0
    assert not (site / ".patchkit").exists()


# --- 6. SIGKILL during revert's clean-up, 9. an interrupted first apply -------------------------


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("function", ["unlink", "rmdir"])
def test_sigkill_during_revert_clean_up_never_wedges_the_tree(fresh, version, function, tmp_path_factory):
    reference = applied_tree(version, tmp_path_factory)
    site = fresh(version)
    pristine = tree(site)
    at = 1
    while True:
        assert run("apply", "--site-packages", site).exit_code == 0
        proc = run_faulted(function, at, "kill-before", "revert", "--site-packages", site)
        if proc.returncode == 0:
            break
        assert proc.returncode == -9, proc.stderr
        assert states(site)  # status answers
        result = run("apply", "--site-packages", site)
        assert result.exit_code == 0, result.stderr
        assert tree(site) == reference
        back_to_pristine(site, pristine)
        at += 1
    assert tree(site) == pristine and at > 3


@pytest.mark.parametrize("version", VERSIONS)
def test_an_interrupted_first_apply_leaves_nothing_for_revert(fresh, version):
    site = fresh(version)
    pristine = tree(site)
    warm_home(site)
    proc = run_faulted("replace", 3, "kill-before", "apply", "--site-packages", site)
    assert proc.returncode == -9 and (site / ".patchkit/backups").is_dir()
    back_to_pristine(site, pristine)


# --- 7. backups are checked, 8. the state file is validated ----------------------------------------


@pytest.mark.parametrize("version", VERSIONS)
def test_a_tampered_backup_is_refused(fresh, version):
    site = fresh(version)
    assert run("apply", "--site-packages", site).exit_code == 0
    rel = target_files_changed(site)[0]
    backup = site / ".patchkit/backups" / rel
    backup.write_bytes(backup.read_bytes() + b"import os; os.system('evil')\n")
    before = tree(site)
    assert_refused(run("revert", "--site-packages", site), 1, rel, "does not match")
    assert tree(site) == before


BAD_STATES = {
    "patches is a string": lambda s: s.update(patches="mtp-layer-detection"),
    "pristine null for a release file": lambda s: next(iter(s["files"].values())).update(pristine_sha256=None),
    "short hash": lambda s: next(iter(s["files"].values())).update(patched_sha256="ab" * 8),
    "path outside sglang": lambda s: s["files"].update({"../outside.py": next(iter(s["files"].values()))}),
    "absolute path": lambda s: s["files"].update({"/etc/passwd": next(iter(s["files"].values()))}),
    "unknown schema": lambda s: s.update(schema=7),
    "patches of a file not a list": lambda s: next(iter(s["files"].values())).update(patches="x"),
    "unknown field": lambda s: s.update(extra=1),
}


@pytest.mark.parametrize("bad", sorted(BAD_STATES))
def test_a_wrong_shape_state_file_changes_nothing(fresh, bad):
    site = fresh("0.5.19")
    assert run("apply", "--site-packages", site).exit_code == 0
    data = json.loads((site / ".patchkit/state.json").read_text())
    if bad == "pristine null for a release file":
        version_py = "sglang/version.py"
        data["files"][version_py] = {**next(iter(data["files"].values())), "pristine_sha256": None}
    else:
        BAD_STATES[bad](data)
    (site / ".patchkit/state.json").write_text(json.dumps(data))
    before = tree(site)
    for command in ("revert", "apply", "status"):
        assert_refused(run(command, "--site-packages", site), 1, "state")
        assert tree(site) == before


@pytest.mark.parametrize("version", VERSIONS)
def test_a_schema_1_state_file_is_read(fresh, version):
    site = fresh(version)
    pristine = tree(site)
    assert run("apply", "--site-packages", site).exit_code == 0
    data = json.loads((site / ".patchkit/state.json").read_text())
    data["schema"] = 1
    data.pop("runtime", None)  # a field of schema 3: a schema-1 file never had it
    for record in data["files"].values():
        del record["patch_sha256"]
    (site / ".patchkit/state.json").write_text(json.dumps(data))
    assert set(states(site).values()) <= {"applied", "upstream-fixed", "not-applicable"}
    back_to_pristine(site, pristine)


# --- 10. the lock ------------------------------------------------------------------------------------


def patchkit(*args) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "patchkit", *map(str, args)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


def test_concurrent_no_op_reverts_never_crash(fresh):
    site = fresh("0.5.19")
    for _ in range(3):
        procs = [patchkit("revert", "--site-packages", site) for _ in range(12)]
        results = [(p.wait(timeout=120), p.stderr.read()) for p in procs]
        assert all(code == 0 for code, _ in results), [r for r in results if r[0] != 0][:2]
    assert not (site / ".patchkit").exists()


def test_racing_applies_and_reverts_serialize(fresh, tmp_path_factory):
    """Runs that race on one tree take turns: every one exits 0, and the tree is always one of
    the two whole states."""
    site = fresh("0.5.19")
    pristine, reference = tree(site), applied_tree("0.5.19", tmp_path_factory)
    for _ in range(3):
        procs = [patchkit("apply" if i % 2 else "revert", "--site-packages", site) for i in range(10)]
        results = [(p.wait(timeout=300), p.stderr.read()) for p in procs]
        assert all(code == 0 for code, _ in results), [r for r in results if r[0] != 0][:2]
        assert tree(site) in (pristine, reference)
    back_to_pristine(site, pristine)


def test_a_waiting_run_says_who_holds_the_lock_and_gives_up_after_the_timeout(fresh):
    site = fresh("0.5.19")
    holder = subprocess.Popen([sys.executable, "-c", (
        "import sys, time; from pathlib import Path; from patchkit.store import lock\n"
        "with lock.locked(Path(sys.argv[1])):\n    print('held', flush=True); time.sleep(600)"), str(site)],
        stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        holder.send_signal(signal.SIGSTOP)  # a stopped holder: nobody may wait silently forever
        started = time.monotonic()
        # The waiter notes the moment it starts running patchkit's code (imports included; the
        # interpreter's own start-up before it is not patchkit's) on CLOCK_MONOTONIC, which is
        # the same clock in this process: the "waiting" line must follow within a second.
        waiter = subprocess.Popen([sys.executable, "-c", (
            "import sys, time; print('start', time.monotonic(), file=sys.stderr, flush=True)\n"
            "sys.argv = ['patchkit', *sys.argv[1:]]\nfrom patchkit.cli.app import main\nmain()"),
            "apply", "--site-packages", str(site), "--lock-timeout", "8"],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        os.set_blocking(waiter.stderr.fileno(), False)
        lines: list[str] = []
        while len(lines) < 2 and time.monotonic() - started < 8.0:
            line = waiter.stderr.readline()
            if line:
                lines.append(line)
                seen = time.monotonic()
            else:
                time.sleep(0.005)
        assert len(lines) == 2 and lines[0].startswith("start "), lines
        first, told = lines[1], seen - started
        assert seen - float(lines[0].split()[1]) < 1.0, f"the waiting line came {seen - float(lines[0].split()[1]):.2f}s after patchkit started"
        assert f"PID {holder.pid}" in first and "waiting" in first and "python" in first, first
        code = waiter.wait(timeout=60)
        waited = time.monotonic() - started
        rest = waiter.stderr.read() or ""
        assert code == 5, rest
        assert told < waited - 4 and 8 <= waited < 30 and "gave up" in rest and f"PID {holder.pid}" in rest
        started = time.monotonic()
        now = subprocess.run([sys.executable, "-m", "patchkit", "revert", "--site-packages", str(site),
                              "--lock-timeout", "0"], capture_output=True, text=True, timeout=60)
        assert now.returncode == 5 and time.monotonic() - started < 5
    finally:
        holder.send_signal(signal.SIGKILL)
        holder.wait()
    assert run("apply", "--site-packages", site).exit_code == 0


# --- 11. environment failures ----------------------------------------------------------------------


def mount(*args: str) -> None:
    proc = subprocess.run(["mount", *args], capture_output=True, text=True)
    if proc.returncode != 0:
        pytest.skip(f"mounting is not permitted here: {proc.stderr.strip()}")


@pytest.fixture
def tmpfs(tmp_path):
    mounted: list[Path] = []

    def make(size: str) -> Path:
        point = tmp_path / f"mnt{len(mounted)}"
        point.mkdir()
        mount("-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(point))
        mounted.append(point)
        return point

    yield make
    for point in reversed(mounted):
        subprocess.run(["umount", "-l", str(point)], check=False)


@pytest.mark.parametrize("version", VERSIONS)
def test_read_only_mount(tmpfs, version, tmp_path_factory):
    point = tmpfs("64m")
    site = copy_minimal(version, point / "site")
    pristine = tree(site)
    mount("-o", "remount,ro", str(point))
    assert_refused(run("apply", "--site-packages", site), 6, "Read-only file system", str(site))
    assert tree(site) == pristine
    mount("-o", "remount,rw", str(point))
    assert run("apply", "--site-packages", site).exit_code == 0
    patched = tree(site)
    mount("-o", "remount,ro", str(point))
    result = run("apply", "--site-packages", site)  # a no-op on a patched read-only tree
    assert result.exit_code == 0 and "nothing to do" in result.stdout, result.stderr
    assert run("status", "--site-packages", site).exit_code == 0
    assert_refused(run("revert", "--site-packages", site), 6, "Read-only file system")
    assert tree(site) == patched


@pytest.mark.parametrize("version", VERSIONS)
def test_a_full_disk_fails_cleanly_and_leaves_no_empty_folders(tmpfs, version):
    point = tmpfs("4m")
    site = copy_minimal(version, point / "site")
    pristine = tree(site)
    filler = point / "filler"
    with open(filler, "wb") as handle:
        try:
            while True:
                handle.write(b"\0" * 65536)
        except OSError:
            pass
    free = os.statvfs(point).f_bavail * os.statvfs(point).f_frsize
    result = run("apply", "--site-packages", site)
    assert_refused(result, 6, "No space left on device")
    assert tree(site) == pristine, f"{free} bytes were free"
    filler.unlink()
    assert run("apply", "--site-packages", site).exit_code == 0


def test_a_folder_where_a_file_should_be(fresh):
    site = fresh("0.5.19")
    rel = target_files("0.5.19")[0]
    (site / rel).unlink()
    (site / rel).mkdir()
    before = tree(site)
    assert_refused(run("apply", "--site-packages", site), 6, rel, "EISDIR")
    assert tree(site) == before


@pytest.mark.parametrize("where", ["outside the patched part", "first line", "declared latin-1"])
def test_undecodable_source_and_metadata(fresh, where):
    """A target file that is not valid UTF-8 is refused whole (exit 6 naming the file, nothing
    changed), even where its odd bytes lie outside the part the patches parse, and even under
    a coding line declaring another encoding."""
    site = fresh("0.5.19")
    rel = "sglang/srt/models/qwen3_5_mtp.py"
    data = (site / rel).read_bytes()
    if where == "outside the patched part":
        data += b"# \xff\xfe not utf-8\n"
    elif where == "first line":
        data = b"# \xff\xfe\n" + data
    else:
        data = b"# -*- coding: latin-1 -*-\n" + data + b"# caf\xe9\n"
    (site / rel).write_bytes(data)
    before = tree(site)
    for dry in ((), ("--dry-run",)):
        assert_refused(run("apply", "--site-packages", site, *dry), 6, str(site / rel), "undecodable")
        assert tree(site) == before
    site = fresh("0.5.19", "meta")
    metadata = next(site.glob("sglang-*.dist-info")) / "METADATA"
    metadata.write_bytes(metadata.read_bytes() + b"\xff\xfe\n")
    assert_refused(run("status", "--site-packages", site), 6, "METADATA", "undecodable")


# --- 12. the smaller ones --------------------------------------------------------------------------


def test_empty_site_packages_is_a_usage_error():
    for command in ("apply", "status", "revert"):
        assert_refused(run(command, "--site-packages", ""), 2, "--site-packages needs a folder")


def test_revert_only_of_an_unknown_id_is_exit_2_whatever_the_state(fresh):
    site = fresh("0.5.19")
    assert_refused(run("revert", "--site-packages", site, "--only", "no-such-patch"), 2, "unknown patch id")
    assert run("apply", "--site-packages", site).exit_code == 0
    assert_refused(run("revert", "--site-packages", site, "--only", "no-such-patch"), 2, "unknown patch id")


def test_status_tells_a_run_in_progress_from_an_interrupted_one(fresh):
    site = fresh("0.5.19")
    kill_after_journal(site)
    assert "interrupted patchkit run is pending" in run("status", "--site-packages", site).stderr
    with lock_mod.locked(site):
        assert "in progress (PID" in run("status", "--site-packages", site).stderr


@pytest.mark.behaviour
def test_verify_with_a_pending_journal_is_not_verified(tmp_path):
    """A whole patched SGLang 0.5.17 in a venv that can import it (the behaviour environment's
    packages): a revert killed right after its journal is written leaves every file patched and
    recorded, every check passes, and still verify must not say "verified"."""
    import venv

    from testing import behaviour
    from testing.releases import pristine

    env = tmp_path / "env"
    venv.EnvBuilder(with_pip=False).create(env)
    site = next((env / "lib").glob("python3*/site-packages"))
    deps = next((behaviour.python().parent.parent / "lib").glob("python3*/site-packages"))
    (site / "behaviour-deps.pth").write_text(f"{deps}\n")
    for entry in ("sglang", "sglang-0.5.17.dist-info"):
        shutil.copytree(pristine("0.5.17") / entry, site / entry)
    assert run("apply", "--site-packages", site).exit_code == 0
    python = env / "bin" / "python"
    # A full revert stages one copy per recorded file, then writes the journal (the next replace).
    recorded = json.loads((site / ".patchkit/state.json").read_text())["files"]
    proc = run_faulted("replace", len(recorded) + 1, "kill-after", "revert", "--site-packages", site)
    assert proc.returncode == -9 and (site / ".patchkit/journal.json").exists(), proc.stderr
    pending = run("verify", "--python", python, "--json")
    data = pending.json()
    assert data["verified"] is False and data["ok"] is False and pending.exit_code == 1, pending.stdout
    assert data["summary"].startswith("verification FAILED"), data["summary"]
    journal = [c for c in data["checks"] if c["check"].endswith("journal.json")]
    assert journal and journal[0]["result"] == "failed" and "pending" in journal[0]["detail"], data["checks"]
    # Every other check ran and passed, and no needed patch is missing: without the journal this
    # very report would be "verified" (tests/behaviour/test_verify.py checks that on its own).
    others = [c for c in data["checks"] if c not in journal]
    assert others and all(c["result"] == "ok" for c in others) and data["not_applied"] == [], data
    assert run("revert", "--site-packages", site).exit_code == 0  # the next run finishes it
    assert not (site / ".patchkit").exists()


@pytest.mark.parametrize("version", VERSIONS)
def test_bom_line_endings_mode_and_in_package_symlinks_survive_apply_and_revert(fresh, version, tmp_path_factory):
    site = fresh(version)
    prefix = ".patchkit/backups/"
    files = sorted(rel[len(prefix):] for rel, entry in applied_tree(version, tmp_path_factory).items()
                   if rel.startswith(prefix) and entry[0] == "file")
    bom, crlf, executable, linked = files[0], files[1], files[2], files[3]
    (site / bom).write_bytes(b"\xef\xbb\xbf" + (site / bom).read_bytes())
    (site / crlf).write_bytes((site / crlf).read_bytes().replace(b"\n", b"\r\n"))
    os.chmod(site / executable, 0o755)
    # The file becomes a symlink to a copy kept elsewhere inside the package.
    real = site / "sglang" / "_real_copy.py"
    (site / linked).rename(real)
    (site / linked).symlink_to(os.path.relpath(real, (site / linked).parent))
    pristine = tree(site)
    result = run("apply", "--site-packages", site)
    assert result.exit_code == 0, result.stderr
    assert set(target_files_changed(site)) >= {bom, crlf, executable, linked}
    assert (site / linked).is_symlink() and (site / linked).read_bytes() != pristine[str(real.relative_to(site))][2]
    assert (site / bom).read_bytes().startswith(b"\xef\xbb\xbf")
    data = (site / crlf).read_bytes()
    assert data.count(b"\r\n") == data.count(b"\n")
    assert os.stat(site / executable).st_mode & 0o777 == 0o755
    back_to_pristine(site, pristine)


def test_advice_to_reinstall_also_says_to_remove_patchkit(fresh):
    site = fresh("0.5.19")
    assert run("apply", "--site-packages", site).exit_code == 0
    rel = target_files_changed(site)[0]
    (site / ".patchkit/backups" / rel).unlink()
    result = run("revert", "--site-packages", site)
    assert_refused(result, 1, "missing", "Reinstall SGLang", "remove", ".patchkit")
