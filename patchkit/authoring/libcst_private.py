"""The private names of libcst (and one of `dataclasses`) that patchkit builds on, in one place,
with why: libcst has no public API for any of them, and each buys the speed of a cold `apply`.

- `dataclasses.inspect`, while `libcst.matchers` is first imported (`_import_matchers`): that
  module defines 174 generated dataclasses without docstrings, and for each one `dataclasses`
  (Python < 3.13) writes a docstring from `inspect.signature(cls)`, whose text spells out the full
  Union type of every field: a third of the import. During that import the docstring is
  "Name(...)"; the fields, `__init__`, `__repr__` and matching are dataclasses' and libcst's own.
  The swap is process-wide, for the length of one import, on the first import of patchkit's patch
  API (before any command runs); it is put back in `finally`.
- What `@m.visit` / `@m.leave` / `@m.call_if_inside` / `@m.call_if_not_inside` write on a method
  (`libcst.matchers._decorators`): `Patch` gathers a class's decorated methods once per class
  (`decorations`) instead of `MatcherDecoratableTransformer.__init__`'s `dir()` of every instance
  (~30 ms a patch).
- `_check_types` (`libcst.matchers._visitors`): libcst's check that a decorated method's
  annotations fit its matcher, which that `__init__` runs; `Patch` runs it once per class.
- The transformer's `_extra_visit_funcs`, `_extra_leave_funcs` and `_matchers`, which libcst's own
  `on_visit` / `on_leave` read (the expression pass): `set_up` sets them as that `__init__` would.

Each is held by tests/unit/authoring/test_libcst_contract.py, which
tests/integration/test_libcst_releases.py runs on every libcst release pyproject.toml allows
(.ci/run runs the unit tier on the oldest too): a renamed or re-meant name fails there, loudly,
instead of mis-gating the patches' edits. This module is imported before anything imports
libcst.matchers (patchkit.authoring.patch does, first thing).
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Mapping, Sequence
from typing import Any


class _Signature:
    """Stands in for `inspect` inside `dataclasses` during the import: `signature` gives the short
    text; anything else a Python version may use there is the real `inspect`'s."""

    @staticmethod
    def signature(obj: object) -> str:
        return "(...)"

    def __getattr__(self, name: str) -> object:
        import inspect

        return getattr(inspect, name)


def _import_matchers() -> None:
    if "libcst.matchers" in sys.modules or sys.version_info >= (3, 13):
        return  # already imported; 3.13 writes these docstrings lazily
    import dataclasses

    real = dataclasses.inspect  # type: ignore[attr-defined]
    dataclasses.inspect = _Signature()  # type: ignore[attr-defined]
    try:
        import libcst.matchers  # noqa: F401
    finally:
        dataclasses.inspect = real  # type: ignore[attr-defined]


_import_matchers()

import libcst.matchers as m  # noqa: E402
from libcst.matchers._decorators import (  # noqa: E402
    CONSTRUCTED_LEAVE_MATCHER_ATTR, CONSTRUCTED_VISIT_MATCHER_ATTR, VISIT_NEGATIVE_MATCHER_ATTR, VISIT_POSITIVE_MATCHER_ATTR,
)
from libcst.matchers._visitors import _check_types  # noqa: E402

Matchers = tuple[m.BaseMatcherNode, ...]


def decorations(value: object) -> tuple[Matchers, Matchers, Matchers, Matchers]:
    """What libcst's decorators wrote on a class member: its @m.visit matchers, its @m.leave
    matchers, its call_if_inside gates and its call_if_not_inside gates (all empty: not decorated)."""
    return (tuple(getattr(value, CONSTRUCTED_VISIT_MATCHER_ATTR, ())), tuple(getattr(value, CONSTRUCTED_LEAVE_MATCHER_ATTR, ())),
            tuple(getattr(value, VISIT_POSITIVE_MATCHER_ATTR, ())), tuple(getattr(value, VISIT_NEGATIVE_MATCHER_ATTR, ())))


def set_up(transformer: m.MatcherDecoratableTransformer,
           visit: Mapping[m.BaseMatcherNode, Sequence[Callable[..., Any]]],
           leave: Mapping[m.BaseMatcherNode, Sequence[Callable[..., Any]]],
           gates: Sequence[m.BaseMatcherNode], check: bool) -> None:
    """What `MatcherDecoratableTransformer.__init__` sets up for libcst's own pass to read: the
    bound callbacks per matcher and the gates (none entered yet); with `check`, libcst's check of
    the callbacks' annotations (an edit annotated for a node its matcher never gives is refused)."""
    transformer._extra_visit_funcs = {matcher: tuple(funcs) for matcher, funcs in visit.items()}
    transformer._extra_leave_funcs = {matcher: tuple(funcs) for matcher, funcs in leave.items()}
    transformer._matchers = dict.fromkeys(gates)
    if check:
        _check_types(transformer._extra_visit_funcs, "visit", expected_param_count=1, expected_none_return=True)
        _check_types(transformer._extra_leave_funcs, "leave", expected_param_count=2, expected_none_return=False)


def leave_every_gate(transformer: m.MatcherDecoratableTransformer) -> None:
    """Before a new pass: no gate entered (libcst's pass reads them from `_matchers`)."""
    transformer._matchers = dict.fromkeys(transformer._matchers)
