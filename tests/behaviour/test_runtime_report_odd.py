"""The runtime report never hangs nor breaks the serving process it runs in (real 0.5.17, SGLang's
real load_plugins() in the behaviour venv): a recorded file replaced by a FIFO (the plugin hashed
it with a blocking open: every process loading plugins hung before serving) is reported drifted;
a record of another shape (the plugin raised AttributeError: no line, and the same from the
get_internal_state hook would fail /server_info) is one line with the error in it; a recorded path
outside the package, or a record that is a symlink, is refused unread (a record naming
/proc/self/pagemap, a regular file of size 0 that never ends, made register() read 2.3 GB in 20 s
and never return); a field of another type (a digest that is a number) is the line's error, not a
TypeError inside the server."""

from __future__ import annotations

import json
import os

import pytest

from testing import behaviour
from testing.cli import run
from testing.releases import MODEL_CONFIG

pytestmark = [pytest.mark.behaviour, pytest.mark.slow]

PAGEMAP = "/proc/self/pagemap"  # stat: a regular file of size 0; read: never ends


def plugin_lines(site) -> list[str]:
    # 120 s: the plugin loads in about 10 s here; a hang fails the test instead of waiting on it.
    return behaviour.load_plugins_lines(behaviour.python(), {"PYTHONPATH": str(site)}, timeout=120)


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    from testing.releases import copy_release

    site = copy_release("0.5.17", tmp_path_factory.mktemp("odd") / "site")
    assert run("apply", "--site-packages", site).exit_code == 0
    return site


@pytest.fixture
def record(site):
    """The state file's JSON, to change; the file is put back after the test."""
    path = site / ".patchkit" / "state.json"
    kept = path.read_bytes()
    yield json.loads(kept)
    path.unlink()
    path.write_bytes(kept)


def write_record(site, data) -> None:
    (site / ".patchkit" / "state.json").write_text(json.dumps(data))


def test_a_fifo_in_place_of_a_patched_file_is_drifted_not_a_hang(site):
    patched = site / MODEL_CONFIG
    kept = patched.read_bytes()
    patched.unlink()
    os.mkfifo(patched)
    try:
        [line] = plugin_lines(site)
    finally:
        patched.unlink()
        patched.write_bytes(kept)
    assert f" drifted={MODEL_CONFIG}" in line, line


def test_a_record_of_another_shape_is_said_in_the_line(site, record):
    write_record(site, {**record, "files": []})
    [line] = plugin_lines(site)
    assert "is not a patchkit record: " in line and " active=- " in line, line


@pytest.mark.parametrize("key", [PAGEMAP, "../" * 12 + PAGEMAP.lstrip("/")], ids=["absolute", "dotdot"])
def test_a_recorded_path_outside_the_package_is_refused_unread(site, record, key):
    """The CLI refuses such a record (exit 1); the plugin read it forever."""
    entry = next(iter(record["files"].values()))
    write_record(site, {**record, "files": {**record["files"], key: entry}})
    assert run("status", "--site-packages", site).exit_code == 1
    [line] = plugin_lines(site)
    assert "is not a patchkit record: " in line and "is not a path inside sglang/" in line, line
    assert " active=- " in line, line


def test_a_record_that_is_a_symlink_is_refused_unread(site):
    path = site / ".patchkit" / "state.json"
    kept = path.read_bytes()
    path.unlink()
    path.symlink_to(PAGEMAP)
    try:
        assert run("status", "--site-packages", site).exit_code == 3  # the CLI refuses it too
        [line] = plugin_lines(site)
    finally:
        path.unlink()
        path.write_bytes(kept)
    assert "is a symlink" in line and " active=- " in line, line


def test_a_patched_file_that_is_a_symlink_out_of_the_package_is_drifted_unread(site):
    patched = site / MODEL_CONFIG
    kept = patched.read_bytes()
    patched.unlink()
    patched.symlink_to(PAGEMAP)
    try:
        [line] = plugin_lines(site)
    finally:
        patched.unlink()
        patched.write_bytes(kept)
    assert f" drifted={MODEL_CONFIG}" in line, line


@pytest.mark.parametrize("digest", [7, True], ids=["int", "true"])
def test_a_digest_of_another_type_is_the_lines_error(site, record, digest):
    """patch_sha256 an int or `true`: TypeError in line(), logged by SGLang with a traceback, no line."""
    rel, entry = next(iter(record["files"].items()))
    pid = entry["patches"][0]
    changed = {**entry, "patch_sha256": {**entry["patch_sha256"], pid: digest}}
    write_record(site, {**record, "files": {**record["files"], rel: changed}})
    [line] = plugin_lines(site)
    assert "is not a patchkit record: " in line and "patch_sha256" in line and " active=- " in line, line
