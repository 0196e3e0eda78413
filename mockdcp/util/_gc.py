"""The cyclic garbage collector, held off while a bulk load makes millions of objects."""

from __future__ import annotations

import contextlib
import gc
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Iterator


@contextlib.contextmanager
def collector_paused() -> Iterator[None]:
    """The cyclic collector off for the block, on again after it if it was on.

    Process-wide: the shell hands it to the model (``Bucket.pause_collector``), which
    would otherwise see the collector walk the whole heap again and again while a load
    makes its items (about a third of a large load's time)."""
    collecting = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if collecting:
            gc.enable()
