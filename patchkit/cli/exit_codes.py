"""What each exit code means and which codes each command can return: the one table that
`patchkit --help` (every code) and each command's `--help` (only its own) are printed from."""

from __future__ import annotations

from patchkit.base.constants import (EXIT_BUG, EXIT_DRIFT, EXIT_ENVIRONMENT, EXIT_INTERRUPTED, EXIT_LOCKED, EXIT_OK,
                                EXIT_PLAN, EXIT_TARGET, EXIT_USAGE)

MEANINGS = {
    EXIT_OK: "done, or nothing to do",
    EXIT_PLAN: "a patch could not be planned or validated (nothing written), or a --patches folder is a bump not "
               "finished{--allow-incomplete} (--allow-incomplete takes the rest){}",
    EXIT_USAGE: "usage error (also {--target}a --target that is not a version, {}a broken patch module)",
    EXIT_TARGET: "SGLang not found, version mismatch, or a release patchkit knows nothing about",
    EXIT_DRIFT: "a file changed outside patchkit would be lost (nothing written{--force}; --force overrides{})",
    EXIT_LOCKED: "gave up waiting for another patchkit run on the same folder (--lock-timeout)",
    EXIT_ENVIRONMENT: "a file could not be read, written or synced (read-only, permission, no space, wrong type, I/O error)",
    EXIT_BUG: "unexpected error (the crash log holding the traceback is named)",
    EXIT_INTERRUPTED: "interrupted (Ctrl-C); the message says whether the files were left as they were",
}

# Every command parses options (2), reads files (6), may crash (70) or be interrupted (130).
_ALWAYS = (EXIT_OK, EXIT_USAGE, EXIT_ENVIRONMENT, EXIT_BUG, EXIT_INTERRUPTED)
_RELEASE = _ALWAYS + (EXIT_PLAN, EXIT_TARGET)  # reads an SGLang (installed or fetched) and judges patches
_WRITES_SITE = _RELEASE + (EXIT_DRIFT, EXIT_LOCKED)  # changes files in it under its lock

# Keyed by the command as typed after `patchkit`.
COMMAND_CODES: dict[str, tuple[int, ...]] = {
    "apply": _WRITES_SITE,
    "status": _RELEASE,
    "revert": _WRITES_SITE,
    "diff": _RELEASE,
    "clean": _WRITES_SITE,
    "list": _ALWAYS + (EXIT_PLAN,),  # a --patches folder that is a bump not finished
    "new": _ALWAYS + (EXIT_PLAN,),
    "manifest update": _RELEASE,
    "manifest check": _RELEASE,
    "track": _RELEASE,
    "matrix": _RELEASE,
    "verify": _RELEASE,
    "rebase": _RELEASE,
    "bump": _RELEASE,
    "capture": _RELEASE + (EXIT_DRIFT,),
    "export": _RELEASE,
    "image dockerfile": _RELEASE,
    "image build": _RELEASE,
    "doctor": _RELEASE,
}

# Where a code means something more particular for one command.
COMMAND_MEANINGS: dict[tuple[str, int], str] = {
    ("status", EXIT_PLAN): "a patch's own code raised (its row says so), or the state file is corrupt",
    ("manifest check", EXIT_PLAN): "a manifest does not match the patches or the release",
    ("track", EXIT_PLAN): "a patch fails on a release in the range",
    ("matrix", EXIT_PLAN): "a patch fails on a release in the range",
    ("verify", EXIT_PLAN): "a check failed (or, with --strict, a needed patch is missing)",
    ("rebase", EXIT_PLAN): "a unit conflicts (the diff is written with conflict markers) or V already has the change; "
                           "--continue: a block left, or the resolution does not work on V (nothing written)",
    ("bump", EXIT_PLAN): "conflicts remain (DIR written with the blocks to resolve; the tree untouched), or a patch fails, "
                         "or a diff breaks on V (an undefined name, a model class registered twice; with --python, an "
                         "import)",
    ("bump", EXIT_USAGE): "usage (-o DIR not new, empty or a bump's, or not makeable; --to older than V0; DIR's "
                          "record damaged; a file in DIR it would remove or overwrite not the one it wrote), or a "
                          "patch file could not be loaded (DIR written without it, named in REPORT.md: "
                          "complete false)",
    ("bump", EXIT_ENVIRONMENT): "DIR cannot be written, or a symlink in DIR where bump reads, writes or removes a "
                                "file (nothing written)",
    ("bump", EXIT_TARGET): "a release unknown to the package index, the index not reachable for --latest, or no "
                           "SGLang where the tree options point",
    ("capture", EXIT_PLAN): "nothing to capture",
    ("capture", EXIT_DRIFT): "a file patchkit patched was edited since",
    ("image build", EXIT_PLAN): "the container build failed or found no builder",
    ("doctor", EXIT_PLAN): "a finding is an error (the launch would fail or crash)",
}


def _for_options(meaning: str, options: frozenset[str] | None) -> str:
    """A meaning with its `{--option}...{}` clauses: kept where the command has that option (or for the table of
    every code, `options` None), left out where it has not (doctor has no --target)."""
    out, rest = [], meaning
    while "{" in rest:
        before, _, tail = rest.partition("{")
        option, _, tail = tail.partition("}")
        clause, _, rest = tail.partition("{}")
        out += [before, clause if options is None or option in options else ""]
    return "".join(out) + rest


def help_text(command: str | None = None, options: frozenset[str] | None = None) -> str:
    """`Exit codes:` and one line per code: those `command` can return (a group such as `manifest`:
    those of its commands), or every code for None. `options`: the command's option strings (what its
    lines may name)."""
    if command is None:
        codes = sorted(MEANINGS)
    else:
        mine = [c for name, c in COMMAND_CODES.items() if name == command or name.startswith(command + " ")]
        if not mine:
            raise KeyError(f"exit_codes.COMMAND_CODES has no entry for {command!r}")
        codes = sorted({code for found in mine for code in found})
    lines = [f"  {code:<4} {_for_options(COMMAND_MEANINGS.get((command or '', code), MEANINGS[code]), options)}"
             for code in codes]
    return "\n".join(["Exit codes:", *lines])
