"""`bump`'s result and its report: the `Bump` (every patch's row, the launch lines, the notes,
the files for DIR), rendered as `--json` (`to_dict`), REPORT.md (`markdown`) and the commands to
finish (`next_steps`, pasteable as printed). Data and text only: nothing is read or written here.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from patchkit.engine.bump_record import (BLOCKING, CONFLICTS, DROP, FAILED, GONE, NOT_NEEDED, REBASED, Conflict, LaunchChange,
                                         PatchRow, continue_command)
from patchkit.store.naming import Naming


@dataclass(frozen=True)
class Bump:
    first: str  # V0
    to: str  # V
    folder: Path  # DIR
    patches: tuple[PatchRow, ...]
    launches: tuple[LaunchChange, ...] = ()
    notes: tuple[str, ...] = ()
    # The patch files of the set that could not be loaded, each "FILE: why" (registry.unloadable):
    # the bump ran without them, so the set in DIR is not complete.
    left_out: tuple[str, ...] = ()
    # What `write` puts in DIR: {path relative to DIR: bytes}; the diffs as given (for `--continue`).
    files: dict[str, bytes] = field(default_factory=dict, compare=False, repr=False)
    inputs: dict[str, tuple[str, bytes]] = field(default_factory=dict, compare=False, repr=False)
    # The sha256 of each output as the bump last wrote (or `--continue` last read) it: what may be removed.
    digests: dict[str, str] = field(default_factory=dict, compare=False, repr=False)
    # `--python PY`: the Python that imports the set on V (works_on.imports), kept for `--continue`.
    python: str | None = None
    # The tree option the bump was given (`--site-packages DIR`, `--source DIR`, `--python PATH`), or
    # none: the SGLang tree "To finish" applies the new folder to.
    tree: tuple[str, ...] = ()

    @property
    def conflicts(self) -> list[tuple[str, Conflict]]:
        return [(row.id, c) for row in self.patches for c in row.conflicts]

    @property
    def blocked(self) -> bool:
        return any(row.action in BLOCKING for row in self.patches)

    @property
    def complete(self) -> bool:
        return not self.blocked and not self.left_out

    @property
    def order(self) -> list[str]:
        """The diff files written into DIR, in the order they must be applied (stack order: a diff
        stacked on another after it), which may differ from their names' sort order."""
        return [row.written for row in self.patches if row.kind == "diff" and row.written]

    def order_lines(self) -> list[str]:
        """REPORT.md's "Apply order": the numbered files, and where a `git apply` loop over the
        sorted names would go wrong, that it would."""
        order = self.order
        out = [f"{i}. `{name}`" for i, name in enumerate(order, 1)]
        out += ["", "Apply in this order; `patchkit apply` does it."]
        if order != sorted(order):
            out.append("This is not their names' sort order: a loop over `DIR/*.patch` (`git apply`) applies them "
                       "wrong; each stacked diff names its lower one in `Patchkit-After:`.")
        return out

    def to_dict(self) -> dict[str, Any]:
        return {"order": self.order, "order_sorted": self.order == sorted(self.order), "from": self.first, "to": self.to, "folder": str(self.folder),
                "patches": [row.to_dict() for row in self.patches],
                "conflicts": [{"id": pid, "name": c.name, "detail": c.detail} for pid, c in self.conflicts],
                "drops": [row.id for row in self.patches if row.action == DROP],
                "launches": [launch.to_dict() for launch in self.launches],
                "next": self.next_steps(), "notes": list(self.notes), "left_out": list(self.left_out),
                "blocked": [row.id for row in self.patches if row.action in BLOCKING], "complete": self.complete,
                "tree": list(self.tree)}

    def next_steps(self) -> list[str]:
        """The commands to finish: resolve and continue, then rebuild the image and apply the new folder."""
        steps = []
        if self.left_out:
            steps.append("fix or remove each patch file left out (REPORT.md: Left out), then run this bump again: DIR lacks them")
        outside = [row for row in self.patches if row.outside and not wholly_outside(row)]
        if outside:
            steps.append(f"carry the files outside the sglang package into your SGLang {self.to} checkout yourself "
                         "(patchkit patches the installed package only; DIR's diffs leave them out): "
                         + "; ".join(f"{row.id}: {', '.join(row.outside)}" for row in outside))
        whole = [row for row in self.patches if wholly_outside(row)]
        if whole:
            steps.append(f"check by hand against SGLang {self.to} each diff with nothing inside the sglang package "
                         "(written to DIR unchanged; patchkit judges only the installed package's files: a dependency "
                         f"pin must be the version {self.to} needs): "
                         + "; ".join(f"{row.written}: {', '.join(row.outside)}" for row in whole))
        modules = [row.tree for row in self.patches if row.tree and row.kind == "module" and row.action in BLOCKING]
        if modules:
            steps.append(f"fix each patch module that does not work on SGLang {self.to} in its tree, against "
                         f"{self.to}'s files beside it ({', '.join(f'{self.folder}/{tree}/{tree[:-5]}.py' for tree in modules)}), "
                         f"then run `{continue_command(self.folder)}`")
        if any(row.tree for row in self.patches if row.action == CONFLICTS and row.kind == "diff"):
            steps.append(f"resolve the <<<<<<< / >>>>>>> blocks in {self.folder}/*.tree/ (each block: make the "
                         f"change where the code is, delete the marker lines), then run "
                         f"`{continue_command(self.folder)}`")
        if any(c.detail.startswith(f"breaks on {self.to}:") for _, c in self.conflicts):
            steps.append(f"fix what each `breaks on {self.to}` conflict names at its FILE:LINE, in {self.folder}/"
                         f"NAME.tree/ (the diff applied on {self.to}), then run `{continue_command(self.folder)}`")
        # Pasteable as printed: the folder (quoted where it must be), the tree the bump was given.
        patches = (str(self.folder),) if any(row.written for row in self.patches) else ()
        option, value = self.tree if len(self.tree) == 2 else (None, None)
        naming = Naming(option, value, patches=patches)
        image = naming.command("image", "build", "--base", f"lmsysorg/sglang:v{self.to}", "--target", self.to,
                               "-t", f"sglang:v{self.to}-patched")
        if self.complete:
            steps.append(f"rebuild the image (your base image and tag in place of these): `{image}`")
            steps.append(f"apply on the SGLang {self.to} tree: `{naming.command('apply')}`")
            return steps
        # Unfinished: DIR is refused as a set (engine/bump_record.unfinished) until it is finished;
        # the image and apply only with --allow-incomplete, which leaves out what is not finished.
        if any(row.action == FAILED and not row.tree for row in self.patches):  # as the folder's refusal says
            steps.append("fix what failed (REPORT.md), then run this bump again")
        lacking = ", ".join([row.id for row in self.patches if row.action in BLOCKING]
                            + [item.split(": ", 1)[0] for item in self.left_out])
        steps.append(f"or, before it is finished, leaving out {lacking} (--allow-incomplete): rebuild the image "
                     f"`{image} --allow-incomplete`, or apply on the SGLang {self.to} tree "
                     f"`{naming.command('apply')} --allow-incomplete`")
        return steps

    def markdown(self) -> str:
        """REPORT.md: a maintainer pastes it into a pull request."""
        out = [f"# patchkit bump: SGLang {self.first} -> {self.to}", "",
               "| patch | on " + self.first + " | on " + self.to + " | action |", "| --- | --- | --- | --- |"]
        for row in self.patches:
            action = row.action + (f" ({_counts(row.counts)})" if row.counts and row.action in (REBASED, CONFLICTS)
                                   else "")
            out.append(f"| `{row.id}` | {row.on_from} | {row.on_to} | {action} |")
        if self.order:
            out += ["", "## Apply order", ""] + self.order_lines()
        if self.conflicts:
            out += ["", "## Conflicts", ""]
            out += [f"- `{pid}`: `{c.name}`: {c.detail}" for pid, c in self.conflicts]
        drops = [row for row in self.patches if row.action == DROP]
        if drops:
            out += ["", "## Drops (upstream-fixed on " + self.to + ")", ""]
            for row in drops:
                out.append(f"- `{row.id}`: drop it; upstream: {'; '.join(row.upstream) or 'not named'}")
                out += [f"  - evidence: {item}" for item in row.evidence]
                if row.detail:
                    out.append(f"  - note: {row.detail}")
        gone = [row for row in self.patches if row.action in (GONE, FAILED)]
        if gone:
            out += ["", "## Not carried over", ""]
            out += [f"- `{row.id}` ({row.action}): {row.detail}" for row in gone]
        if self.left_out:
            out += ["", "## Left out (cannot be loaded; not in DIR)", ""] + [f"- {item}" for item in self.left_out]
        outside = [row for row in self.patches if row.outside]
        if outside:
            out += ["", "## Outside the sglang package", ""]
            out += [f"- `{row.id}`: " + ", ".join(f"`{rel}`" for rel in row.outside)
                    + (f" (the whole diff: written to DIR unchanged as `{row.written}`; check it against {self.to} by "
                       "hand)" if wholly_outside(row) else f" (not in DIR: yours to carry to {self.to})")
                    for row in outside]
        if self.launches:
            out += ["", "## Launch lines", ""]
            for launch in self.launches:
                out += _launch_markdown(launch, self.first, self.to)
        notes = [*self.notes, *(f"{row.id}: {note}" for row in self.patches for note in row.notes)]
        if notes:
            out += ["", "## Notes", ""] + [f"- {note}" for note in notes]
        out += ["", "## To finish", ""] + [f"{i}. {step}" for i, step in enumerate(self.next_steps(), 1)]
        return "\n".join(out) + "\n"


