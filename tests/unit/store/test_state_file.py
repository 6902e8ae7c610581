"""The state file (`.patchkit/state.json`): schema 1 and 2 read, schema 3 read and written, every
validation refusal, symlinks and odd files under `.patchkit/`, and its atomic write."""

from __future__ import annotations

import copy
import errno
import json
import os
import threading
from pathlib import Path

import pytest

from patchkit.store import state as state_mod
from patchkit.base.constants import STATE_SCHEMA
from patchkit.base.errors import StateError, UnsafeStateError
from patchkit.store.state import FileRecord, State
from testing import synthetic as syn
from testing.releases import snapshot
from testing.synthetic import ALPHA, FIX, GAMMA, STACK_A, STACK_B, Synthetic

H1, H2, H3 = "1" * 64, "2" * 64, "a" * 64


@pytest.fixture
def tree(scratch, tmp_path) -> Synthetic:
    return Synthetic(syn.make_tree(scratch / "site"), syn.write_patches(tmp_path / "patches"))


def sample() -> State:
    return State(sglang_version="0.9.0", patches=[FIX, STACK_B], files={
        ALPHA: FileRecord(pristine=H1, patched=H2, patches=[FIX], digests={FIX: H3}),
        "sglang/new.py": FileRecord(pristine=None, patched=H2, patches=[FIX, STACK_B], digests={FIX: H3, STACK_B: H1}),
    })


def write_state(site: Path, data: object) -> None:
    (site / ".patchkit").mkdir(exist_ok=True)
    raw = data if isinstance(data, (bytes, str)) else json.dumps(data)
    (site / ".patchkit" / "state.json").write_bytes(raw.encode() if isinstance(raw, str) else raw)


# --- schema 3: written and read back ------------------------------------------------------------


def test_schema_3_round_trip(tree):
    state = sample()
    state.runtime = {"sglang_patchkit_runtime/__init__.py": H1}
    state_mod.save(tree.site, state)
    data = json.loads((tree.site / ".patchkit/state.json").read_text())
    assert data["schema"] == STATE_SCHEMA == 3
    assert data["runtime"] == {"dir": None, "files": {"sglang_patchkit_runtime/__init__.py": H1}}
    assert data["files"][ALPHA] == {"pristine_sha256": H1, "patched_sha256": H2, "patches": [FIX],
                                    "patch_sha256": {FIX: H3}}
    assert list(data["files"]) == sorted(data["files"])  # stable order: a diffable file
    assert state_mod.load(tree.site) == state
    assert oct((tree.site / ".patchkit/state.json").stat().st_mode & 0o777) == oct(0o644)


def test_no_state_file_is_none(tree):
    assert state_mod.load(tree.site) is None


def test_schema_1_is_read_without_digests(tree):
    data = sample().to_dict()
    data["schema"] = 1
    del data["runtime"]
    for record in data["files"].values():
        del record["patch_sha256"]
    write_state(tree.site, data)
    state = state_mod.load(tree.site)
    assert state is not None and all(record.digests == {} for record in state.files.values())
    assert state.files[ALPHA].patched == H2 and state.patches == [FIX, STACK_B]


def test_a_schema_1_tree_is_judged_by_rendering(tree):
    """A tree patched before patch digests were recorded: each file is re-rendered and compared;
    the same bytes are `applied`, other bytes (an older patch) are `outdated`."""
    assert tree.run("apply").exit_code == 0
    path = tree.site / ".patchkit/state.json"
    data = json.loads(path.read_text())
    data["schema"] = 1
    del data["runtime"]
    for record in data["files"].values():
        del record["patch_sha256"]
    path.write_text(json.dumps(data))
    assert tree.states()[FIX] == "applied"
    tree.patches = syn.write_patches(tree.patches.parent / "v2", fix_version="v2")
    assert tree.states()[FIX] == "outdated"
    assert tree.run("apply").exit_code == 0
    assert tree.text(ALPHA) == syn.patched_alpha(ALPHA, "v2")
    assert json.loads(path.read_text())["schema"] == 3  # written back as schema 3


# --- every refusal ---------------------------------------------------------------------------


def _record(data: dict) -> dict:
    return data["files"][ALPHA]


