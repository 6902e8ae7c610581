"""Odd files and hostile values never hang patchkit nor end in exit 70 (issue 18, items 5 and 6):
a FIFO wherever patchkit reads is refused at once (exit 6, naming it), or ignored where it is a
cache; every wait is bounded; deep, huge or forged data gets its documented exit code.

Each command runs as a child process with a timeout: a hang fails the test instead of the suite."""

from __future__ import annotations

import json
import os
import struct
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from patchkit.engine import registry
from patchkit.releases.pristine import WheelSource
from patchkit.engine.verdicts import CACHE_FILE, VerdictCache
from testing.cli import run
from testing.doctor import model_folder
from testing.releases import HOME, MODEL_CONFIG, pristine, snapshot
from tests.integration.test_external_patch_sets import write_patch

pytestmark = pytest.mark.integration

TIMEOUT = 60  # seconds; each of these runs takes one or two
GPU = ("--gpus", "1", "--gpu-memory", "80", "--gpu-free", "79", "--sm", "9.0")


def cli(*args: str | Path, home: Path | None = None) -> subprocess.CompletedProcess:
    env = {**os.environ, **({"PATCHKIT_HOME": str(home)} if home else {})}
    return subprocess.run([sys.executable, "-m", "patchkit", *map(str, args)], capture_output=True, text=True,
                          timeout=TIMEOUT, env=env, stdin=subprocess.DEVNULL)


def refused(proc: subprocess.CompletedProcess, code: int, *texts: str) -> None:
    assert proc.returncode == code, (proc.args, proc.stdout, proc.stderr)
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), proc.stderr
    for text in texts:
        assert text in lines[0], (text, lines[0])


def fifo(path: Path) -> Path:
    path.unlink(missing_ok=True)
    os.mkfifo(path)
    return path


@pytest.fixture
def wheel_home(tmp_path) -> Path:
    """A cold PATCHKIT_HOME whose wheels/ links the tests' cached 0.5.17 wheel (no download)."""
    pristine("0.5.17")
    home = tmp_path / "home"
    (home / "wheels").mkdir(parents=True)
    wheel = next((HOME / "wheels").glob("sglang-0.5.17-*.whl"))
    os.symlink(wheel, home / "wheels" / wheel.name)
    return home


# --- item 5: FIFOs ------------------------------------------------------------------------------


@pytest.mark.parametrize("command", [("status",), ("apply",), ("apply", "--dry-run")])
def test_a_fifo_target_file_of_a_pristine_tree_is_refused_at_once(release, command):
    site = release("0.5.17")
    fifo(site / MODEL_CONFIG)
    before = snapshot(site)
    refused(cli(*command, "--site-packages", site), 6, MODEL_CONFIG, "not a regular file (a FIFO)")
    assert snapshot(site) == before


def test_a_fifo_target_file_of_a_patched_tree_is_refused_by_status_revert_and_verify(release):
    site = release("0.5.17")
    assert run("apply", "--site-packages", site).exit_code == 0
    fifo(site / MODEL_CONFIG)
    before = snapshot(site)
    for command in (("status",), ("revert",), ("revert", "--force"), ("verify",), ("diff",), ("apply",)):
        refused(cli(*command, "--site-packages", site), 6, MODEL_CONFIG, "not a regular file (a FIFO)")
    assert snapshot(site) == before


def test_a_fifo_config_or_safetensors_file_is_refused_by_doctor(tmp_path):
    site = pristine("0.5.20")
    model = model_folder(tmp_path / "m")
    fifo(model / "model-00001-of-00001.safetensors")
    refused(cli("doctor", "--site-packages", site, *GPU, "--", "--model-path", model), 6,
            "model-00001-of-00001.safetensors: not a regular file")
    fifo(model / "config.json")
    refused(cli("doctor", "--site-packages", site, *GPU, "--", "--model-path", model), 6,
            "config.json: not a regular file (a FIFO)")


