"""A patch that cannot be planned says whether a local edit or an upstream change is the cause
(its files against the release's own bytes: the dist-info RECORD) and names the next command."""

from __future__ import annotations

import pytest

from testing.cli import run
from testing.diffs import git_diff
from testing.releases import pristine, snapshot

pytestmark = pytest.mark.integration

OFFLOADER = "sglang/srt/utils/offloader.py"
ID = "offloader-tied"


@pytest.fixture
def offloader_patch(tmp_path, patchkit_home):
    """Upstream's own 0.5.20 -> 0.5.21 change to offloader.py, made against 0.5.20 (the test
    cache's wheels hold its pre-image)."""
    from testing.releases import HOME

    (patchkit_home / "wheels").symlink_to(HOME / "wheels")
    path = tmp_path / "patches" / f"0001-{ID}.patch"
    path.parent.mkdir()
    path.write_bytes(git_diff({OFFLOADER: (pristine("0.5.20") / OFFLOADER).read_bytes()},
                              {OFFLOADER: (pristine("0.5.21") / OFFLOADER).read_bytes()}))
    return path


def detail(patch, site, pid: str = ID) -> str:
    result = run("--patches", patch, "status", "--site-packages", site, "--json")
    assert result.exit_code == 0, result.stderr
    found = next(p for p in result.json()["patches"] if p["id"] == pid)
    assert found["state"] == "failed", found
    return found["detail"]


def test_upstream_change_on_a_pristine_release(release, offloader_patch):
    # 0.5.22 changed OffloaderV2.__init__ in the diff's lines: the file is the release's own.
    site = release("0.5.22", extra=(OFFLOADER,))
    said = detail(offloader_patch, site)
    assert "cause: an upstream change" in said and "local edit" not in said, said
    assert f"`patchkit rebase {offloader_patch} --to 0.5.22`" in said and f"`--skip {ID}`" in said
    before = snapshot(site)
    result = run("--patches", offloader_patch, "apply", "--site-packages", site)
    assert result.exit_code == 1 and "cause: an upstream change" in result.stderr, result.stderr
    assert snapshot(site) == before


def test_local_edit_that_removes_the_anchor(release, offloader_patch):
    # On 0.5.20 the diff applies; a hand edit renames the function it changes.
    site = release("0.5.20", extra=(OFFLOADER,))
    path = site / OFFLOADER
    code = path.read_bytes()
    assert code.count(b"def create_offloader(") == 1
    path.write_bytes(code.replace(b"def create_offloader(", b"def make_offloader("))
    said = detail(offloader_patch, site)
    assert f"cause: a local edit ({OFFLOADER} is not SGLang 0.5.20's release file)" in said, said
    # Into that folder (no venv owns it): a bare `pip install` would reinstall into the shell's own Python.
    assert f"`pip install --force-reinstall --no-deps --upgrade --target {site} sglang==0.5.20`" in said, said
    assert f"`--skip {ID}`" in said
    assert "upstream change" not in said
    before = snapshot(site)
    result = run("--patches", offloader_patch, "apply", "--site-packages", site)
    assert result.exit_code == 1 and "cause: a local edit" in result.stderr, result.stderr
    assert snapshot(site) == before


# A Python patch anchored on create_offloader, which 0.5.14-0.5.18 name create_offloader_from_server_args.
AST_PATCH = '''
import libcst as cst
import libcst.matchers as m

from patchkit.authoring.edits import edit
from patchkit.authoring.patch import Patch


class OffloaderMark(Patch):
    ID = "offloader-mark"
    TITLE = "A decorator on create_offloader"
    RATIONALE = "Anchored on a function upstream renamed."
    APPLIES_TO = ">=0.5.10"
    TARGETS = ("sglang/srt/utils/offloader.py",)

    def is_applied(self, path, tree):
        return bool(m.findall(tree, m.FunctionDef(name=m.Name("create_offloader"), decorators=[m.AtLeastN(n=1)])))

    def is_fixed_upstream(self, path, tree):
        return False

    @edit(m.FunctionDef(name=m.Name("create_offloader")), "create_offloader")
    def mark(self, original_node, updated_node):
        return updated_node.with_changes(decorators=[cst.Decorator(cst.Name("staticmethod"))])
'''


@pytest.fixture
def ast_patch(tmp_path):
    folder = tmp_path / "ast-patches"
    folder.mkdir()
    (folder / "offloader_mark.py").write_text(AST_PATCH)
    return folder


def test_python_patch_whose_anchor_upstream_renamed(release, ast_patch):
    said = detail(ast_patch, release("0.5.17", extra=(OFFLOADER,)), "offloader-mark")
    assert "anchor not found: create_offloader" in said, said
    assert "cause: an upstream change" in said and "`--skip offloader-mark`" in said
    # No release applies it (a folder patch): `track` from a release it applies to, the run's --patches kept.
    assert f"`patchkit --patches {ast_patch} track --from A --to 0.5.17` (A: a release it applies to)" in said, said
    site = release("0.5.20", extra=(OFFLOADER,))
    before = run("--patches", ast_patch, "status", "--site-packages", site, "--json").json()["patches"]
    assert next(p for p in before if p["id"] == "offloader-mark")["state"] == "pending"  # its anchor is there
    path = site / OFFLOADER
    path.write_bytes(path.read_bytes().replace(b"def create_offloader(", b"def make_offloader("))
    said = detail(ast_patch, site, "offloader-mark")
    assert "anchor not found" in said and "cause: a local edit" in said, said
