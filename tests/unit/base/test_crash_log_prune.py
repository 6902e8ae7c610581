"""Old crash logs are pruned: the newest KEEP_LOGS stay, other files in the folder are left."""

from __future__ import annotations

import os

from patchkit.base import crash_log


def test_old_logs_are_pruned_to_the_newest(patchkit_home, monkeypatch):
    monkeypatch.setattr(crash_log, "_sglang_version", None)  # no target resolved in this run
    logs = patchkit_home / "logs"
    logs.mkdir()
    old = [logs / f"patchkit-20260101-0000{i:02d}-000000.log" for i in range(30)]
    for path in old:
        path.write_text("old\n")
    (logs / "notes.txt").write_text("mine\n")
    try:
        raise ValueError("fresh")
    except ValueError:
        newest = crash_log.log_traceback()
    assert "notes.txt" in os.listdir(logs)
    kept = sorted(name for name in os.listdir(logs) if name.endswith(".log"))
    assert len(kept) == crash_log.KEEP_LOGS and kept[-1] == os.path.basename(newest)
    assert kept[:-1] == [path.name for path in old[-(crash_log.KEEP_LOGS - 1):]]
    assert "sglang: unknown" in open(newest).read()
