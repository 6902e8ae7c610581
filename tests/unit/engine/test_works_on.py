"""works_on.static on the synthetic tree: what a change leaves undefined on V is found, at its line;
what V's own file already has is not blamed on the change (the real cases: tests/integration and
tests/behaviour test_bump_works_on.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from patchkit.engine import works_on
from testing import synthetic


def _reader(site: Path, changed: dict[str, bytes]):
    def read(rel: str) -> bytes | None:
        if rel in changed:
            return changed[rel]
        path = site / rel
        return path.read_bytes() if path.is_file() else None
    return read


def _check(site: Path, changed: dict[str, bytes]) -> list[tuple[str, int, str]]:
    files = sorted(path.relative_to(site).as_posix() for path in site.rglob("*.py"))
    found = works_on.static(sorted(changed), _reader(site, changed), _reader(site, {}), synthetic.VERSION,
                            lambda: sorted({*files, *changed}))
    return [(f.file, f.line, f.detail) for f in found]


def test_a_name_the_change_uses_that_nothing_defines(tmp_path):
    site = synthetic.make_tree(tmp_path / "site")
    old = (site / synthetic.GAMMA).read_text()
    new = old.replace("        return os.getpid()\n", "        return os.getpid() + get_global_offset()\n")
    assert _check(site, {synthetic.GAMMA: new.encode()}) == [
        (synthetic.GAMMA, 6, "breaks on 0.9.0: undefined name 'get_global_offset' (a NameError when it runs)")]


def test_an_import_of_a_name_the_module_on_v_does_not_define(tmp_path):
    """`from sglang.alpha import X` (absolute or relative) where V's alpha.py has no X and sglang has
    no submodule X; a name it does define, and a submodule, are fine."""
    site = synthetic.make_tree(tmp_path / "site")
    old = (site / synthetic.ALPHA_EXT).read_text()
    new = ("from sglang.alpha import Alpha, Gone\nfrom ..beta import Beta\nfrom .. import version\n"
           "from ..alpha import Missing\n") + old
    assert _check(site, {synthetic.ALPHA_EXT: new.encode()}) == [
        (synthetic.ALPHA_EXT, 1, "breaks on 0.9.0: `from sglang.alpha import Gone`: sglang.alpha defines no Gone on "
                                 "0.9.0 (an ImportError)"),
        (synthetic.ALPHA_EXT, 4, "breaks on 0.9.0: `from sglang.alpha import Missing`: sglang.alpha defines no "
                                 "Missing on 0.9.0 (an ImportError)")]


def test_what_v_already_leaves_undefined_is_not_the_changes(tmp_path):
    """V's own file uses an undefined name (and imports one its module lacks): a change elsewhere in
    it finds nothing; a second use of the same name is new."""
    own = "from sglang.alpha import Gone\n\n\ndef f():\n    return undefined_here\n"
    site = synthetic.make_tree(tmp_path / "site", overrides={synthetic.GAMMA: own})
    assert _check(site, {synthetic.GAMMA: (own + "\n\ndef g():\n    return 2\n").encode()}) == []
    again = own + "\n\ndef g():\n    return undefined_here\n"
    assert [item[:2] for item in _check(site, {synthetic.GAMMA: again.encode()})] == [(synthetic.GAMMA, 9)]


def test_a_syntax_error_is_named_first(tmp_path):
    site = synthetic.make_tree(tmp_path / "site")
    assert _check(site, {synthetic.BETA: b"class Beta:\n    def def step(self):\n"}) == [
        (synthetic.BETA, 2, "does not compile: invalid syntax")]


def test_module_names():
    assert works_on.module_of("sglang/srt/managers/io_struct.py") == "sglang.srt.managers.io_struct"
    assert works_on.module_of("sglang/srt/models/__init__.py") == "sglang.srt.models"
    assert works_on.module_of("sglang/srt/kernel.cuh") is None and works_on.module_of("other/x.py") is None


def _on_release(version: str, rel: str, added: str) -> list[tuple[int, str]]:
    """works_on.static of `added` put at the top of a real release's file (V's files as they are)."""
    from testing.releases import pristine

    root = pristine(version)
    new = added.encode() + (root / rel).read_bytes()

    def read(name: str) -> bytes | None:
        path = root / name
        return new if name == rel else path.read_bytes() if path.is_file() else None

    files = sorted(path.relative_to(root).as_posix() for path in (root / "sglang").rglob("*") if path.is_file())
    found = works_on.static([rel], read, lambda name: (root / name).read_bytes(), version, lambda: files)
    return [(f.line, f.detail) for f in found]


@pytest.mark.integration  # reads a real release (testing.releases.pristine): slow tier
def test_a_plain_import_of_a_module_v_lacks():
    """`import sglang.srt.X` is checked as `from sglang.srt import X` is: a module 0.5.17 lacks is an
    ImportError; a module, a package, a folder without __init__.py (weight_sync) and a compiled
    module (server/_core.cpython-311-x86_64-linux-gnu.so, whose names are not read) it has are not,
    nor is a guarded one."""
    added = ("import sglang.srt.no_such_module\nimport sglang.srt.utils.common as common\nimport sglang.srt.utils\n"
             "import sglang.srt.weight_sync\nimport sglang.srt.server._core\nfrom sglang.srt.server._core import Server\n"
             "try:\n    import sglang.srt.no_such_either\nexcept ImportError:\n    pass\n")
    assert _on_release("0.5.17", "sglang/srt/models/qwen3_5_text.py", added) == [
        (1, "breaks on 0.5.17: `import sglang.srt.no_such_module`: 0.5.17 has no module sglang.srt.no_such_module "
            "(an ImportError)")]


@pytest.mark.integration  # reads a real release (testing.releases.pristine): slow tier
def test_a_name_a_star_importing_module_lacks():
    """sglang/srt/utils/__init__.py is `from sglang.srt.utils.common import *`: a name common.py
    defines imports from sglang.srt.utils, one nothing defines does not, nor does one of common.py's
    underscored names (a star import without __all__ leaves them out); sglang.srt.distributed
    star-imports three modules."""
    added = ("from sglang.srt.utils import get_bool_env_var, is_cuda\nfrom sglang.srt.utils import no_such_name\n"
             "from sglang.srt.utils import _load_image\nfrom sglang.srt.utils.common import _load_image as load\n"
             "from sglang.srt.distributed import get_tp_group, tensor_model_parallel_all_reduce\n")
    assert _on_release("0.5.17", "sglang/srt/models/qwen3_5_text.py", added) == [
        (2, "breaks on 0.5.17: `from sglang.srt.utils import no_such_name`: sglang.srt.utils defines no no_such_name "
            "on 0.5.17 (an ImportError)"),
        (3, "breaks on 0.5.17: `from sglang.srt.utils import _load_image`: sglang.srt.utils defines no _load_image "
            "on 0.5.17 (an ImportError)")]
