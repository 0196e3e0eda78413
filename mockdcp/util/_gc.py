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


def release_freed_memory() -> bool:
    """Give the C heap's free pages back to the system (glibc ``malloc_trim``); False
    where there is no glibc. A large load frees its batches' buffers between the
    structures it keeps, and glibc keeps those holes resident (its mmap threshold grows
    after a large buffer is freed, so later ones come from the heap): after a cold-tier
    load of a million 256-byte documents, about 80 bytes an item. Process-wide: the
    shell calls it after a load, never the model."""
    import ctypes
    import ctypes.util

    name = ctypes.util.find_library("c")
    if name is None:
        return False
    try:
        trim = ctypes.CDLL(name).malloc_trim
    except (OSError, AttributeError):
        return False
    trim(0)
    return True
