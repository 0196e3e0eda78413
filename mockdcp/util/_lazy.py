"""Lazy re-exports for package ``__init__`` modules (PEP 562 ``__getattr__``)."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping


def lazy_getattr(
    package: str, names: Mapping[str, str], namespace: dict[str, Any]
) -> Callable[[str], object]:
    """A module ``__getattr__`` that imports ``package.<names[name]>`` on first use of
    ``name`` and caches the value in ``namespace`` (the package's globals)."""

    def __getattr__(name: str) -> object:
        module = names.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(f"{package}.{module}"), name)
        namespace[name] = value
        return value

    return __getattr__