def test_a_fifo_weight_index_is_refused_by_doctor_not_taken_for_absent(tmp_path):
    """model.safetensors.index.json a FIFO: doctor read no index (exit 0, weights `?`) where every
    other FIFO in the model folder is exit 6."""
    model = model_folder(tmp_path / "m")
    fifo(model / "model.safetensors.index.json")
    refused(cli("doctor", "--site-packages", pristine("0.5.20"), *GPU, "--", "--model-path", model), 6,
            "model.safetensors.index.json: not a regular file (a FIFO)")


def test_a_fifo_verdict_cache_is_ignored_and_replaced(wheel_home, tmp_path):
    folder = tmp_path / "more"
    write_patch(folder, "odd-files-example")  # another patch set: matrix judges (and caches) by the probes
    fifo(wheel_home / CACHE_FILE)
    proc = cli("--patches", folder, "matrix", "--from", "0.5.17", "--to", "0.5.17", "--json", home=wheel_home)
    assert proc.returncode == 0, proc.stderr
    assert {row["id"]: row["states"]["0.5.17"] for row in json.loads(proc.stdout)["patches"]}["odd-files-example"] \
        == "applies"
    assert (wheel_home / CACHE_FILE).is_file()  # rebuilt as a plain file


def test_a_fifo_manifest_is_refused(tmp_path, monkeypatch):
    from patchkit.releases import manifest
    from patchkit.base.errors import EnvironmentFailure

    package = tmp_path / "odd_manifests"
    package.mkdir()
    (package / "__init__.py").write_text("")
    os.mkfifo(package / "0.5.17.json")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(manifest, "MANIFESTS_PACKAGE", "odd_manifests")
    with pytest.raises(EnvironmentFailure, match="0.5.17.json: not a regular file"):
        manifest.find("0.5.17")


@pytest.mark.parametrize("value", ["nan", "inf", "1e309", "-1", "86401"])
def test_lock_timeout_must_be_a_finite_number_of_seconds(release, value):
    site = release("0.5.17")
    for command in ("apply", "revert"):
        proc = cli(command, "--site-packages", site, "--lock-timeout", value)
        assert proc.returncode == 2 and "--lock-timeout" in proc.stderr, proc.stderr
    assert not (site / ".patchkit").exists()


def test_locking_a_missing_folder_fails_at_once(tmp_path):
    code = ("import sys, time; from pathlib import Path; from patchkit.store import lock\n"
            "started = time.monotonic()\n"
            "try:\n    with lock.locked(Path(sys.argv[1]), 1.0):\n        print('locked')\n"
            "except Exception as exc:\n    print(type(exc).__name__, exc)\n"
            "print(round(time.monotonic() - started, 1))")
    proc = subprocess.run([sys.executable, "-c", code, str(tmp_path / "gone")], capture_output=True, text=True,
                          timeout=TIMEOUT)
    said, took = proc.stdout.strip().splitlines()
    assert said.startswith("EnvironmentFailure") and "gone" in said, said
    assert float(took) < 1.0


# --- item 6: a documented code, not 70 ----------------------------------------------------------


STATE_COMMANDS = [("status",), ("apply",), ("apply", "--dry-run"), ("apply", "--force"), ("revert",),
                  ("revert", "--force"), ("diff",), ("verify",), ("clean",)]


def test_a_deeply_nested_state_file_is_corrupt_state_for_every_command(release):
    site = release("0.5.17")
    assert run("apply", "--site-packages", site).exit_code == 0
    (site / ".patchkit/state.json").write_text("[" * 200_000 + "]" * 200_000)
    before = snapshot(site)
    for command in STATE_COMMANDS:
        refused(cli(*command, "--site-packages", site), 1, "state.json is corrupt")
    assert snapshot(site) == before


def corrupt_member(source: Path, dest: Path, member: str) -> Path:
    """A copy of a wheel with the compressed bytes of one member damaged (the zip directory intact)."""
    data = bytearray(source.read_bytes())
    with zipfile.ZipFile(source) as archive:
        info = archive.getinfo(member)
    start = info.header_offset + 30 + len(info.filename.encode()) + len(info.extra)
    for i in range(start + 10, start + min(info.compress_size, 400), 7):
        data[i] ^= 0x5A
    dest.write_bytes(bytes(data))
    return dest


