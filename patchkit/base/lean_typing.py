"""`typing.TYPE_CHECKING` and `typing.NamedTuple` for the modules a plain `status` and a no-op
`apply` import, without importing typing (3% of a `status`'s instructions, issue 43.3).

`TYPE_CHECKING` is False at run time; mypy takes any `if TYPE_CHECKING:` as true, so those
modules import typing's names under it. `NamedTuple` is typing.NamedTuple for mypy; at run time a
class written `class Name(NamedTuple):` with annotated fields (and defaults) is made by
`collections.namedtuple`, as typing makes it: the fields in the order annotated, the defaults of
the trailing ones, the class body's docstring and methods kept, the annotations as written
(typing holds ForwardRefs of them); tests/unit/base/test_lean_typing.py compares both ways."""

from __future__ import annotations

import collections

TYPE_CHECKING = False

if TYPE_CHECKING:
    from typing import NamedTuple as NamedTuple
else:
    _KEPT_OUT = frozenset({"__annotations__", "__module__", "__qualname__", "__dict__", "__weakref__",
                           "__orig_bases__", "__static_attributes__", "__firstlineno__"})

    class _Maker(type):
        def __new__(mcs, name, bases, body):
            if not bases:  # NamedTuple itself
                return super().__new__(mcs, name, bases, body)
            fields = list(body.get("__annotations__", {}))
            defaults = [body[field] for field in fields if field in body]
            if any(field not in body for field in fields[len(fields) - len(defaults):]):
                raise TypeError(f"{name}: a field without a default follows one with a default")
            made = collections.namedtuple(name, fields, defaults=defaults, module=body.get("__module__"))
            made.__annotations__ = dict(body.get("__annotations__", {}))
            for key, value in body.items():
                if key not in _KEPT_OUT and key not in fields:
                    setattr(made, key, value)
            if "__qualname__" in body:
                made.__qualname__ = body["__qualname__"]
            return made

    class NamedTuple(metaclass=_Maker):
        pass
