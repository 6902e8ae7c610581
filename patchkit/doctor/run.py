"""What stays the same across the doctor's checks of one launch (`Run`): the doctor builds it once
(`diagnose`) and `advice` re-checks the launch with each fix under it. A module of its own so that
`advice` reads the type without importing the doctor's package that calls it."""

from __future__ import annotations

from dataclasses import dataclass

from patchkit.doctor import gpu as gpu_mod
from patchkit.doctor import release as release_mod
from patchkit.releases.pristine import WheelSource
from patchkit.store.naming import Naming
from patchkit.store.target import Target


@dataclass(frozen=True)
class Run:
    """What stays the same when the doctor checks the same launch again with a fix applied: the release, the
    GPU's own facts, the launch's environment, the patch states and the options that name the tree."""

    target: Target | WheelSource
    release: release_mod.ReleaseCode
    overrides: gpu_mod.Overrides
    probe: bool
    seen: dict  # what nvidia-smi said (asked once)
    environ: dict[str, str]
    states: dict[str, str]
    status_note: str | None
    naming: Naming  # how the run named the SGLang checked: what a printed `patchkit apply` carries
    python: str | None = None  # where the release's model classes are built (None: no interpreter with torch)
    tree: str | None = None  # the folder the release imports from there
