"""One ``__repr__`` for the attrs classes a server's import makes (issue 44).

attrs generates and compiles a ``__repr__`` for each class (``attr/_make.py``:
``_make_repr_script``): about 0.14 ms of CPU a class at import, some 6 ms over the
classes ``import mockdcp.server`` makes, for a method that runs only when something is
printed. A class on that path sets ``__repr__ = fields_repr`` instead (attrs then
makes none: its ``auto_detect``): the same text (``Name(field=value, ...)``, the fields
attrs would show, each field's own ``repr=`` callable, ``...`` for an object already
being shown), made by reading ``attrs.fields`` when it is asked for.
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
