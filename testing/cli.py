"""Run the real CLI: in-process through click's CliRunner, or as a child process."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from click.testing import CliRunner

from patchkit.cli.app import main


@dataclass
class Result:
    exit_code: int
    stdout: str
    stderr: str

    def json(self) -> dict:
        return json.loads(self.stdout)


def run(*args: str | Path) -> Result:
    result = CliRunner().invoke(main, [str(a) for a in args], catch_exceptions=False)
    return Result(result.exit_code, result.stdout, result.stderr)


def states(site: Path) -> dict[str, str]:
    """{patch id: state} from `patchkit status --json`."""
    result = run("status", "--site-packages", site, "--json")
    assert result.exit_code == 0, result.stderr
    return {p["id"]: p["state"] for p in result.json()["patches"]}


def fully_applied(version: str) -> dict[str, str]:
    """{patch id: state} of `version` once every patch that applies there is applied: the
    committed manifest's verdicts, `applies` read as `applied` (the others keep theirs)."""
    from patchkit.releases import manifest

    return {pid: "applied" if entry.verdict == "applies" else entry.verdict
            for pid, entry in manifest.load(version).patches.items()}
