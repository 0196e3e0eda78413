"""numpy for the producer's bulk frame work, imported on first use.

The producer only imports it: keeping numpy's BLAS pool to one thread is process-wide
state, which the shell sets before serving (``mockdcp.util.tune_process``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from types import ModuleType

_NUMPY: list[ModuleType] = []


def numpy_module() -> ModuleType:
    """The numpy module (imported once; the producer's arrays are typed loosely)."""
    if not _NUMPY:
        import numpy

        _NUMPY.append(numpy)
    return _NUMPY[0]
