"""The README's patch table and the matrix in docs/patches.md are the generated ones
(`python -m testing.patch_table --write`), and every row agrees with `patchkit list --json` (the
declared range, the title) and with the committed manifests (the releases per verdict)."""

from __future__ import annotations

import re

from patchkit.releases import manifest
from testing import patch_table
from testing.cli import run


def rows(table: str) -> dict[str, list[str]]:
    """patch id -> the cells of its row, from a Markdown table."""
    found = {}
    for line in table.splitlines()[2:]:
        cells = [cell.strip() for cell in re.split(r"(?<!\\)\|", line)[1:-1]]
        found[cells[0].strip("`")] = cells[1:]
    return found


def expand(cell: str, versions: list[str]) -> set[str]:
    """'0.5.10-0.5.12, 0.5.20' -> the releases it names, in the manifests' order."""
    named: set[str] = set()
    for span in filter(None, (part.strip() for part in cell.split(","))):
        if span == "-":
            continue
        first, _, last = span.partition("-")
        named.update(versions[versions.index(first):versions.index(last or first) + 1])
    return named


def test_readme_table_is_the_generated_one():
    committed = patch_table.between(patch_table.README.read_text(), patch_table.TABLE_MARKS)
    assert committed == patch_table.patch_table(), "run: python -m testing.patch_table --write"


def test_patches_doc_matrix_is_the_generated_one():
    committed = patch_table.between(patch_table.PATCHES_DOC.read_text(), patch_table.MATRIX_MARKS)
    assert committed == patch_table.matrix(), "run: python -m testing.patch_table --write"


def test_readme_table_agrees_with_list_and_the_manifests():
    listed = run("list", "--json")
    assert listed.exit_code == 0, listed.stderr
    patches = {p["id"]: p for p in listed.json()["patches"]}
    table = rows(patch_table.between(patch_table.README.read_text(), patch_table.TABLE_MARKS) or "")
    assert set(table) == set(patches)
    versions = manifest.available()
    for patch_id, (applies, fixed, not_applicable, declared, title) in table.items():
        assert declared == f"`{patches[patch_id]['applies_to']}`"
        assert title.replace("\\|", "|") == patches[patch_id]["title"]
        for cell, verdict in ((applies, "applies"), (fixed, "upstream-fixed"), (not_applicable, "not-applicable")):
            recorded = {v for v in versions if manifest.load(v).patches[patch_id].verdict == verdict}
            assert expand(cell, versions) == recorded, (patch_id, verdict)


def test_runs_join_neighbours_only():
    versions = ["0.5.10", "0.5.11", "0.5.12", "0.5.13"]
    assert patch_table.runs(versions, {"0.5.10", "0.5.11", "0.5.13"}) == "0.5.10-0.5.11, 0.5.13"
    assert patch_table.runs(versions, set()) == "-"


def test_readme_links_every_doc():
    readme = patch_table.README.read_text()
    docs = sorted(path.name for path in (patch_table.REPO / "docs").glob("*.md"))
    assert docs and not [name for name in docs if f"(docs/{name}" not in readme], "link it from the README's More"
