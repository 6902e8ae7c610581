"""The runtime plugin on a real server with a 5,000 x 5,000 record (issue 41.5): a real SGLang CPU
server (testing/server.py) from a venv `patchkit apply --python` patched, once with the record apply
wrote and once with it replaced by testing.synthetic.large_record(5000, 5000) (as
bench/runtime_plugin.py builds it; its `sglang_version`, `runtime` and schema kept from the real
record, so the plugin reads it as valid). For each: seconds to healthy, the time of one
/server_info, `patchkit verify --url`'s exit and time, the patchkit log lines' length, and what
`Server.stop()` needed (the launcher's SIGTERM alone or more) and its time. One server at a time.

Usage: PATCHKIT_TEST_CACHE=... python bench/runtime_plugin_server.py [--version 0.5.23] [--records normal,large]

Figures: docs/runtime.md (after the report's 10 s budget).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from testing import server  # noqa: E402
from testing.synthetic import large_record  # noqa: E402



def patchkit(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([str(Path(sys.executable).parent / "patchkit"), *args], capture_output=True, text=True)


def measure(version: str, which: str, root: Path) -> None:
    python = server.python_for(version, root / "venv")
    model = server.make_model(server.layer() / "bin" / "python", root / "tiny-llama")
    applied = patchkit("apply", "--python", str(python))
    assert applied.returncode == 0, applied.stderr
    state = server.site_packages(python.parents[1]) / ".patchkit" / "state.json"
    if which == "large":
        real = json.loads(state.read_text())
        record = large_record(5000, 5000)
        record.update({key: real[key] for key in ("schema", "patchkit_version", "sglang_version", "runtime")})
        state.write_text(json.dumps(record))
    load = os.getloadavg()[0]
    served = server.start(python, model, version, root / "server")
    try:
        started = time.monotonic()
        info = served.request("GET", "/server_info", timeout=300)
        took_info = time.monotonic() - started
        reports = [rank.get("patchkit") or {} for rank in info.json().get("internal_states", [])]
        started = time.monotonic()
        verified = patchkit("verify", "--url", served.url)
        took_verify = time.monotonic() - started
        lines = [len(line) for line in served.patchkit_lines()]
    finally:
        started = time.monotonic()
        notes = served.stop()
        took_stop = time.monotonic() - started
    print(f"{which}: record {state.stat().st_size / 1000:.0f} kB; healthy after {served.healthy_after:.1f} s; "
          f"/server_info {info.status} in {took_info:.2f} s ({len(info.body) / 1000:.0f} kB, "
          f"{[len(r.get('patches', [])) for r in reports]} patches, errors {[r.get('error') for r in reports]}); "
          f"verify --url exit {verified.returncode} in {took_verify:.2f} s; log lines {lines} chars; "
          f"stopped in {took_stop:.1f} s, {'; '.join(notes) or 'by the launcher SIGTERM alone'}; "
          f"load {load:.1f} at start", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--version", default="0.5.23")
    parser.add_argument("--records", default="normal,large")
    args = parser.parse_args()
    for which in args.records.split(","):
        root = Path(tempfile.mkdtemp(prefix=f"patchkit-bench-{which}-"))
        try:
            measure(args.version, which, root)
        finally:
            shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
