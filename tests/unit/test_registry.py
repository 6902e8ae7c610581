"""The registry: ids, the declared stacking order on shared files."""

from __future__ import annotations

import pytest

from patchkit import registry
from patchkit.errors import PatchkitError


def test_every_shared_file_has_a_declared_stacking_order():
    assert registry.unordered_pairs(registry.load_all()) == []


class _P:
    TARGETS = ("f.py",)
    STACK_AFTER: tuple[str, ...] = ()


def _patch(pid: str, after: tuple[str, ...] = ()) -> type:
    return type(pid, (_P,), {"ID": pid, "STACK_AFTER": after})


def test_stack_follows_declarations_not_names():
    classes = {"a": _patch("a", ("z",)), "z": _patch("z")}
    assert registry.stack(["a", "z"], classes) == ["z", "a"]
    assert registry.unordered_pairs(list(classes.values())) == []
    assert registry.unordered_pairs([_patch("a"), _patch("b")]) == [("f.py", "a", "b")]


def test_a_cycle_is_an_error():
    classes = {"a": _patch("a", ("b",)), "b": _patch("b", ("a",))}
    with pytest.raises(PatchkitError, match="cycle"):
        registry.stack(["a", "b"], classes)
