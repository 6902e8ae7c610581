"""docs/modules.md lists every module of patchkit/ with its one job (issue 22.4): a module added
without a row, or a row left for a module that is gone, fails here. patchkit/commands/ and
patchkit/doctor/ are one row each (their files are named after their job: a subcommand, a part of
the doctor)."""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
TABLE = REPO / "docs" / "modules.md"
GROUPS = ("patchkit/commands/", "patchkit/doctor/")
ROW = re.compile(r"^\| `([^`]+)` \| (.+?) \|$")


def rows() -> dict[str, str]:
    found: dict[str, str] = {}
    for line in TABLE.read_text().splitlines():
        match = ROW.match(line)
        if match:
            assert match.group(1) not in found, f"docs/modules.md lists {match.group(1)} twice"
            found[match.group(1)] = match.group(2).strip()
    return found


def modules() -> set[str]:
    package = REPO / "patchkit"
    names = {f"patchkit/{path.name}" for path in package.glob("*.py")}
    names |= {group for group in GROUPS if (REPO / group).is_dir()}
    return names


def test_every_module_has_a_row_and_every_row_a_module():
    listed, present = set(rows()), modules()
    assert not present - listed, f"add a row to docs/modules.md for {', '.join(sorted(present - listed))}"
    assert not listed - present, f"docs/modules.md lists what is not in patchkit/: {', '.join(sorted(listed - present))}"


def test_every_row_says_a_job():
    assert all(len(job) >= 10 for job in rows().values()), "each row says the module's one job in words"


def test_the_groups_rows_name_their_files():
    # A group's row names each of its files, so a new subcommand or doctor part is said there too.
    table = rows()
    for group in GROUPS:
        files = {path.stem for path in (REPO / group).glob("*.py")} - {"__init__"}
        missing = sorted(name for name in files if f"`{name}`" not in table[group])
        assert not missing, f"docs/modules.md's {group} row does not name {', '.join(missing)}"
