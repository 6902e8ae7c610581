"""`import libcst.matchers` at about two thirds of its cost (a fixed cost of every cold apply).

libcst.matchers defines 174 generated dataclasses without docstrings, and for each one
`dataclasses` (Python < 3.13) writes a docstring from `inspect.signature(cls)`, whose text spells
out the full Union type of every field: about a third of the whole import. While libcst.matchers
is imported here, that generated docstring is "Name(...)"; nothing else changes (the fields,
`__init__`, `__repr__` and matching are dataclasses' and libcst's own). Import this module before
anything imports libcst.matchers (patchkit.authoring.patch does, first thing).
"""

from __future__ import annotations

import sys


class _Signature:
    """Stands in for `inspect` inside `dataclasses` during the import: `signature` gives the short
    text; anything else a Python version may use there is the real `inspect`'s."""

    @staticmethod
    def signature(obj: object) -> str:
        return "(...)"

    def __getattr__(self, name: str) -> object:
        import inspect

        return getattr(inspect, name)


def _import() -> None:
    if "libcst.matchers" in sys.modules or sys.version_info >= (3, 13):
        return  # already imported; 3.13 writes these docstrings lazily
    import dataclasses

    real = dataclasses.inspect  # type: ignore[attr-defined]
    dataclasses.inspect = _Signature()  # type: ignore[attr-defined]
    try:
        import libcst.matchers  # noqa: F401
    finally:
        dataclasses.inspect = real  # type: ignore[attr-defined]


_import()
