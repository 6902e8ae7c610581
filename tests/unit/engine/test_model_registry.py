"""model_registry: SGLang's model registry read from its files. The rule read from real releases'
registry.py (the three shapes 0.5.10-0.5.23 have); the classes a module registers; a duplicate a
change brings (the real 0.5.17 case: tests/integration/test_bump_works_on.py)."""

from __future__ import annotations

import ast
import textwrap

import pytest

from patchkit.engine import model_registry
from testing.releases import pristine

RULE = model_registry.Rule(("sglang/srt/models",), "EntryClass", "Duplicated model implementation for", False)


@pytest.mark.integration  # reads a real release (testing.releases.pristine): slow tier
@pytest.mark.parametrize("version", ["0.5.10", "0.5.17", "0.5.23"])
def test_the_rule_is_read_from_the_release(version):
    """0.5.10 (no licence header), 0.5.17 (`assert (...), f"..."`), 0.5.23 (the assert's message
    in parentheses, the default models loaded lazily by `import_model_classes("sglang.srt.models")`)."""
    source = (pristine(version) / model_registry.REGISTRY_FILE).read_bytes()
    assert model_registry.rule(source) == RULE


@pytest.mark.integration  # reads a real release (testing.releases.pristine): slow tier
def test_a_registry_that_raises_nothing_on_a_duplicate_gets_no_check():
    """0.5.17's registry with its two duplicate asserts taken out (a later name overwriting an
    earlier one): nothing to find; and a release without a registry."""
    source = (pristine("0.5.17") / model_registry.REGISTRY_FILE).read_text()
    tree = ast.parse(source)
    lines = source.splitlines()
    for node in sorted((n for n in ast.walk(tree) if isinstance(n, ast.Assert)), key=lambda n: -n.lineno):
        indent = lines[node.lineno - 1][:node.col_offset]
        lines[node.lineno - 1:node.end_lineno] = [indent + "pass"]
    assert model_registry.rule(source.encode()) == RULE
    assert model_registry.rule("\n".join(lines).encode()) is None
    assert model_registry.rule(None) is None


def test_which_modules_it_imports():
    assert RULE.imports("sglang/srt/models/qwen3_5_text.py")
    assert not RULE.imports("sglang/srt/models/__init__.py")
    assert not RULE.imports("sglang/srt/models/deepseek_common/utils.py")  # a sub-package: iter_modules skips it
    assert not RULE.imports("sglang/srt/layers/linear.py") and not RULE.imports("sglang/srt/models/README.md")


def _registered(code: str) -> list[tuple[str, int]]:
    return model_registry.registrations(ast.parse(textwrap.dedent(code)), "EntryClass")


def test_what_a_module_registers():
    """One class or a list; by the class's own name (an import under another name, a plain alias);
    the last assignment, with what is added to it after."""
    assert _registered("class A: pass\nEntryClass = A\n") == [("A", 2)]
    assert _registered("""\
        from sglang.srt.models.other import Real as Alias
        class A: pass
        B = A
        EntryClass = [Gone]
        EntryClass = [
            Alias,
            B,
        ]
        EntryClass += [C]
        EntryClass.append(models.D)
        """) == [("Real", 6), ("A", 7), ("C", 9), ("D", 10)]
    assert _registered("try:\n    import x\nexcept ImportError:\n    x = None\nelse:\n    EntryClass = [X]\n") == [
        ("X", 6)]
    assert _registered("def f():\n    EntryClass = [X]\n") == []


def _duplicates(version: str, changed: dict[str, bytes]) -> list[tuple[str, int, str, str, int]]:
    root = pristine(version)

    def read(rel: str) -> bytes | None:
        return changed[rel] if rel in changed else (root / rel).read_bytes() if (root / rel).is_file() else None

    trees = {rel: (ast.parse(data), ast.parse((root / rel).read_bytes()) if (root / rel).is_file() else None)
             for rel, data in changed.items()}
    files = sorted(p.relative_to(root).as_posix() for p in (root / "sglang/srt/models").glob("*.py"))
    found = model_registry.duplicates(trees, read, lambda: files)
    return [(d.file, d.line, d.name, d.other_file, d.other_line) for d in found]


@pytest.mark.integration  # reads a real release (testing.releases.pristine): slow tier
def test_a_registration_moved_or_new_on_a_real_release():
    """On 0.5.17, qwen3_5_text.py registers Qwen3_5ForCausalLM (line 208): moved from there to
    qwen3_5.py by one change, nothing is registered twice; a new model file registering it is a
    duplicate, named at both places; a change to a model module that registers nothing new finds
    nothing without reading another module."""
    text, qwen = "sglang/srt/models/qwen3_5_text.py", "sglang/srt/models/qwen3_5.py"
    root = pristine("0.5.17")
    entries = b"EntryClass = [Qwen3_5MoeForConditionalGeneration, Qwen3_5ForConditionalGeneration]\n"
    moved = {text: (root / text).read_bytes().replace(b"Qwen3_5MoeForCausalLM, Qwen3_5ForCausalLM]",
                                                      b"Qwen3_5MoeForCausalLM]"),
             qwen: (root / qwen).read_bytes().replace(entries, entries + b"EntryClass += [Qwen3_5ForCausalLM]\n")}
    assert _duplicates("0.5.17", moved) == []
    new = "sglang/srt/models/my_qwen.py"
    assert _duplicates("0.5.17", {new: b"class Qwen3_5ForCausalLM:\n    pass\n\n\nEntryClass = Qwen3_5ForCausalLM\n"}) \
        == [(new, 5, "Qwen3_5ForCausalLM", text, 208)]
    assert _duplicates("0.5.17", {qwen: b"# a note\n" + (root / qwen).read_bytes()}) == []
