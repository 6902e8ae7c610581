from __future__ import annotations

from patchkit.commands import output
from patchkit.engine import planning
from patchkit.commands import report
from patchkit.commands.locate import locate
from patchkit.base.constants import EXIT_OK


def diff(site_packages: str | None, version: str | None, as_json: bool,
         source: str | None = None, python: str | None = None) -> int:
    target = locate(site_packages, None, version, source=source, python=python)
    from patchkit.store import stale

    recorded = stale.stale_state(target)
    if recorded is not None:
        output.warn(f"stale state: it records SGLang {recorded.sglang_version} but {target.version} is installed; "
                    f"no diff against another release's backups (`{target.naming.command('clean')}` removes it)")
        text = ""
    else:
        text = planning.current_diff(target)
    if as_json:
        output.as_json({"sglang": report.sglang(target), "diff": text})
    else:
        output.text(text)
    return EXIT_OK
