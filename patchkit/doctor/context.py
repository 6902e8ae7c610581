"""What every doctor rule and trigger reads: the facts gathered for one launch (release, flags,
model, draft, GPU, budget, patch states, environment) and the fixes written in the release's own
spelling. Below both `rules` and `triggers`, which each import it."""

from __future__ import annotations

from dataclasses import dataclass, field

from patchkit.doctor.budget import Budget
from patchkit.doctor.gpu import GpuFacts
from patchkit.doctor.launch import Launch
from patchkit.doctor.model import ModelFacts
from patchkit.doctor.release import ReleaseCode
from patchkit.doctor.report import Fix
from patchkit.store.naming import Naming


@dataclass
class Context:
    release: ReleaseCode
    launch: Launch
    model: ModelFacts | None
    draft: ModelFacts | None
    gpu: GpuFacts
    budget: Budget
    patch_states: dict[str, str] = field(default_factory=dict)
    environ: dict[str, str] = field(default_factory=dict)
    naming: Naming = field(default_factory=Naming)  # how the run named the SGLang checked, for `patchkit apply`

    def flag(self, dest: str, fallback: str) -> str:
        """The release's own spelling of a flag (its first name), for a fix."""
        names = [n for n in self.release.flags.names_for(dest) if self.release.flags.by_name[n].deprecated_for is None]
        return names[0] if names else fallback

    def set(self, dest: str, fallback: str, *values: object, note: str = "") -> Fix:
        """A fix that sets `dest` (the release's spelling) to `values`."""
        return Fix(args=(self.flag(dest, fallback), *(str(v) for v in values)), note=note)

    def fraction_fix(self, note: str = "") -> Fix | None:
        """`--mem-fraction-static` at the recommended fraction (advice.recommend_fraction), where that is not
        the launch's own."""
        b = self.budget
        rec = b.recommended_mem_fraction_static
        if rec is None or (b.mem_fraction_static is not None and round(b.mem_fraction_static, 2) == rec
                           and b.mem_fraction_source == "flag"):
            return None
        return self.set("mem_fraction_static", "--mem-fraction-static", f"{rec:.2f}", note=note)

    def drop(self, dest: str) -> Fix:
        """A fix that takes `dest` off the launch line, every spelling written."""
        written = tuple(dict.fromkeys(u.written for u in self.launch.uses if u.flag is not None and u.flag.dest == dest))
        return Fix(remove=written)

    @property
    def algo(self) -> str | None:
        return self.budget.speculative_algorithm

    @property
    def hybrid(self) -> bool:
        return self.model is not None and self.model.is_hybrid_gdn