BAD: dict[str, object] = {
    # the whole file
    "not JSON": b"{not json",
    "a list": [],
    "missing files": lambda d: d.pop("files"),
    "unknown top field": lambda d: d.update(extra=1),
    "unknown schema": lambda d: d.update(schema=7),
    "schema as a string": lambda d: d.update(schema="2"),
    "schema as a bool": lambda d: d.update(schema=True),
    "sglang_version empty": lambda d: d.update(sglang_version=""),
    "sglang_version a number": lambda d: d.update(sglang_version=9),
    "patchkit_version with a NUL": lambda d: d.update(patchkit_version="1\0"),
    # patches
    "patches a string": lambda d: d.update(patches=FIX),
    "patch id with capitals": lambda d: d.update(patches=["Syn_Fix"]),
    "patch id twice": lambda d: d.update(patches=[FIX, FIX, STACK_B]),
    # files
    "files a list": lambda d: d.update(files=[]),
    "path with ..": lambda d: d["files"].update({"sglang/../outside.py": _record(d)}),
    "path outside sglang": lambda d: d["files"].update({"../outside.py": _record(d)}),
    "absolute path": lambda d: d["files"].update({"/etc/passwd": _record(d)}),
    "another package": lambda d: d["files"].update({"torch/x.py": _record(d)}),
    "the package folder itself": lambda d: d["files"].update({"sglang": _record(d)}),
    "empty path part": lambda d: d["files"].update({"sglang//x.py": _record(d)}),
    "backslash": lambda d: d["files"].update({"sglang\\x.py": _record(d)}),
    # a file record
    "record not an object": lambda d: d["files"].update({ALPHA: [1]}),
    "record missing patched": lambda d: _record(d).pop("patched_sha256"),
    "record unknown field": lambda d: _record(d).update(mode=420),
    "record patches empty": lambda d: _record(d).update(patches=[]),
    "record patches a string": lambda d: _record(d).update(patches=FIX),
    "record names an unlisted patch": lambda d: _record(d).update(patches=[STACK_A]),
    "short hash": lambda d: _record(d).update(patched_sha256="ab" * 8),
    "long hash": lambda d: _record(d).update(pristine_sha256="a" * 65),
    "uppercase hash": lambda d: _record(d).update(pristine_sha256="A" * 64),
    "hash a number": lambda d: _record(d).update(pristine_sha256=1),
    "pristine and patched null": lambda d: _record(d).update(pristine_sha256=None, patched_sha256=None),
    "patch_sha256 not an object": lambda d: _record(d).update(patch_sha256=[H3]),
    "patch_sha256 short": lambda d: _record(d).update(patch_sha256={FIX: "ab"}),
    "patch_sha256 bad key": lambda d: _record(d).update(patch_sha256={"Bad Id": H3}),
    "patch_sha256 in schema 1": lambda d: d.update(schema=1) or d.pop("runtime"),
    # the runtime report's files (schema 3)
    "runtime in schema 2": lambda d: d.update(schema=2),
    "runtime not an object": lambda d: d.update(runtime=[]),
    "runtime unknown field": lambda d: d["runtime"].update(extra=1),
    "runtime dir relative": lambda d: d["runtime"].update(dir="site-packages"),
    "runtime file of sglang": lambda d: d["runtime"].update(files={ALPHA: H1}),
    "runtime file elsewhere": lambda d: d["runtime"].update(files={"evil.pth": H1}),
    "runtime file deeper": lambda d: d["runtime"].update(files={"sglang_patchkit_runtime/a/b.py": H1}),
    "runtime file in a cache": lambda d: d["runtime"].update(files={"sglang_patchkit_runtime/__pycache__": H1}),
    "runtime hash short": lambda d: d["runtime"].update(files={"sglang_patchkit_runtime/__init__.py": "ab"}),
}


@pytest.mark.parametrize("bad", sorted(BAD))
def test_every_refusal_names_the_problem_and_changes_nothing(tree, bad):
    data = sample().to_dict()
    change = BAD[bad]
    if callable(change):
        change(data)
        write_state(tree.site, data)
    else:
        write_state(tree.site, change)
    with pytest.raises(StateError, match="corrupt|not a valid patchkit state file") as refused:
        state_mod.load(tree.site)
    assert str(tree.site / ".patchkit/state.json") in str(refused.value) and "nothing was written" in str(refused.value)
    assert "\n" not in str(refused.value)


