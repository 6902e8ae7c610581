"""An upstream change a patch's drop condition waits on: a pull request as it was last looked up by
hand (merged or open, and when), and its shape in the code, so that `track` can say whether the
release it reaches has it. A drop condition that names a change merged upstream but in no release
yet is said as such, never read as met."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

Read = Callable[[str], "bytes | None"]  # a file's bytes on a tree, None when absent
MERGED, OPEN = "merged", "open"


@dataclass(frozen=True)
class UpstreamChange:
    ref: str  # "sgl-project/sglang#36110"
    state: str  # MERGED or OPEN, when it was looked up
    checked: str  # the day it was looked up (YYYY-MM-DD)
    what: str  # what it changes, in a phrase
    found: Callable[[Read], bool]  # whether a tree (a release) holds its shape

    def __post_init__(self) -> None:
        if self.state not in (MERGED, OPEN):
            raise ValueError(f"{self.ref}: state {self.state!r} is not {MERGED!r} or {OPEN!r}")

    def to_dict(self) -> dict[str, Any]:
        return {"ref": self.ref, "state": self.state, "checked": self.checked, "what": self.what}
