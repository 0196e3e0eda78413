"""glibc's allocator, kept from handing pages back between the producer's buffers.

Every piece a stream sends is joined into a fresh buffer of about 256 KiB. With glibc's
default thresholds such a buffer is taken from fresh pages (``mmap``, or heap top that
``free`` trimmed away) nearly every time, and faulting them in and zeroing them cost
about 100 ns a frame, as much as all the rest of a collection-aware stream's work
(measured with ``mockdcp bench`` and a join loop: 145 against 48 ns a frame). Raising
``M_MMAP_THRESHOLD`` and ``M_TRIM_THRESHOLD`` (mallopt(3)) keeps those pages in the
heap for the next piece; a server holds at most a few tens of megabytes more.
"""

from __future__ import annotations

import sys

#: mallopt(3) parameters (glibc malloc.h)
_M_TRIM_THRESHOLD = -1
_M_MMAP_THRESHOLD = -3

_tuned = False


def tune_allocator() -> bool:
    """Raise glibc's trim and mmap thresholds, once per process; False where there is no
    glibc (the call changes nothing then)."""
    global _tuned
    if _tuned or not sys.platform.startswith("linux"):
        return _tuned
    _tuned = True
    import ctypes  # (here: a millisecond of every import of mockdcp, for a call made once)

    try:
        mallopt = ctypes.CDLL(None).mallopt  # the C library the interpreter runs on
    except (OSError, AttributeError):
        return False
    mallopt(_M_TRIM_THRESHOLD, 64 << 20)
    mallopt(_M_MMAP_THRESHOLD, 32 << 20)
    return True
