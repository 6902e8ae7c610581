"""A diff's hunks placed by their own lines: all of a file's as `git apply` places them
(`apply_hunks`), one at a time with a conflict block for each that does not fit (`hunk_by_hunk`),
or every hunk of a file the release does not have as a block (`absent_blocks`), saying where the
package has that code now (`gone`).
"""

from __future__ import annotations

from collections.abc import Sequence

from patchkit.diffs import blocks, code_place
from patchkit.diffs import units as units_mod
from patchkit.diffs.blocks import block
from patchkit.diffs.resolution import CONFLICT, UnitOutcome
from patchkit.diffs.unidiff import FileDiff, Hunk


def _find(lines: list[bytes], want: list[bytes], expected: int, earliest: int, beginning: bool, end: bool) -> int | None:
    """Where `want` starts in `lines`: at `expected`, else the nearest place (forward first, as
    git's find_pos), never before `earliest`; pinned to the start / end of the file where git
    pins it (a hunk at line 1, a hunk without trailing context)."""
    last = len(lines) - len(want)
    if beginning or end:  # both may hold (a one-line file's hunk): every pin must
        candidates = [at for at in ((0,) if beginning else (last,)) if not (beginning and end) or at == 0 == last]
    else:
        expected = min(max(expected, earliest), max(last, earliest))
        candidates = [expected]
        for step in range(1, max(last - earliest, 0) + 2):
            candidates += [expected + step, expected - step]
    for at in candidates:
        if earliest <= at <= last and lines[at:at + len(want)] == want:
            return at
    return None


def apply_hunks(data: bytes, hunks: tuple[Hunk, ...], reverse: bool = False) -> bytes | None:
    """`data` with the hunks applied as `git apply` applies them (no fuzz; whitespace exact),
    or None when one does not apply."""
    lines = units_mod.split_lines(data)
    out: list[bytes] = []
    at = 0
    for hunk in hunks:
        before, after = (hunk.after, hunk.before) if reverse else (hunk.before, hunk.after)
        start = (hunk.new_start if reverse else hunk.old_start)
        count = len(before)
        tagged = [line[:1] for line in hunk.lines]
        trailing = 0
        for tag in reversed(tagged):
            if tag != b" ":
                break
            trailing += 1
        expected = start - 1 if count else start
        # git pins a hunk at line 0 or 1 to the start, one without trailing context to the end.
        found = _find(lines, before, expected, at, beginning=start <= 1, end=trailing == 0 and count > 0)
        if found is None:
            return None
        out += lines[at:found] + after
        at = found + count
    out += lines[at:]
    return b"".join(out)


def hunk_by_hunk(file: FileDiff, target: bytes, markers: bool,
                  package: code_place.Package | None = None) -> tuple[bytes, tuple[UnitOutcome, ...]]:
    """Each hunk where its context lines are (git apply's way, one hunk at a time), and a conflict
    for each hunk whose context is not in the target. Such a hunk's code is looked for by its own
    lines (`blocks.in_file`: in the file, then in the package's other Python files): the conflict is
    named by the unit there and says where and what the release did; with `markers` the hunk is
    written as a block (`block`) right above that code, else (not in this file) at the unit of the
    target at the line the hunk names (before it in a Python file). (The new bytes, the conflicts.)"""
    python = file.path.endswith(".py")
    try:
        found = units_mod.units(target) if python else []
    except (SyntaxError, ValueError):
        found = []
    target_lines = units_mod.split_lines(target)
    current = target
    out = []
    written: list[tuple[list[bytes] | None, int, bytes]] = []  # (its old lines where placed, else None; the line
    # of `current` it goes above where not placed; the block), in hunk order
    shift = 0  # lines the hunks applied so far added
    for hunk in file.hunks:
        applied = apply_hunks(current, (hunk,))
        if applied is not None:
            shift += len(hunk.after) - len(hunk.before)
            current = applied
            continue
        line = max(hunk.old_start - 1, 0)
        old = [entry[1:] for entry in hunk.lines if entry[:1] in (b" ", b"-")]
        here, place = blocks.in_file(file.path, old, target_lines, found, package if python else None)
        unit = units_mod.containing(found, line if here is None else here)
        name = unit.name if unit else f"line {hunk.old_start}" if python else "<file>"
        why = f"hunk at line {hunk.old_start}: its context lines are not in the file; {blocks.describe(place)}"
        out.append(UnitOutcome(file.path, name, CONFLICT, why))
        if markers:
            written.append((None if here is None else old, (unit.start if unit else line) + shift,
                            block(f"{file.path}: {why}", [_hunk_head(hunk), *hunk.lines],
                                  "the diff's hunk; make it where that code is now, or delete the block")))
    if written:
        lines = units_mod.split_lines(current)  # every hunk that fits applied: each block's place found there
        places = []
        for old_lines, fallback, text in written:
            again = None if old_lines is None else code_place.in_lines(old_lines, lines)
            places.append((min(again[0] if again else fallback, len(lines)), text))
        for _, (at, text) in sorted(enumerate(places), key=lambda row: (row[1][0], row[0]), reverse=True):
            if lines[:at] and not lines[at - 1].endswith(b"\n"):
                lines[at - 1] += b"\n"
            lines[at:at] = [text]
        current = b"".join(lines)
    return current, tuple(out) or (UnitOutcome(file.path, "<file>", CONFLICT, "its hunks do not apply together"),)


def _hunk_head(hunk: Hunk) -> bytes:
    return f"@@ -{hunk.old_start},{hunk.old_count} +{hunk.new_start},{hunk.new_count} @@\n".encode()


def absent_blocks(file: FileDiff, why: str, package: code_place.Package | None = None) -> bytes:
    """Every hunk of a file the release does not have, each as a block (`block`); with `package`,
    each says where the package has its code now (`gone`)."""
    return b"".join(block(f"{file.path}: hunk at line {hunk.old_start}: " + (
        gone(file.path, hunk.lines, package) if package is not None else why), [_hunk_head(hunk), *hunk.lines],
        "the diff's hunk; make it where that code is now, or delete the block") for hunk in file.hunks)


def gone(rel: str, lines: Sequence[bytes], package: code_place.Package | None) -> str:
    """What a block of a file the release does not have says: where the package has the code its
    hunk lines change (`blocks.in_package`), else that the file was removed."""
    old = [line[1:] for line in lines if line[:1] in (b" ", b"-")]
    place = blocks.in_package(old, rel, package) if rel.endswith(".py") else blocks.Located("", "")
    if place.at:
        return f"{rel} is not in this release; {blocks.describe(place)}"
    return f"{rel} is not in this release, nor the code the diff changes as it was in another file of it: the " \
        "release removed the file (or rewrote that code)"
