"""A small synthetic SGLang tree and a tiny patch set, for unit tests of the core (engine,
state file, lock, transaction) that run in milliseconds instead of on a 1,558-file release.

The tree is what patchkit looks at in a real install: `sglang/__init__.py`, `sglang/version.py`,
a `sglang-V.dist-info` with METADATA and a RECORD holding real hashes, and a few tiny target
files. Its version has no manifest, so every patch is judged by its probes on the code (with
the "not verified by patchkit" warning). The patch set is a folder of patch modules written on
the real Patch API and loaded the way users load theirs (`--patches DIR`):

| id | files | on a fresh tree |
| --- | --- | --- |
| `syn-fix` | `sglang/alpha.py`, `sglang/srt/alpha_ext.py` | pending (applies to both files; declares PARTS: only `Alpha.run` is parsed) |
| `syn-upstream` | `sglang/beta.py` | upstream-fixed (the tree holds upstream's own fix) |
| `syn-absent` | `sglang/delta.py` | not-applicable (no such file) |
| `syn-stack-b`, then `syn-stack-a` | `sglang/gamma.py` | pending; `syn-stack-a` declares `STACK_AFTER = ("syn-stack-b",)`, the reverse of the alphabet |

Patch ids start with `syn-`, so none clashes with a built-in patch (whose target files the
synthetic tree does not hold: the built-ins are all not-applicable there).
"""

from __future__ import annotations

import base64
import hashlib
import textwrap
from pathlib import Path

VERSION = "0.9.0"  # no manifest: judged by the probes

ALPHA = "sglang/alpha.py"
ALPHA_EXT = "sglang/srt/alpha_ext.py"
BETA = "sglang/beta.py"
GAMMA = "sglang/gamma.py"
DELTA = "sglang/delta.py"  # named by syn-absent, never present
TARGETS = (ALPHA, ALPHA_EXT, BETA, GAMMA)

FIX, UPSTREAM, ABSENT, STACK_A, STACK_B = "syn-fix", "syn-upstream", "syn-absent", "syn-stack-a", "syn-stack-b"
IDS = (ABSENT, FIX, STACK_A, STACK_B, UPSTREAM)  # registry (id) order

_ALPHA = '''\
"""A target file."""


class Alpha:
    def run(self, x):
        return x + 1
'''

SOURCES: dict[str, str] = {
    "sglang/__init__.py": "from sglang.version import __version__\n",
    "sglang/version.py": '__version__ = "{version}"\n',
    ALPHA: _ALPHA,
    ALPHA_EXT: _ALPHA.replace("A target file", "A second target file of the same patch"),
    BETA: '''\
class Beta:
    def step(self, slot):
        if slot is None:  # upstream's own fix
            return None
        return slot.value
''',
    GAMMA: '''\
import os


class Gamma:
    def run(self):
        return os.getpid()
''',
}

# Alpha with no `run`: the class is there (the patch is meant for it) but its anchor is not.
ALPHA_WITHOUT_ANCHOR = '''\
class Alpha:
    def walk(self, x):
        return x
'''


def memory_folder() -> Path | None:
    """/dev/shm when it is a writable folder (a memory file system on Linux), else None."""
    import os

    shm = Path("/dev/shm")
    return shm if shm.is_dir() and os.access(shm, os.W_OK | os.X_OK) else None


def _record_hash(data: bytes) -> str:
    return "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


def write_dist_info(site: Path, version: str) -> Path:
    """`sglang-V.dist-info` with METADATA and a RECORD listing every file under `sglang/` with
    its real hash and size (as pip writes it)."""
    info = site / f"sglang-{version}.dist-info"
    info.mkdir(parents=True, exist_ok=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: sglang\nVersion: {version}\n")
    rows = []
    for path in sorted((site / "sglang").rglob("*")):
        if path.is_file():
            data = path.read_bytes()
            rows.append(f"{path.relative_to(site).as_posix()},{_record_hash(data)},{len(data)}")
    rows += [f"{info.name}/METADATA,{_record_hash((info / 'METADATA').read_bytes())},"
             f"{len((info / 'METADATA').read_bytes())}", f"{info.name}/RECORD,,"]
    (info / "RECORD").write_text("\n".join(rows) + "\n")
    return info


def make_tree(site: Path, version: str = VERSION, overrides: dict[str, str | None] | None = None) -> Path:
    """A synthetic SGLang install in `site` (created); `overrides` replaces (or, with None,
    leaves out) some files' text."""
    sources = {**SOURCES, **(overrides or {})}
    for rel, text in sources.items():
        if text is None:
            continue
        path = site / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text.replace("{version}", version) if rel == "sglang/version.py" else text)
    write_dist_info(site, version)
    return site


