"""Map what a command raised to an exit code and one line on stderr."""

from __future__ import annotations

import contextlib
import sys

from patchkit.base.lean_typing import TYPE_CHECKING
from patchkit.base import crash_log
from patchkit.commands import output
from patchkit.base.constants import EXIT_BUG, EXIT_ENVIRONMENT, EXIT_INTERRUPTED, EXIT_OK
from patchkit.base.errors import INTERRUPTED_EARLY, PatchkitError, environment_failure, is_environment_failure

if TYPE_CHECKING:
    from typing import Callable
    from patchkit.engine.registry import PatchSets


def log_traceback() -> str:
    """Write the exception being handled to a crash log; its path (or why there is none)."""
    return crash_log.log_traceback()


def failed(code: int, message: str, as_json: bool = False) -> int:
    """One `error:` line on stderr; with --json also `{"error": {"code", "message"}}` on stdout
    (where stdout cannot take it: a second line, and exit 6)."""
    output.error(message)
    if as_json:
        try:
            output.as_json({"error": {"code": code, "message": message}})
        except OSError as exc:
            return unwritable(exc, code)
    return code


def unwritable(exc: OSError, code: int | None = None) -> int:
    """Exit 6 and one line for a write to stdout that failed (output.stdout_failed), or for any
    other environment failure; `code`: the exit code the command had come to before it."""
    after = f"the command had finished (exit {code} otherwise)" if code is not None else ""
    failure = environment_failure(exc, after)
    with contextlib.suppress(OSError):
        output.error(str(failure))
    return failure.exit_code


def closed_stdout() -> int:
    """0, or, for a process started with stdout closed (`patchkit list >&-`), exit 6 and one line
    before anything is done; a closed stderr is the null device from now on."""
    if "stdout" in output.closed_streams():
        return failed(EXIT_ENVIRONMENT, output.CLOSED_STDOUT)
    return EXIT_OK


def run(command: Callable[[], int], as_json: bool = False, sets: PatchSets | None = None) -> int:
    """`command`'s exit code, every failure said and mapped to its code; with `sets` (the patch
    sets the command line named), the command runs with them and says after its work what of them
    it left out."""
    crash_log.note_sglang_version(None)  # until this command resolves its target (in-process runs: tests)
    try:
        try:
            if sets is None:
                code = command()
            else:
                from patchkit.engine.registry import running

                with running(sets):
                    code = command()
        finally:
            _save_caches()
        return _with_unloadable(code, sets)
    except PatchkitError as exc:
        return failed(exc.exit_code, str(exc), as_json)
    except KeyboardInterrupt:
        # apply and revert say themselves when files had started to change (errors.Interrupted).
        return failed(EXIT_INTERRUPTED, INTERRUPTED_EARLY, as_json)
    except OSError as exc:
        if not (is_environment_failure(exc) or exc.filename == output.STDOUT):
            return _bug(exc, as_json)
        failure = environment_failure(exc)
        return failed(failure.exit_code, str(failure), as_json)
    except Exception as exc:
        return _bug(exc, as_json)


def _with_unloadable(code: int, sets: PatchSets | None) -> int:
    """The diff files of a patch folder that were left out (`sets.unloadable`), each named with
    its cause after the command's work, which ran without them; the exit code is then not 0. A
    diff with nothing inside the package (`sets.file_notes`) is named too, the code kept."""
    left = sets.unloadable() if sets is not None else []
    for unfinished in sets.incomplete() if sets is not None else []:  # --allow-incomplete: said, exit kept
        output.warn(unfinished.warning())
    for said in sets.file_notes() if sets is not None else []:  # a diff with nothing to apply: named, exit kept
        output.note(said)
    for exc in left:
        output.error(f"{exc} (left out; the other patches of its folder were loaded)")
    return code or (left[0].exit_code if left else code)


def _save_caches() -> None:
    """The identity cache a command added digests to is written once, after its work (a command
    that never loaded patchkit.engine.identity has nothing to save, and does not import it)."""
    identity = sys.modules.get("patchkit.engine.identity")
    if identity is not None:
        identity.save()


def flush(code: int) -> int:
    """Flush stdout and stderr after a command returned `code`: a Ctrl-C or a write error now
    comes after the command's work, and is said so."""
    try:
        output.flush()
    except KeyboardInterrupt:
        output.error(f"interrupted after the command had finished (exit {code} otherwise)")
        return EXIT_INTERRUPTED
    except OSError as exc:
        if not (is_environment_failure(exc) or exc.filename == output.STDOUT):
            raise
        return unwritable(exc, code)
    return code


def _bug(exc: Exception, as_json: bool = False) -> int:
    """An unexpected bug: one line, the full report in a log file."""
    where = log_traceback()
    return failed(EXIT_BUG, f"unexpected {exc.__class__.__name__}: {exc}; traceback in {where}", as_json)
