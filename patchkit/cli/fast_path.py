"""The entry point: `status` and `apply` in their plain forms run before click is imported
(issue 22.9: the read-only fast path, a cost of every container start); every other command line
goes to the click CLI (`patchkit.cli.app`), which parses it as always.

Plain means: only `--site-packages DIR`, `--target VERSION` and `--json`, each at most once, with
a value that does not start with `-`. Those are parsed here exactly as click parses them, and the
same command function runs under the same error handler, so output and exit codes are the same
(tests/integration/test_fast_path.py compares both ways). Anything else (another option, `-h`,
`--patches`, a repeated or `=`-joined option) is click's to parse and to word errors for.
"""

from __future__ import annotations

import sys

_VALUED = {"--site-packages": "site_packages", "--target": "version"}


def plain(argv: list[str]) -> tuple[str, dict[str, object]] | None:
    """(command, its keyword values) for a plain status / apply command line, else None."""
    if not argv or argv[0] not in ("status", "apply"):
        return None
    values: dict[str, object] = {"site_packages": None, "version": None, "as_json": False}
    seen: set[str] = set()
    rest = argv[1:]
    index = 0
    while index < len(rest):
        arg = rest[index]
        if arg in seen:
            return None
        seen.add(arg)
        if arg == "--json":
            values["as_json"] = True
            index += 1
        elif arg in _VALUED and index + 1 < len(rest) and not rest[index + 1].startswith("-"):
            values[_VALUED[arg]] = rest[index + 1]
            index += 2
        else:
            return None
    return argv[0], values


def _text(value: object) -> str | None:
    """A value `plain` parsed for a valued option: the text given, or None."""
    return None if value is None else str(value)


def main() -> None:
    if sys.stdout is None or sys.stderr is None:  # `patchkit ... >&-`
        from patchkit.cli import error_handler

        if code := error_handler.closed_stdout():
            sys.exit(code)
    found = plain(sys.argv[1:])
    if found is None:
        from patchkit.cli.app import main as click_main

        click_main()
        return
    command, values = found
    from patchkit.cli import error_handler
    from patchkit.engine import registry

    sets = registry.PatchSets()  # as the click group makes them without --patches ($PATCHKIT_PATCHES still counts)
    site_packages, version = _text(values["site_packages"]), _text(values["version"])
    as_json = bool(values["as_json"])
    # Only what was parsed; every other parameter keeps the command function's default, which is
    # click's (tests/unit/cli/test_fast_path_agrees.py compares the two calls for every plain line).
    if command == "status":
        from patchkit.commands.status import status

        def run() -> int:
            return status(site_packages=site_packages, version=version, as_json=as_json)
    else:
        from patchkit.commands.apply import apply

        def run() -> int:
            return apply(site_packages=site_packages, version=version, as_json=as_json)

    # As patchkit.cli.app._exit: `patchkit ... | head` ends quietly. Through _signal, the functions the
    # signal module re-exports, which the interpreter has loaded: not the enum classes signal makes (1%).
    from _signal import SIG_DFL, SIGPIPE, signal as set_handler

    set_handler(SIGPIPE, SIG_DFL)
    sys.exit(error_handler.flush(error_handler.run(run, as_json, sets)))


if __name__ == "__main__":
    main()
