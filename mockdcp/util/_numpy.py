"""numpy, loaded on first use (frame patching in the producer, checksums in ``--pcap``).

Its BLAS thread pool (one thread per core, spinning at import) is never used here and
took about 7% of the server's CPU in ``mockdcp bench``: one thread is asked for, unless
the user set ``OPENBLAS_NUM_THREADS`` already.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from types import ModuleType


def load_numpy() -> ModuleType:
    """The numpy module (imported once per process), its thread pool kept to one thread."""
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    import numpy

    return numpy


def tune_process() -> None:
    """What a serving process sets once, before the producer runs: numpy's BLAS pool kept
    to one thread (the producer imports numpy itself, on first use) and glibc's
    allocator keeping the producer's buffer pages (``tune_allocator``)."""
    from mockdcp.util._malloc import tune_allocator

    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    tune_allocator()
