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
    """The numpy module (imported once per process)."""
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    import numpy

    return numpy