@pytest.mark.parametrize("command", ["status", "apply", "revert"])
def test_a_corrupt_state_file_is_exit_1_for_every_command(tree, command):
    data = sample().to_dict()
    _record(data).update(patched_sha256="short")
    write_state(tree.site, data)
    before = snapshot(tree.site)
    result = tree.run(command)
    assert result.exit_code == 1 and result.stderr.startswith("error: ") and "patched_sha256" in result.stderr
    assert snapshot(tree.site) == before


def test_a_release_file_recorded_as_added_is_refused(tree):
    """pristine null means patchkit added the file; RECORD says the release has it."""
    data = sample().to_dict()
    data["files"]["sglang/version.py"] = {**_record(data), "pristine_sha256": None}
    write_state(tree.site, data)
    with pytest.raises(StateError, match="sglang/version.py, a file of the SGLang release"):
        state_mod.load(tree.site)


def test_the_release_record_is_read_once_however_many_files_patchkit_added(tree, monkeypatch):
    # Each file recorded as added is checked against the release's RECORD: read once per load,
    # not once per added file (a diff creating many files made `status` re-read it for each).
    state = sample()
    state.files.update({f"sglang/added_{n}.py": FileRecord(pristine=None, patched=H2, patches=[FIX], digests={FIX: H3})
                        for n in range(20)})
    state_mod.save(tree.site, state)
    reads: list[str] = []
    real = Path.read_text

    def counted(path: Path, *args, **kwargs) -> str:
        if path.name == "RECORD":
            reads.append(str(path))
        return real(path, *args, **kwargs)

    monkeypatch.setattr(Path, "read_text", counted)
    assert state_mod.load(tree.site) == state
    assert len(reads) == 1, len(reads)


def test_each_refusal_is_a_real_one():
    """The valid sample passes the very checks the refusals fail (so each refusal tests one thing)."""
    state_mod.State.from_dict(copy.deepcopy(sample().to_dict()), "sample")


# --- `.patchkit/` holds plain files and folders only --------------------------------------------


@pytest.mark.parametrize("where", [".patchkit", ".patchkit/state.json", ".patchkit/backups",
                                   ".patchkit/backups/sglang/alpha.py", ".patchkit/journal.json"])
def test_a_symlink_under_patchkit_is_refused_for_every_command(tree, tmp_path, where):
    assert tree.run("apply").exit_code == 0
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "precious.py").write_text("not patchkit's\n")
    link = tree.site / where
    if link.is_dir():
        import shutil

        shutil.copytree(link, outside / "copy")
        shutil.rmtree(link)
        link.symlink_to(outside / "copy")
    else:
        if link.exists():
            (outside / "precious.py").write_bytes(link.read_bytes())
            link.unlink()
        link.symlink_to(outside / "precious.py")
    before, outside_before = snapshot(tree.site), snapshot(outside)
    for command in ("status", "apply", "revert", "clean"):
        result = tree.run(command)
        assert result.exit_code == 3, (command, result.stderr)
        assert "symlink" in result.stderr and "refuses" in result.stderr
        assert snapshot(tree.site) == before and snapshot(outside) == outside_before


def test_a_fifo_under_patchkit_is_refused(tree):
    (tree.site / ".patchkit").mkdir()
    fifo = tree.site / ".patchkit" / "state.json"
    os.mkfifo(fifo)
    # Reading a FIFO blocks until a writer comes: should the check ever go, fail, never hang.
    unblock = threading.Timer(5, lambda: os.close(os.open(fifo, os.O_WRONLY)))
    unblock.daemon = True
    unblock.start()
    try:
        with pytest.raises(UnsafeStateError, match="not a plain file or folder"):
            state_mod.load(tree.site)
    finally:
        unblock.cancel()


