"""The runtime plugin's own reading and record checks, on the module `apply` writes (rendered from
patchkit/templates/runtime_plugin.py.txt, standard library only), in this process: every read is
bounded in bytes and time, and a record of any other shape is an error to report, never an
exception. What it says inside SGLang's real load_plugins() is tests/behaviour/test_runtime_report*."""

from __future__ import annotations

import copy
import time
import types

import pytest

from patchkit.store import runtime_plugin

SHA, OTHER = "a" * 64, "b" * 64
RECORD = {
    "schema": 3, "patchkit_version": "0.1.0", "sglang_version": "0.5.17", "patches": ["fix-a", "fix-b"],
    "files": {"sglang/srt/x.py": {"pristine_sha256": SHA, "patched_sha256": OTHER, "patches": ["fix-a", "fix-b"],
                                  "patch_sha256": {"fix-a": SHA, "fix-b": OTHER}}},
    "runtime": {"dir": None, "files": {}},
}


@pytest.fixture(scope="module")
def plugin() -> types.ModuleType:
    module = types.ModuleType("sglang_patchkit_runtime")
    exec(runtime_plugin.render([])[runtime_plugin.MODULE_FILE].decode(), module.__dict__)  # noqa: S102 - our own template
    return module


def test_an_endless_file_is_cut_at_the_byte_bound(plugin):
    """/proc/self/pagemap: stat says a regular file of size 0, reading it never ends (2.3 GB in 20 s
    before the bound)."""
    with pytest.raises(OSError, match=f"more than {plugin.LIMIT} bytes"):
        plugin._read("/proc/self/pagemap", time.monotonic() + plugin.BUDGET)


def test_a_read_past_the_deadline_stops(plugin, tmp_path):
    path = tmp_path / "x.py"
    path.write_bytes(b"x = 1\n")
    assert plugin._read(str(path), time.monotonic() + 5) == b"x = 1\n"
    with pytest.raises(TimeoutError, match="still being read after"):
        plugin._read(str(path), time.monotonic() - 1)


def test_a_symlinked_record_is_not_followed(plugin, tmp_path):
    (tmp_path / "state.json").symlink_to("/proc/self/pagemap")
    with pytest.raises(OSError) as refused:
        plugin._read(str(tmp_path / "state.json"), time.monotonic() + 5, follow=False)
    assert refused.value.errno == __import__("errno").ELOOP


def test_the_record_patchkit_writes_passes(plugin):
    version, ids, files = plugin._checked(copy.deepcopy(RECORD))
    assert (version, ids) == ("0.1.0", ["fix-a", "fix-b"])
    assert files == {"sglang/srt/x.py": (SHA, OTHER, ["fix-a", "fix-b"], {"fix-a": SHA, "fix-b": OTHER})}


def _entry(record: dict) -> dict:
    return record["files"]["sglang/srt/x.py"]


BAD = {
    "not an object": lambda r: [],
    "version a number": lambda r: r.update(patchkit_version=1),
    "patches a string": lambda r: r.update(patches="fix-a"),
    "a patch id a number": lambda r: r.update(patches=[7]),
    "a patch id with a newline": lambda r: r.update(patches=["fix-a\npatchkit: forged"]),
    "files a list": lambda r: r.update(files=[]),
    "absolute path": lambda r: r["files"].update({"/proc/self/pagemap": _entry(r)}),
    "dotdot path": lambda r: r["files"].update({"../" * 12 + "proc/self/pagemap": _entry(r)}),
    "dotdot inside": lambda r: r["files"].update({"sglang/../../x.py": _entry(r)}),
    "outside sglang": lambda r: r["files"].update({"torch/x.py": _entry(r)}),
    "newline in a path": lambda r: r["files"].update({"sglang/x\n.py": _entry(r)}),
    "entry a list": lambda r: r["files"].update({"sglang/srt/x.py": []}),
    "patched a number": lambda r: _entry(r).update(patched_sha256=5),
    "pristine short": lambda r: _entry(r).update(pristine_sha256="ab"),
    "file patches a string": lambda r: _entry(r).update(patches="fix-a"),
    "digest an int": lambda r: _entry(r)["patch_sha256"].update({"fix-a": 7}),
    "digest true": lambda r: _entry(r)["patch_sha256"].update({"fix-a": True}),
    "digest with a newline": lambda r: _entry(r)["patch_sha256"].update({"fix-a": "\n" + "a" * 63}),
    "digests a list": lambda r: _entry(r).update(patch_sha256=[SHA]),
}


@pytest.mark.parametrize("bad", sorted(BAD))
def test_every_field_of_another_type_is_refused_naming_it(plugin, bad):
    record = copy.deepcopy(RECORD)
    changed = BAD[bad](record)
    with pytest.raises(plugin._Invalid) as refused:
        plugin._checked(record if changed is None else changed)
    assert "\n" not in str(refused.value)