@pytest.mark.parametrize("command", [("matrix", "--from", "0.5.17", "--to", "0.5.17"),
                                     ("track", "--from", "0.5.17", "--to", "0.5.17"),
                                     ("manifest", "check", "0.5.17")])
def test_a_corrupt_member_of_a_cached_wheel_is_exit_3_naming_the_wheel(wheel_home, command):
    link = next((wheel_home / "wheels").glob("*.whl"))
    wheel = corrupt_member(link.resolve(), link.with_suffix(".tmp"), MODEL_CONFIG)
    link.unlink()
    wheel.rename(link)
    refused(cli(*command, home=wheel_home), 3, link.name, f"its member {MODEL_CONFIG} is corrupt")


def test_forged_verdict_cache_entries_are_never_shown(wheel_home, tmp_path, monkeypatch):
    folder = tmp_path / "more"
    write_patch(folder, "odd-files-example")
    monkeypatch.setenv("PATCHKIT_HOME", str(wheel_home))
    source = WheelSource("0.5.17")
    with registry.running(registry.PatchSets([str(folder)])):
        keys = [VerdictCache.key(patch, source) for patch in registry.load_all()]
    forged = {"state": "applies | <b>FORGED</b>", "file": None, "detail": ""}
    cache = {key: forged for key in keys}
    cache["not-a-key"] = {"state": "applies", "file": None, "detail": ""}
    cache[keys[0]] = ["FORGED"]
    (wheel_home / CACHE_FILE).write_text(json.dumps(cache))
    proc = cli("--patches", folder, "matrix", "--from", "0.5.17", "--to", "0.5.17", "--markdown", home=wheel_home)
    assert proc.returncode == 0, proc.stderr
    assert "FORGED" not in proc.stdout and "| `odd-files-example` | applies |" in proc.stdout
    assert "FORGED" not in (wheel_home / CACHE_FILE).read_text()  # the cache is rebuilt, not kept


def safetensors(path: Path, header: dict | bytes) -> None:
    raw = header if isinstance(header, bytes) else json.dumps(header).encode()
    path.write_bytes(struct.pack("<Q", len(raw)) + raw)


@pytest.mark.parametrize("index_total, tensor, message", [
    ("Infinity", None, "total_size must be a number of bytes"),
    ("1e400", None, "total_size must be a number of bytes"),
    ("1" + "0" * 400, None, "total_size must be a number of bytes"),
    ("-5", None, "total_size must be a number of bytes"),
    (None, {"dtype": "BF16", "shape": [2**62, 2**62, 2**62]}, "shape"),
    (None, {"dtype": "BF16", "shape": [4], "data_offsets": [0, 10**30]}, "data_offsets"),
    (None, {"dtype": "BF16", "shape": [4], "data_offsets": [-100, 0]}, "data_offsets"),
    (None, {"dtype": "BF16", "shape": [4], "data_offsets": [8, 0]}, "data_offsets"),
])
def test_doctor_refuses_impossible_sizes(tmp_path, index_total, tensor, message):
    model = model_folder(tmp_path / "m", total_size=None if index_total is None else 1, mtp=False)
    if index_total is not None:
        (model / "model.safetensors.index.json").write_text(
            '{"metadata": {"total_size": %s}, "weight_map": {"w": "model.safetensors"}}' % index_total)
    if tensor is not None:
        safetensors(model / "model.safetensors", {"w": tensor})
    refused(cli("doctor", "--site-packages", pristine("0.5.20"), *GPU, "--", "--model-path", model), 2, message)


@pytest.mark.parametrize("where", ["config.json", "model.safetensors.index.json", "model.safetensors"])
def test_doctor_refuses_deeply_nested_json(tmp_path, where):
    model = model_folder(tmp_path / "m", mtp=False)
    deep = b"{\"a\": " + b"[" * 200_000 + b"]" * 200_000 + b"}"
    if where == "model.safetensors":
        safetensors(model / where, deep)
    else:
        (model / where).write_bytes(deep)
    refused(cli("doctor", "--site-packages", pristine("0.5.20"), *GPU, "--", "--model-path", model), 2, where,
            "nested too deep")


