"""A patch's state on a target: the seven states, `PatchStatus`, and `PatchCrashed` (a patch's
own code raised: that patch is `failed`, never the whole run)."""

from __future__ import annotations

from dataclasses import dataclass

from patchkit.base.lean_typing import TYPE_CHECKING
from patchkit.base.errors import PlanError

if TYPE_CHECKING:
    from typing import Any
    from patchkit.authoring.patch import Patch


APPLIED, PENDING, UPSTREAM_FIXED, NOT_APPLICABLE, DRIFTED, FAILED, OUTDATED = (
    "applied", "pending", "upstream-fixed", "not-applicable", "drifted", "failed", "outdated",
)
# A manifest's verdict on a pristine release <-> the state it means there.
VERDICT_STATE = {"applies": PENDING, "upstream-fixed": UPSTREAM_FIXED, "not-applicable": NOT_APPLICABLE}
STATE_VERDICT = {state: verdict for verdict, state in VERDICT_STATE.items()}


@dataclass(frozen=True)
class PatchStatus:
    id: str
    state: str
    files: tuple[str, ...] = ()
    detail: str = ""
    crashed: bool = False  # FAILED because the patch's own code raised (a bug in that patch)

    @property
    def shown_files(self) -> list[str]:
        """The files as every command shows them (status, apply, verify, --json): by path, the
        state file's order, whatever order the patch declares its TARGETS in."""
        return sorted(self.files)

    def to_dict(self) -> dict[str, Any]:
        return {"id": self.id, "state": self.state, "files": self.shown_files, "detail": self.detail}


class PatchCrashed(PlanError):
    """A patch's own code (a probe or its transform) raised something that is not patchkit's
    own error: a bug in that patch. It makes that patch `failed`, never the whole run."""


def crashed(patch: "Patch", what: str, rel: str, exc: Exception) -> PatchCrashed:
    """One line for the exception (its traceback goes to a log file). Call in the except block."""
    from patchkit.base.crash_log import log_traceback

    where = log_traceback()
    text = " ".join(str(exc).split())  # one line, whatever the exception says
    return PatchCrashed(f"patch {patch.ID} raised {type(exc).__name__}{': ' + text if text else ''} in its {what} "
                        f"on {rel} (a bug in that patch; traceback in {where})")


def guarded(patch: "Patch", what: str, rel: str, call: Any) -> Any:
    """`call()`, a probe of `patch`: patchkit's own errors pass, anything else is PatchCrashed."""
    from patchkit.base.errors import PatchkitError

    try:
        return call()
    except PatchkitError:
        raise
    except Exception as exc:
        raise crashed(patch, what, rel, exc) from None
