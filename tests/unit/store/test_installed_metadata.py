"""`status` of this Python's own SGLang reads its distribution metadata without importlib.metadata
(which imports the email package, ~36 ms a run: issue 43.3): `target._read_dist` must find what
`importlib.metadata.distribution` finds (where Python 3.10-3.13 look, in their order), and hand over
to it wherever it could differ. Each layout is judged in a child whose sys.path starts with its
folders: `where()` read both ways gives the same answer, and the fast way loads no email."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

CHILD = """
import json, sys
sys.path[:0] = {folders!r}
from patchkit.store import target
namespace = {{}}
exec(target._WHERE, namespace)
direct = target._read_dist("sglang")
fast = namespace["where"](target._read_dist)
email = "email" in sys.modules
print(json.dumps({{"read": None if direct is None else bool(direct), "fast": fast, "email": email,
                  "slow": namespace["where"]()}}))
"""

METADATA = "Metadata-Version: 2.1\nName: sglang\nVersion: {version}\nSummary: x\n\nbody\nVersion: 9\n"


def where_both_ways(folders: list[Path]) -> dict:
    proc = subprocess.run([sys.executable, "-c", CHILD.format(folders=[str(f) for f in folders])],
                          capture_output=True, text=True, cwd=Path(__file__).parents[3])
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def dist(folder: Path, name: str, files: dict[str, str | bytes]) -> Path:
    info = folder / name
    info.mkdir(parents=True)
    for file, text in files.items():
        (info / file).write_bytes(text if isinstance(text, bytes) else text.encode())
    return folder


EDITABLE = json.dumps({"url": "file:///src/sglang", "dir_info": {"editable": True}})

# (layout name, [(dist-info folder name, its files)] per sys.path folder, read without importlib.metadata)
LAYOUTS = [
    ("wheel", [[("sglang-0.5.17.dist-info", {"METADATA": METADATA.format(version="0.5.17")})]], True),
    ("editable", [[("sglang-0.5.19.dist-info", {"METADATA": METADATA.format(version="0.5.19"),
                                                "direct_url.json": EDITABLE})]], True),
    ("spelled otherwise", [[("SGLang-0.5.17.dist-info", {"METADATA": METADATA.format(version="0.5.17")})]], True),
    ("another name first", [[("sglang_router-1.0.dist-info", {"METADATA": METADATA.format(version="1.0")}),
                             ("sglang-0.5.16.dist-info", {"METADATA": METADATA.format(version="0.5.16")})]], True),
    ("egg-info", [[("sglang.egg-info", {"PKG-INFO": METADATA.format(version="0.5.15")})]], True),
    ("empty METADATA", [[("sglang-0.5.17.dist-info", {"METADATA": "", "PKG-INFO": METADATA.format(version="0.5.14")})]],
     True),
    ("first folder wins", [[("sglang-0.5.17.dist-info", {"METADATA": METADATA.format(version="0.5.17")})],
                           [("sglang-0.5.23.dist-info", {"METADATA": METADATA.format(version="0.5.23")})]], True),
    ("direct_url not utf-8", [[("sglang-0.5.17.dist-info", {"METADATA": METADATA.format(version="0.5.17"),
                                                            "direct_url.json": b"\xff{"})]], True),
    ("none", [[("other-1.0.dist-info", {"METADATA": METADATA.format(version="1.0")})]], False),
    # Handed to importlib.metadata (None): the answer must still be the same.
    ("folded Version", [[("sglang-0.5.17.dist-info", {"METADATA": "Name: sglang\nVersion: 0.5.17\n  .post1\n"})]], None),
    ("Version with a trailing space", [[("sglang-0.5.17.dist-info", {"METADATA": "Name: sglang\nVersion: 0.5.17 \n"})]],
     None),
    ("no Version", [[("sglang-0.5.17.dist-info", {"METADATA": "Name: sglang\n"})]], None),
    ("form feed", [[("sglang-0.5.17.dist-info", {"METADATA": "Name: sglang\x0c\nVersion: 0.5.17\n"})]], None),
    ("METADATA not utf-8", [[("sglang-0.5.17.dist-info", {"METADATA": b"Name: \xff\nVersion: 0.5.17\n"})]], None),
]


@pytest.mark.parametrize("layout", LAYOUTS, ids=[layout[0] for layout in LAYOUTS])
def test_the_metadata_read_without_importlib_metadata_is_what_it_finds(tmp_path, layout):
    _, folders, read = layout
    paths = []
    for index, infos in enumerate(folders):
        folder = tmp_path / f"site{index}"
        folder.mkdir()
        for name, files in infos:
            dist(folder, name, files)
        paths.append(folder)
    if layout[0] == "METADATA not utf-8":  # importlib.metadata raises there: so must the fast reading
        proc = subprocess.run([sys.executable, "-c", CHILD.format(folders=[str(p) for p in paths])],
                              capture_output=True, text=True, cwd=Path(__file__).parents[3])
        assert proc.returncode != 0 and proc.stderr.strip().splitlines()[-1].startswith("UnicodeDecodeError"), proc.stderr
        return
    found = where_both_ways(paths)
    assert found["fast"] == found["slow"]
    assert found["read"] == read
    if read is not None:
        assert not found["email"]


def test_an_egg_info_file_is_left_to_importlib_metadata(tmp_path):
    site = tmp_path / "site"
    site.mkdir()
    (site / "sglang-0.5.12.egg-info").write_text(METADATA.format(version="0.5.12"))
    found = where_both_ways([site])
    assert found["read"] is None
    assert found["fast"] == found["slow"] and found["slow"]["version"] == "0.5.12"
