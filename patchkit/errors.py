"""The PatchkitError tree; each error carries the exit code the CLI maps it to."""

from typing import Any

from patchkit import constants


class PatchkitError(Exception):
    """An expected failure with a one-line, user-facing message."""

    exit_code = constants.EXIT_PLAN


class PlanError(PatchkitError):
    """A patch could not be planned or validated; nothing was written."""


class AnchorError(PlanError):
    """A transform's anchor is missing or ambiguous in the target file."""


class StateError(PatchkitError):
    """The state file is unreadable or corrupt."""


class TargetError(PatchkitError):
    """SGLang not found, version mismatch, no patch set, or an unsafe target path."""

    exit_code = constants.EXIT_TARGET


class NotFoundError(TargetError):
    """No SGLang where one was looked for; `searched` names the folders looked in (where a
    `.patchkit/` left by an uninstalled release may be)."""

    def __init__(self, message: str, searched: "tuple[Any, ...] | list[Any]" = ()) -> None:
        super().__init__(message)
        self.searched = tuple(searched)


class FetchError(TargetError):
    """A release could not be downloaded or installed."""


class DriftError(PatchkitError):
    """A file changed outside patchkit; the operation would lose that change."""

    exit_code = constants.EXIT_DRIFT


class UsageError(PatchkitError):
    exit_code = constants.EXIT_USAGE


class BuildError(PatchkitError):
    """No container builder answers, or building or pushing an image failed."""
