"""A CPU virtual environment that imports real SGLang modules, built once into the tests'
cache (keyed by tests/behaviour/requirements.txt), and a runner for probe scripts in it."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import venv
from pathlib import Path

from testing.releases import CACHE, REPO

REQUIREMENTS = REPO / "tests" / "behaviour" / "requirements.txt"


def python() -> Path:
    key = hashlib.sha256(REQUIREMENTS.read_bytes()).hexdigest()[:12]
    root = CACHE / f"behaviour-venv-{key}"
    interpreter = root / "bin" / "python"
    if (root / ".complete").exists():
        return interpreter
    shutil.rmtree(root, ignore_errors=True)
    venv.EnvBuilder(with_pip=True).create(root)
    subprocess.run(
        [str(interpreter), "-m", "pip", "install", "-q", "--disable-pip-version-check", "-r", str(REQUIREMENTS)],
        check=True,
    )
    (root / ".complete").touch()
    return interpreter


def run_probe(site: Path, script: Path, *args: str) -> dict:
    """Run a probe script against the SGLang in `site`; it prints one JSON object last."""
    env = {**os.environ, "PYTHONPATH": str(site), "CUDA_VISIBLE_DEVICES": "", "PYTHONWARNINGS": "ignore"}
    proc = subprocess.run([str(python()), str(script), *args], capture_output=True, text=True, env=env, timeout=600)
    assert proc.returncode == 0, proc.stderr[-4000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])
