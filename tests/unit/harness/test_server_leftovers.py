"""What a server start leaves outside its folder is removed when it stops (issue 43.5): SGLang's
scheduler writes a 16 KB load snapshot `/dev/shm/sglang_loads_<instance>_<hash>.shm` per start and
never removes it. testing/server.py finds it as a file the server's processes hold open; a stand-in
server here (a child holding its files as SGLang's writer, an open descriptor, and its reader, a
mapping alone, do) is stopped by the same `Server.stop()`, beside another server's file."""

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
