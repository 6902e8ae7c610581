from __future__ import annotations

from patchkit import output, registry
from patchkit.constants import EXIT_OK


def list_patches(as_json: bool) -> int:
    patches = registry.load_all()
    rows = [
        {
            "id": p.ID,
            "origin": registry.origin(p.ID),
            "title": p.TITLE,
            "applies_to": p.APPLIES_TO,
            "targets": list(p.TARGETS),
            "upstream": list(p.UPSTREAM),
            "drop_when": p.DROP_WHEN,
        }
        for p in patches
    ]
    if as_json:
        output.as_json({"patches": rows})
        return EXIT_OK
    for row in rows:
        output.line(f"{row['id']}  (SGLang {row['applies_to']}; {row['origin']})")
        output.line(f"    {row['title']}")
        for ref in row["upstream"]:
            output.line(f"    upstream: {ref}")
        if row["drop_when"]:
            output.line(f"    {row['drop_when']}")
    return EXIT_OK
