"""docs/modules.md has a row for every folder of patchkit/ and every module at its top (issue 34:
the tree is the map, the page says what the names leave unsaid): a folder or module added without
a row, or a row left for one that is gone, fails here, and a folder's row names each of its
modules."""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]
TABLE = REPO / "docs" / "modules.md"
PACKAGE = REPO / "patchkit"
ROW = re.compile(r"^\| `([^`]+)` \| (.+?) \|$")


def rows() -> dict[str, str]:
    found: dict[str, str] = {}
    for line in TABLE.read_text().splitlines():
        match = ROW.match(line)
        if match:
            assert match.group(1) not in found, f"docs/modules.md lists {match.group(1)} twice"
            found[match.group(1)] = match.group(2).strip()
    return found


def folders() -> list[str]:
    return sorted(f"patchkit/{path.parent.name}/" for path in PACKAGE.glob("*/__init__.py"))


def modules() -> set[str]:
    return {f"patchkit/{path.name}" for path in PACKAGE.glob("*.py")} | set(folders())


def test_every_module_has_a_row_and_every_row_a_module():
    listed, present = set(rows()), modules()
    assert not present - listed, f"add a row to docs/modules.md for {', '.join(sorted(present - listed))}"
    assert not listed - present, f"docs/modules.md lists what is not in patchkit/: {', '.join(sorted(listed - present))}"


def test_every_row_says_a_job():
    assert all(len(job) >= 10 for job in rows().values()), "each row says the module's one job in words"


def test_each_folder_row_names_its_modules():
    # So a new module is said in its folder's row, with what its name leaves unsaid.
    table = rows()
    assert len(folders()) >= 10
    for folder in folders():
        files = {path.stem for path in (REPO / folder).glob("*.py")} - {"__init__"}
        missing = sorted(name for name in files if f"`{name}`" not in table[folder])
        assert not missing, f"docs/modules.md's {folder} row does not name {', '.join(missing)}"
