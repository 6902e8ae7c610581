from __future__ import annotations

from typing import Any

from patchkit.commands import output
from patchkit.engine import registry
from patchkit.diffs import release_blobs
from patchkit.base.constants import EXIT_OK


def list_patches(as_json: bool) -> int:
    patches = registry.load_all()
    rows: list[dict[str, Any]] = [
        {
            "id": p.ID,
            "origin": registry.origin(p.ID),
            "title": p.TITLE,
            "applies_to": p.APPLIES_TO,
            "targets": list(p.TARGETS),
            "upstream": list(p.UPSTREAM),
            "drop_when": p.DROP_WHEN,
            "upstream_narrower": p.UPSTREAM_NARROWER or None,
            "drop_waits_on": [change.to_dict() for change in p.DROP_WAITS_ON],
            "runtime_switch": list(p.RUNTIME_SWITCH),
            "no_runtime_switch": None if p.RUNTIME_SWITCH else (p.NO_RUNTIME_SWITCH or None),
        }
        for p in patches
    ]
    for row, p in zip(rows, patches):
        row.update(registry.described(p))  # what its kind adds (a diff: made_for, notes, stacked_on)
    if as_json:
        output.as_json({"patches": rows})
        return EXIT_OK
    for row in rows:
        output.line(f"{row['id']}  (SGLang {row['applies_to'] or 'any release'}; {row['origin']})")
        output.line(f"    {row['title']}")
        for ref in row["upstream"]:
            output.line(f"    upstream: {ref}")
        if row["drop_when"]:
            output.line(f"    {row['drop_when']}")
        for change in row["drop_waits_on"]:
            output.line(f"    the drop condition names {change['ref']} ({change['state']} upstream when looked up on {change['checked']}): "
                        f"{change['what']}")
        if row["upstream_narrower"]:
            output.line(f"    upstream's fix, where a release has it, is narrower: {row['upstream_narrower']}")
        if "made_for" in row:
            # A diff of files outside the package only: what it is, in place of the release it was made for.
            output.line(f"    {row['nothing_inside'] or release_blobs.made_for_text(row['made_for'])}")
            for pid, files in row["stacked_on"].items():
                output.line(f"    stacked on {pid}: its pre-image is {pid}'s post-image ({len(files)} file(s)); "
                            f"applied after it")
            for note in row["notes"]:
                output.line(f"    note: {note}")
        if row["runtime_switch"]:
            output.line(f"    runtime switch: {' or '.join(row['runtime_switch'])} (the release's own path)")
        else:
            why = f": {row['no_runtime_switch']}" if row["no_runtime_switch"] else ""
            output.line(f"    runtime switch: none, cannot take the pristine path at run time{why} (only `patchkit revert` removes it)")
    return EXIT_OK
