"""What a server start leaves outside its folder is removed when it stops (issue 43.5): SGLang's
scheduler writes a 16 KB load snapshot `/dev/shm/sglang_loads_<instance>_<hash>.shm` per start and
never removes it. testing/server.py finds it as a file the server's processes hold open; a stand-in
server here (a child holding its files as SGLang's writer, an open descriptor, and its reader, a
mapping alone, do) is stopped by the same `Server.stop()`, beside another server's file. And its
zmq socket names in the temporary folder: the server gets one of its own."""

from __future__ import annotations

import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from testing.server import Server

SHM = Path("/dev/shm")
LEFT = "sglang_loads_"  # SGLang's name: shm_path_for() in sglang/srt/managers/load_snapshot.py

HOLDS = """
import mmap, os, sys, time
writer = os.open(sys.argv[1], os.O_CREAT | os.O_RDWR, 0o600)
os.ftruncate(writer, 16 * 1024 + 12)
written = mmap.mmap(writer, 16 * 1024 + 12)
fd = os.open(sys.argv[2], os.O_CREAT | os.O_RDWR, 0o600)
os.ftruncate(fd, 4096)
read = mmap.mmap(fd, 4096)
os.close(fd)  # the reader keeps only the mapping
open("ready", "w").close()
time.sleep(600)
"""


@pytest.mark.skipif(not SHM.is_dir(), reason="no /dev/shm here")
def test_stop_removes_the_shm_files_the_server_held_and_no_other(tmp_path):
    names = [SHM / f"{LEFT}{kind}_{uuid.uuid4().hex[:12]}_0000.shm" for kind in ("writer", "reader", "other")]
    writer, reader, other = names
    other.write_bytes(b"\0" * 16)  # another server's, running beside this one
    folder = tmp_path / "server"
    folder.mkdir()
    log = folder / "server.log"
    try:
        with open(log, "wb") as out:
            proc = subprocess.Popen([sys.executable, "-c", HOLDS, str(writer), str(reader)], cwd=folder, stdout=out,
                                    stderr=subprocess.STDOUT, start_new_session=True)
        deadline = time.monotonic() + 60
        while not (folder / "ready").exists():
            assert proc.poll() is None and time.monotonic() < deadline, log.read_text()
            time.sleep(0.05)
        server = Server("stand-in", proc, 0, folder.resolve(), log, folder / "sgl_kernel.log")
        server.stop(grace=10)
        assert proc.poll() is not None
        assert not writer.exists() and not reader.exists() and other.exists()
    finally:
        for path in names:
            path.unlink(missing_ok=True)


STAND_IN = """
import http.server, sys, tempfile
# What SGLang's PortArgs does at start: its zmq sockets' names, NamedTemporaryFile(delete=False) each.
for _ in range(5):
    print(tempfile.NamedTemporaryFile(delete=False).name, flush=True)


class Health(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200)
        self.end_headers()

    def log_message(self, *args):
        pass


http.server.HTTPServer(("127.0.0.1", int(sys.argv[sys.argv.index("--port") + 1])), Health).serve_forever()
"""


def test_what_a_start_puts_in_the_temporary_folder_is_removed(tmp_path):
    """A server start also left five empty files and sockets in /tmp (its zmq ipc names), here
    through `start` itself, the launcher a stand-in that answers /health: the server gets a
    temporary folder of its own (TMPDIR), removed when it stops."""
    import tempfile

    from testing import server

    (tmp_path / "stand_in.py").write_text(STAND_IN)
    python = tmp_path / "python"  # started as `python -m sglang.launch_server ... --port N ...`
    python.write_text(f"#!/bin/sh\nexec {sys.executable} {tmp_path / 'stand_in.py'} \"$@\"\n")
    python.chmod(0o755)
    started = server.start(python, tmp_path / "model", "stand-in", tmp_path / "server")
    made = [Path(line) for line in started.log().splitlines()]
    assert len(made) == 5 and all(path.exists() for path in made), started.log()
    started.stop(grace=10)
    assert not any(path.exists() for path in made), made
    assert Path(tempfile.gettempdir()) not in {path.parent for path in made}, made  # a folder of its own
