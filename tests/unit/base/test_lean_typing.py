"""lean_typing.NamedTuple makes at run time the class typing.NamedTuple makes (the modules a plain
`status` imports take it from there, so that typing is not imported)."""

from __future__ import annotations

import typing
from pathlib import Path

import pytest

from patchkit.base import lean_typing
from patchkit.base.lean_typing import NamedTuple


def pair(base: type) -> type:
    """One class body, made with `base`."""

    class Pair(base):  # type: ignore[misc, valid-type]
        """Two values and a third."""

        origin: str
        folder: Path
        only: str | None = None
        count: int = 0

        def describe(self) -> str:
            return f"{self.origin} at {self.folder}"

        @property
        def named(self) -> bool:
            return self.only is not None

    return Pair


def test_the_class_is_typings_own():
    ours, theirs = pair(NamedTuple), pair(typing.NamedTuple)
    assert ours._fields == theirs._fields == ("origin", "folder", "only", "count")
    assert ours._field_defaults == theirs._field_defaults == {"only": None, "count": 0}
    assert ours.__doc__ == theirs.__doc__ and ours.__name__ == theirs.__name__ == "Pair"
    assert ours.__qualname__ == theirs.__qualname__ and ours.__module__ == theirs.__module__ == __name__
    # (the annotations as written: typing holds ForwardRefs of the same strings)
    assert ours.__annotations__ == {name: ref.__forward_arg__ for name, ref in theirs.__annotations__.items()}
    assert ours.__mro__[1:] == theirs.__mro__[1:] == (tuple, object)
    for made in (ours("a", Path("/x")), theirs("a", Path("/x"))):
        assert made == ("a", Path("/x"), None, 0) and made.describe() == "a at /x" and not made.named
        assert repr(made) == "Pair(origin='a', folder=PosixPath('/x'), only=None, count=0)"
        assert made._replace(only="f").named and made._asdict()["count"] == 0
        with pytest.raises(AttributeError):
            made.origin = "b"  # type: ignore[misc]
    with pytest.raises(TypeError):
        ours()  # type: ignore[call-arg]


def test_a_field_without_a_default_after_one_with_is_refused_as_typing_refuses_it():
    for base in (NamedTuple, typing.NamedTuple):
        with pytest.raises(TypeError):
            class Bad(base):  # type: ignore[misc, valid-type]
                first: int = 0
                second: int


def test_type_checking_is_false_at_run_time():
    assert lean_typing.TYPE_CHECKING is False
