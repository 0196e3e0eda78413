"""The ``__repr__``, ``__eq__`` and ``__hash__`` the attrs classes a server's import
makes share (issue 44).

attrs generates and compiles these methods for each class (``attr/_make.py``:
``_make_repr_script``, ``_make_eq_script``, ``_make_hash_script``): about 0.14 ms of CPU
a class for the ``__repr__`` and 0.07 ms for ``__eq__`` and ``__hash__``, some 8 ms over
the classes ``import mockdcp.server`` makes, for methods that run when something is
printed or compared. A class on that path sets ``__repr__ = fields_repr`` (and, where
attrs would make them, ``__eq__ = fields_eq`` and ``__hash__ = fields_hash``) instead:
attrs then makes none (its ``auto_detect``), and these do what attrs' would, reading
``attrs.fields`` when they are called: the same text (``Name(field=value, ...)``, the
fields attrs would show, each field's own ``repr=`` callable, ``...`` for an object
already being shown), equality of the same class on the fields attrs compares (each
field's ``eq_key``), and a hash of those fields.
"""

from __future__ import annotations

import threading

import attrs

_showing = threading.local()


def fields_repr(self: attrs.AttrsInstance) -> str:
    """``self`` as attrs' generated ``__repr__`` shows it."""
    showing: set[int] | None = getattr(_showing, "ids", None)
    if showing is None:
        showing = _showing.ids = set()
    if id(self) in showing:
        return "..."
    showing.add(id(self))
    try:
        parts = []
        for field in attrs.fields(type(self)):
            if field.repr is False:
                continue
            value = getattr(self, field.name, attrs.NOTHING)
            shown = repr(value) if field.repr is True else field.repr(value)
            parts.append(f"{field.name}={shown}")
        name = type(self).__qualname__.rsplit(">.", 1)[-1]
        return f"{name}({', '.join(parts)})"
    finally:
        showing.discard(id(self))


def fields_eq(self: attrs.AttrsInstance, other: object) -> bool:
    """attrs' generated ``__eq__``: ``NotImplemented`` for another class, else each
    compared field ``==`` (through its ``eq_key``) in turn."""
    if other.__class__ is not self.__class__:
        unlike: bool = NotImplemented  # Python then asks ``other``
        return unlike
    for field in attrs.fields(type(self)):
        if not field.eq:
            continue
        mine, theirs = getattr(self, field.name), getattr(other, field.name)
        if field.eq_key is not None:
            mine, theirs = field.eq_key(mine), field.eq_key(theirs)
        equal = mine == theirs  # as attrs compares: ``==``, not ``!=``
        if not equal:
            return False
    return True


def fields_hash(self: attrs.AttrsInstance) -> int:
    """attrs' generated ``__hash__`` of a frozen class: of its class and the fields
    ``fields_eq`` compares (each through its ``eq_key``)."""
    values: list[object] = [type(self).__qualname__]
    for field in attrs.fields(type(self)):
        if field.hash is True or (field.hash is None and field.eq):
            value = getattr(self, field.name)
            values.append(value if field.eq_key is None else field.eq_key(value))
    return hash(tuple(values))
