from __future__ import annotations

from patchkit import engine, output
from patchkit.commands import report
from patchkit.commands.locate import locate
from patchkit.constants import EXIT_OK


def diff(site_packages: str | None, version: str | None, as_json: bool) -> int:
    target = locate(site_packages, None, version)
    text = engine.current_diff(target)
    if as_json:
        output.as_json({"sglang": report.sglang(target), "diff": text})
    else:
        output.text(text)
    return EXIT_OK