def test_doctor_reads_config_json_with_a_size_bound(tmp_path):
    model = model_folder(tmp_path / "m", mtp=False)
    with open(model / "config.json", "r+b") as handle:
        handle.truncate(2 << 30)  # sparse: 2 GiB that cost no disk
    refused(cli("doctor", "--site-packages", pristine("0.5.20"), *GPU, "--", "--model-path", model), 2,
            "config.json: 2,147,483,648 bytes, more than the 67,108,864")


@pytest.mark.parametrize("command", [("apply", "--target"), ("status", "--target"), ("matrix", "--from"),
                                     ("image", "dockerfile", "--base", "b", "--target")])
def test_a_5000_digit_version_is_a_usage_error(release, command):
    site = release("0.5.17")
    where = () if command[0] in ("matrix", "image") else ("--site-packages", site)
    refused(cli(*command, "1" * 5000, *where), 2, "not a version")


def test_two_doctors_on_a_cold_cache_both_succeed(wheel_home, tmp_path):
    model = model_folder(tmp_path / "m")
    env = {**os.environ, "PATCHKIT_HOME": str(wheel_home)}
    argv = [sys.executable, "-m", "patchkit", "doctor", "--version", "0.5.17", *GPU, "--json", "--",
            "--model-path", str(model)]
    runs = [subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            for _ in range(2)]
    results = [(proc.wait(timeout=300), proc.stdout.read(), proc.stderr.read()) for proc in runs]  # type: ignore[union-attr]
    for code, out, err in results:
        assert code in (0, 1) and json.loads(out)["sglang"]["version"] == "0.5.17", err
    assert not list((wheel_home / "releases").glob("*.partial"))


def test_a_fifo_state_file_is_refused_with_exit_6(release):
    site = release("0.5.17")
    assert run("apply", "--site-packages", site).exit_code == 0
    fifo(site / ".patchkit/state.json")
    before = snapshot(site)
    for command in (("status",), ("apply",), ("revert",), ("verify",), ("clean",)):
        refused(cli(*command, "--site-packages", site), 6, ".patchkit/state.json", "not a plain file")
    assert snapshot(site) == before


def test_a_fifo_entry_points_txt_on_sys_path_is_exit_6_not_a_hang(tmp_path, release):
    """Every command scans the dist-infos on sys.path for external patch sets: a FIFO
    entry_points.txt in one (an in-place venv holds the tree's own dist-infos) hung them all."""
    site = release("0.5.17")
    folder = tmp_path / "path" / "odd-1.dist-info"
    folder.mkdir(parents=True)
    entry = fifo(folder / "entry_points.txt")
    env = {**os.environ, "PYTHONPATH": str(tmp_path / "path")}
    proc = subprocess.run([sys.executable, "-m", "patchkit", "status", "--site-packages", str(site)],
                          capture_output=True, text=True, timeout=TIMEOUT, env=env, stdin=subprocess.DEVNULL)
    refused(proc, 6, str(entry), "not a regular file (a FIFO)")


def test_a_fifo_blob_index_is_a_cache_rebuilt_not_a_hang(wheel_home):
    """PATCHKIT_HOME/blobs/<wheel>.json (the diff judge's index of a wheel's blob hashes) as a
    FIFO hung the judging of any diff; it is a cache: ignored, and replaced by a regular file."""
    wheel = next((wheel_home / "wheels").glob("sglang-0.5.17-*.whl"))
    index = wheel_home / "blobs" / f"{wheel.name}.json"
    index.parent.mkdir()
    fifo(index)
    code = ("from pathlib import Path; from patchkit.diffs import release_blobs; "
            f"print(release_blobs._blobs(Path({str(wheel)!r}), [{MODEL_CONFIG!r}]))")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=TIMEOUT,
                          env={**os.environ, "PATCHKIT_HOME": str(wheel_home)}, stdin=subprocess.DEVNULL)
    assert proc.returncode == 0, proc.stderr
    assert MODEL_CONFIG in proc.stdout and "None" not in proc.stdout
    assert index.is_file() and MODEL_CONFIG in index.read_text()