def test_state_file_that_is_a_folder_is_an_environment_failure(tree):
    (tree.site / ".patchkit" / "state.json").mkdir(parents=True)
    result = tree.run("status")
    assert result.exit_code == 6 and "state.json" in result.stderr and "EISDIR" in result.stderr


# --- the atomic write ------------------------------------------------------------------------


@pytest.mark.parametrize("fails", ["write", "fsync", "replace"])
def test_a_failed_save_leaves_the_old_state_and_no_temp_file(tree, monkeypatch, fails):
    old = sample()
    state_mod.save(tree.site, old)
    raw = (tree.site / ".patchkit/state.json").read_bytes()
    new = State(sglang_version="0.9.0", patches=[FIX], files={ALPHA: FileRecord(H1, H3, [FIX], {FIX: H2})})

    def no_space(*args, **kwargs):
        if fails == "replace":  # as the system call fails: naming both paths
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), args[0], None, args[1])
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    if fails == "write":
        monkeypatch.setattr(os, "fdopen", lambda fd, mode: _Failing(fd))
    else:
        monkeypatch.setattr(os, fails, no_space)
    with pytest.raises(OSError) as failed:
        state_mod.save(tree.site, new)
    assert failed.value.errno == errno.ENOSPC
    assert str(failed.value.filename).startswith(str(tree.site / ".patchkit/"))  # the file is named
    monkeypatch.undo()
    assert (tree.site / ".patchkit/state.json").read_bytes() == raw
    assert sorted(p.name for p in (tree.site / ".patchkit").iterdir()) == ["state.json"]
    assert state_mod.load(tree.site) == old


class _Failing:
    """A file object whose write fails with ENOSPC (a full disk)."""

    def __init__(self, fd: int) -> None:
        self.fd = fd

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        os.close(self.fd)
        return False

    def write(self, data):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))


def test_a_reader_sees_old_or_new_bytes_never_half(tree, monkeypatch):
    """The new bytes go to a temp file beside the state file, synced, then renamed over it."""
    state_mod.save(tree.site, sample())
    seen: list[bytes] = []
    real = os.replace

    def look(src, dst):
        seen.append((tree.site / ".patchkit/state.json").read_bytes())  # just before the rename
        assert Path(src).parent == Path(dst).parent and Path(src).name.endswith(".tmp")
        real(src, dst)

    monkeypatch.setattr(os, "replace", look)
    new = State(sglang_version="0.9.0", patches=[FIX], files={GAMMA: FileRecord(H1, H3, [FIX], {FIX: H2})})
    state_mod.save(tree.site, new)
    assert seen == [state_mod.dumps(sample())]
    assert state_mod.load(tree.site) == new


# --- runtime.dir: where patchkit wrote the runtime report, derived, never trusted ---------------


@pytest.mark.parametrize("command", ["status", "apply", "revert"])
def test_a_runtime_dir_outside_the_install_is_a_corrupt_record(scratch, tmp_path, command):
    """A record whose runtime.dir names another folder holding patchkit's plugin bytes (a matching
    hash): `revert` deleted that folder's plugin, exit 0, and left the real one in the tree."""
    tree = Synthetic(syn.make_tree(scratch / "site", overrides={"sglang/srt/plugins/__init__.py": ""}),
                     syn.write_patches(tmp_path / "patches"))
    assert tree.run("apply").exit_code == 0
    plugin = tree.site / "sglang_patchkit_runtime" / "__init__.py"
    assert plugin.is_file()
    victim = tmp_path / "victim"
    for rel in json.loads((tree.site / ".patchkit/state.json").read_text())["runtime"]["files"]:
        (victim / rel).parent.mkdir(parents=True, exist_ok=True)
        (victim / rel).write_bytes((tree.site / rel).read_bytes())
    data = json.loads((tree.site / ".patchkit/state.json").read_text())
    data["runtime"]["dir"] = str(victim)
    write_state(tree.site, data)
    before, victim_before = snapshot(tree.site), snapshot(victim)
    result = tree.run(command)
    assert result.exit_code == 1, (result.exit_code, result.stderr)
    assert result.stderr.startswith("error: ") and "runtime.dir" in result.stderr and str(victim) in result.stderr
    assert snapshot(tree.site) == before and snapshot(victim) == victim_before
