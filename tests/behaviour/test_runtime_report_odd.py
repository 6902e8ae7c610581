"""The runtime report never hangs nor breaks the serving process it runs in (real 0.5.17, SGLang's
real load_plugins() in the behaviour venv): a recorded file replaced by a FIFO (the plugin hashed
it with a blocking open: every process loading plugins hung before serving) is reported drifted;
a record of another shape (the plugin raised AttributeError: no line, and the same from the
get_internal_state hook would fail /server_info) is one line with the error in it."""

from __future__ import annotations

import json
import os
import subprocess

import pytest

from testing import behaviour
from testing.cli import run
from testing.releases import MODEL_CONFIG

pytestmark = [pytest.mark.behaviour, pytest.mark.slow]


def plugin_lines(site) -> list[str]:
    code = "from sglang.srt.plugins import load_plugins; load_plugins()"
    env = {key: value for key, value in os.environ.items() if key != "SGLANG_PLUGINS"}
    env.update(PYTHONPATH=str(site), CUDA_VISIBLE_DEVICES="", PYTHONWARNINGS="ignore")
    proc = subprocess.run([str(behaviour.python()), "-c", code], capture_output=True, text=True, env=env, cwd="/",
                          timeout=120, stdin=subprocess.DEVNULL)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return [line for line in proc.stderr.splitlines() if line.startswith("patchkit:")]


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    from testing.releases import copy_release

    site = copy_release("0.5.17", tmp_path_factory.mktemp("odd") / "site")
    assert run("apply", "--site-packages", site).exit_code == 0
    return site


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


def test_a_record_of_another_shape_is_said_in_the_line(site):
    record = site / ".patchkit" / "state.json"
    kept = record.read_bytes()
    record.write_text(json.dumps({**json.loads(kept), "files": []}))
    try:
        [line] = plugin_lines(site)
    finally:
        record.write_bytes(kept)
    assert "is not a patchkit record: AttributeError" in line and " active=- " in line, line