def reinstall(site: Path, version: str = VERSION, overrides: dict[str, str | None] | None = None) -> None:
    """What `pip install --force-reinstall` (or `--upgrade` to `version`) does to the tree: the
    package and its metadata replaced, anything else in the folder (`.patchkit/`) left alone."""
    import shutil

    shutil.rmtree(site / "sglang")
    for info in site.glob("sglang-*.dist-info"):
        shutil.rmtree(info)
    make_tree(site, version, overrides)


def uninstall(site: Path) -> None:
    """What `pip uninstall sglang` removes: the package and its metadata."""
    import shutil

    shutil.rmtree(site / "sglang")
    for info in site.glob("sglang-*.dist-info"):
        shutil.rmtree(info)


# --- the patch set ------------------------------------------------------------------------------

_HEADER = '''\
from __future__ import annotations

import libcst as cst
import libcst.matchers as m

from patchkit.authoring.edits import edit, prepend_to_block
from patchkit.authoring.patch import Patch, top_classes
from patchkit.authoring.template import Snippet
'''

PATCHES: dict[str, str] = {
    "syn_fix": _HEADER + '''
FILES = ("sglang/alpha.py", "sglang/srt/alpha_ext.py")
FIX = Snippet("""
    x = abs(x)  # patchkit syn-fix {version}
""", version="v1")


class SynFix(Patch):
    ID = "syn-fix"
    TITLE = "Alpha.run takes the absolute value first"
    RATIONALE = "a synthetic patch that applies to two files"
    APPLIES_TO = ">=0.9"
    TARGETS = FILES
    SCOPE = {rel: ("Alpha",) for rel in FILES}
    PARTS = {rel: ("Alpha.run",) for rel in FILES}  # the engine parses only this method
    MARKS = {rel: (("Alpha", FIX),) for rel in FILES}

    def is_fixed_upstream(self, path: str, tree: cst.Module) -> bool:
        return False

    @m.call_if_inside(m.ClassDef(name=m.Name("Alpha")))
    @edit(m.FunctionDef(name=m.Name("run")), "Alpha.run()")
    def fix(self, original_node: cst.FunctionDef, updated_node: cst.FunctionDef) -> cst.FunctionDef:
        return prepend_to_block(updated_node, FIX.fill())
''',
    "syn_upstream": _HEADER + '''
BETA = "sglang/beta.py"
GUARD = Snippet("""
    if slot is None:  # patchkit syn-upstream
        return 0
""")
UPSTREAM_FIX = Snippet("""
    if slot is None:
        return None
""")


class SynUpstream(Patch):
    ID = "syn-upstream"
    TITLE = "Beta.step survives a missing slot"
    RATIONALE = "a synthetic patch whose fix upstream already made"
    APPLIES_TO = ">=0.9"
    TARGETS = (BETA,)
    SCOPE = {BETA: ("Beta",)}
    MARKS = {BETA: (("Beta", GUARD),)}

    def is_fixed_upstream(self, path: str, tree: cst.Module) -> bool:
        return any(UPSTREAM_FIX.present_in(cls) for cls in top_classes(tree, "Beta"))

    @m.call_if_inside(m.ClassDef(name=m.Name("Beta")))
    @edit(m.FunctionDef(name=m.Name("step")), "Beta.step()")
    def fix(self, original_node: cst.FunctionDef, updated_node: cst.FunctionDef) -> cst.FunctionDef:
        return prepend_to_block(updated_node, GUARD.fill())
''',
    "syn_absent": _HEADER + '''
DELTA = "sglang/delta.py"
MARK = Snippet("""
    patched = True  # patchkit syn-absent
""")


class SynAbsent(Patch):
    ID = "syn-absent"
    TITLE = "A patch for a file this release does not have"
    RATIONALE = "a synthetic patch that is not applicable"
    APPLIES_TO = ">=0.9"
    TARGETS = (DELTA,)
    MARKS = {DELTA: ((None, MARK),)}

    def is_fixed_upstream(self, path: str, tree: cst.Module) -> bool:
        return False

    @edit(m.Module(), "the module")
    def fix(self, original_node: cst.Module, updated_node: cst.Module) -> cst.Module:
        return updated_node.with_changes(body=[*updated_node.body, *MARK.fill()])
''',
}


