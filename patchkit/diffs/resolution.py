"""What resolving a diff on a release's files gives (`unit_merge.resolve`): per file how it was
resolved (EXACT: as `git apply` does; REVERSED: its reverse applies, the change is there; PER_UNIT:
unit by unit; ABSENT: the release lacks the file) and its new bytes, per unit of code its outcome
(`OUTCOMES`). Data only.
"""

from __future__ import annotations

from dataclasses import dataclass


TRANSPLANTED, MERGED, MOVED, UPSTREAM, CONFLICT = "transplanted", "merged", "moved", "upstream", "conflict"
OUTCOMES = (TRANSPLANTED, MERGED, MOVED, UPSTREAM, CONFLICT)
# How a file was resolved.
EXACT, REVERSED, PER_UNIT, ABSENT = "exact", "already-applied", "per-unit", "absent"


@dataclass(frozen=True)
class UnitOutcome:
    file: str
    unit: str  # "Class.method", "function", "<imports>", ...
    outcome: str  # one of OUTCOMES
    detail: str = ""
    moved_to: str = ""  # the other file of the package the unit is in now (see `finder`)

    def to_dict(self) -> dict:
        return {"file": self.file, "unit": self.unit, "outcome": self.outcome, "detail": self.detail}


@dataclass(frozen=True)
class FileResolution:
    rel: str
    how: str  # EXACT, REVERSED, PER_UNIT, ABSENT
    before: bytes | None
    after: bytes | None  # the new bytes (with conflict markers where asked); None when absent
    units: tuple[UnitOutcome, ...] = ()
    notes: tuple[str, ...] = ()
    # Units that moved to another file, followed there (resolve(follow=True)): (file, unit, new bytes).
    elsewhere: tuple[tuple[str, str, bytes], ...] = ()
    # The same units as the diff changes them: (file, unit, pre-image form, patched form), so that
    # the other file's bytes can be patched again where they differ from those seen here.
    moved: tuple[tuple[str, str, bytes, bytes], ...] = ()

    @property
    def conflicts(self) -> tuple[UnitOutcome, ...]:
        return tuple(u for u in self.units if u.outcome == CONFLICT)

    @property
    def upstream(self) -> bool:
        """Every unit the diff changes is already in its patched form here."""
        return self.how == REVERSED or (self.how == PER_UNIT and bool(self.units)
                                        and all(u.outcome == UPSTREAM for u in self.units))


@dataclass(frozen=True)
class Resolution:
    files: tuple[FileResolution, ...]
    notes: tuple[str, ...] = ()

    @property
    def conflicts(self) -> tuple[UnitOutcome, ...]:
        return tuple(u for f in self.files for u in f.conflicts)

    def counts(self) -> dict[str, int]:
        found = dict.fromkeys(OUTCOMES, 0)
        for f in self.files:
            for u in f.units:
                found[u.outcome] += 1
        return found
