"""works_on.static on the synthetic tree: what a change leaves undefined on V is found, at its line;
what V's own file already has is not blamed on the change (the real cases: tests/integration and
tests/behaviour test_bump_works_on.py)."""

from __future__ import annotations

from pathlib import Path

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