def _stacked(pid: str, class_name: str, line: str, title: str, after: tuple[str, ...] = ()) -> str:
    """A patch module that prepends `line` to Gamma.run (the two patches stacked on gamma.py)."""
    return _HEADER + f'''
GAMMA = "sglang/gamma.py"
LINE = Snippet("""
    {line}  # patchkit {pid}
""")


class {class_name}(Patch):
    ID = "{pid}"
    TITLE = "{title}"
    RATIONALE = "a synthetic patch on the file two patches share"
    APPLIES_TO = ">=0.9"
    TARGETS = (GAMMA,)
    SCOPE = {{GAMMA: ("Gamma",)}}
    MARKS = {{GAMMA: (("Gamma", LINE),)}}
    STACK_AFTER = {after!r}

    def is_fixed_upstream(self, path: str, tree: cst.Module) -> bool:
        return False

    @m.call_if_inside(m.ClassDef(name=m.Name("Gamma")))
    @edit(m.FunctionDef(name=m.Name("run")), "Gamma.run()")
    def fix(self, original_node: cst.FunctionDef, updated_node: cst.FunctionDef) -> cst.FunctionDef:
        return prepend_to_block(updated_node, LINE.fill())
'''


PATCHES["syn_stack_b"] = _stacked(STACK_B, "SynStackB", 'self.b = "first"', "The first of two patches on gamma.py")
PATCHES["syn_stack_a"] = _stacked(STACK_A, "SynStackA", 'self.a = "second"',
                                  "The second of two patches on gamma.py (declared, not alphabetical)", (STACK_B,))


def write_patches(folder: Path, fix_version: str = "v1") -> Path:
    """The patch set as a folder of patch modules (for `--patches DIR`). `fix_version` changes
    syn-fix's inserted code (and so its source digest): "v2" is a newer release of the set,
    under which a tree patched by "v1" is `outdated`."""
    folder.mkdir(parents=True, exist_ok=True)
    for name, source in PATCHES.items():
        if name == "syn_fix":
            source = source.replace('version="v1"', f'version="{fix_version}"')
        (folder / f"{name}.py").write_text(source)
    return folder


# What each synthetic file becomes once patched (the expected bytes of the engine's tests).
def _prepend(text: str, method: str, line: str) -> str:
    head = f"    def {method}(self"
    at = text.index(head)
    end = text.index("\n", at) + 1
    return text[:end] + textwrap.indent(line + "\n", " " * 8) + text[end:]


def patched_alpha(rel: str = ALPHA, fix_version: str = "v1") -> str:
    return _prepend(SOURCES[rel], "run", f"x = abs(x)  # patchkit syn-fix {fix_version}")


PATCHED_GAMMA_B = _prepend(SOURCES[GAMMA], "run", 'self.b = "first"  # patchkit syn-stack-b')
# syn-stack-a is applied after syn-stack-b, so its line comes first in the method.
PATCHED_GAMMA_BA = _prepend(PATCHED_GAMMA_B, "run", 'self.a = "second"  # patchkit syn-stack-a')


# --- driving the CLI on a synthetic tree ----------------------------------------------------------


class Synthetic:
    """A synthetic tree and the patch set the CLI loads for it (`--patches`)."""

    def __init__(self, site: Path, patches: Path) -> None:
        self.site = site
        self.patches = patches

    def run(self, *args: str | Path):
        from testing.cli import run

        return run("--patches", self.patches, *args[:1], "--site-packages", self.site, *args[1:])

    def states(self) -> dict[str, str]:
        """{syn- patch id: state} from `patchkit status --json`."""
        result = self.run("status", "--json")
        assert result.exit_code == 0, result.stderr
        return {p["id"]: p["state"] for p in result.json()["patches"] if p["id"].startswith("syn-")}

    def recorded(self) -> list[str] | None:
        """The patch ids the state file records, or None when there is no state file."""
        import json

        path = self.site / ".patchkit" / "state.json"
        return json.loads(path.read_text())["patches"] if path.exists() else None

    def text(self, rel: str) -> str:
        return (self.site / rel).read_text()

    def pristine(self, rel: str) -> str:
        return SOURCES[rel]


# --- a large record, for the runtime plugin's cost ------------------------------------------------


def large_record(ids: int, files: int) -> dict:
    """A state record (the shape `apply` writes) of `ids` patches and `files` recorded files
    `sglang/srt/large_NNNNNN.py` (none on disk: each is judged drifted), file i changed by patch
    i mod `ids`: what a record of that size costs the runtime plugin (issue 41.5: 5,000 x 5,000)."""
    sha = "a" * 64
    pids = [f"large-{i:06d}" for i in range(ids)]
    entries = {}
    for i in range(files):
        pid = pids[i % ids]
        entries[f"sglang/srt/large_{i:06d}.py"] = {"pristine_sha256": sha, "patched_sha256": "b" * 64,
                                                   "patches": [pid], "patch_sha256": {pid: sha}}
    return {"schema": 3, "patchkit_version": "0.1.0", "sglang_version": VERSION, "patches": pids,
            "files": entries, "runtime": {"dir": None, "files": {}}}