def wholly_outside(row: PatchRow) -> bool:
    """A diff whose every file is outside the package (bump._outside_row): in DIR as it was given."""
    return row.kind == "diff" and bool(row.outside) and row.action == NOT_NEEDED


def _counts(counts: dict[str, int]) -> str:
    return ", ".join(f"{n} {what}" for what, n in counts.items() if n)


def _launch_markdown(launch: LaunchChange, first: str, to: str) -> list[str]:
    out = ["`" + " ".join(launch.line) + "`", ""]
    out += [f"- removed on {to}: `{item}`" for item in launch.removed]
    out += [f"- renamed on {to}: `{old}` -> `{new}`" for old, new in launch.renamed]
    out += [f"- default changed: `{flag}` {old} -> {new}" for flag, old, new in launch.defaults]
    out += [f"- new on {to}: {item}" for item in launch.appeared]
    out += [f"- gone on {to}: {item}" for item in launch.disappeared]
    out += [f"- changed on {to}: {new} (on {first}: {old})" for old, new in launch.changed]
    if launch.budget_note:
        out.append(f"- budget not compared: {launch.budget_note}")
    if launch.budget:
        out += ["", f"| budget | {first} | {to} |", "| --- | --- | --- |"]
        out += [f"| {what} | {old} | {new} |" for what, old, new in launch.budget]
    if len(out) == 2:
        out.append("- no change")
    return out + [""]
