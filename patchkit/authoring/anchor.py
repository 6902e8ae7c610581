"""`Anchor`: a top-level class a patch works in, declared once per file (issue 22.4).

A patch names each class it reads and edits once, in `ANCHORS`, with the members it reads there,
its marks in that class and the methods `track` watches. The base class derives from it what the
engine and `track` read: `SCOPE`, `PARTS`, `MARKS`, `ANCHOR_SYMBOLS` and `WATCH`; the edits are
gated on `anchor.matcher` and the probes find it with `anchor.find(tree)`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import libcst.matchers as m

from patchkit.authoring.matchers import classes

if TYPE_CHECKING:
    import libcst as cst

    from patchkit.authoring.template import Snippet


@dataclass(frozen=True)
class Anchor:
    name: str
    # The members the engine parses ("method": the members of that name; ":text": the members
    # whose source mentions `text`); empty: the whole class.
    parts: tuple[str, ...] = ()
    # The patch's snippets this class holds once patched (what "applied" means there).
    marks: tuple["Snippet", ...] = ()
    # The methods whose upstream changes `track` diffs.
    watch: tuple[str, ...] = ()

    # This class, for `@m.call_if_inside` and `@edit`: one object, so the gates of a patch's
    # edits on it are one gate (libcst matchers compare by identity).
    matcher: m.ClassDef = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "matcher", m.ClassDef(name=m.Name(self.name)))

    def member(self, name: str) -> str:
        """`Class.name`, as PARTS, WATCH and edit descriptions spell a member."""
        return f"{self.name}.{name}"

    def find(self, tree: "cst.Module") -> list["cst.ClassDef"]:
        """The top-level classes of this name in `tree` (usually zero or one)."""
        return classes(tree, self.name)

    def part_names(self) -> tuple[str, ...]:
        if not self.parts:
            return (self.name,)
        return tuple(f"{self.name}{part}" if part.startswith(":") else self.member(part) for part in self.parts)


@dataclass(frozen=True)
class Declarations:
    """What a patch's ANCHORS say, in the forms the engine and `track` read."""

    scope: dict[str, tuple[str, ...]]
    parts: dict[str, tuple[str, ...]]
    marks: dict[str, tuple[tuple[str | None, "Snippet"], ...]]
    symbols: tuple[str, ...]
    watch: tuple[str, ...]


def derive(anchors: Mapping[str, tuple[Anchor, ...]], parts: Mapping[str, tuple[str, ...]],
           marks: Mapping[str, tuple[tuple[str | None, "Snippet"], ...]], watch: tuple[str, ...]) -> Declarations:
    """The declarations of a patch with these ANCHORS, merged with what it declares beside them at
    module level (`parts`: top-level names and ":text"; `marks`: `(None, snippet)`; `watch`:
    top-level functions). A file's PARTS are derived only where the patch parses less than its
    classes whole (an anchor with parts, or module-level parts): else the engine's default holds."""
    scope = {rel: tuple(dict.fromkeys(anchor.name for anchor in found)) for rel, found in anchors.items()}
    all_parts = dict(parts)
    for rel, found in anchors.items():
        if rel in parts or any(anchor.parts for anchor in found):
            all_parts[rel] = (*(name for anchor in found for name in anchor.part_names()), *parts.get(rel, ()))
    all_marks = dict(marks)
    for rel, found in anchors.items():
        own = tuple((anchor.name, snippet) for anchor in found for snippet in anchor.marks)
        if own:
            all_marks[rel] = (*marks.get(rel, ()), *own)
    symbols = tuple(dict.fromkeys(anchor.name for found in anchors.values() for anchor in found))
    watched = (*(anchor.member(fn) for found in anchors.values() for anchor in found for fn in anchor.watch), *watch)
    return Declarations(scope, all_parts, all_marks, symbols, tuple(dict.fromkeys(watched)))
