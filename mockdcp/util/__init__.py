"""What every layer may use: mockdcp's error hierarchy (its root and the errors of the
model, scenarios and server; the protocol's own errors are in ``mockdcp.protocol``) and
three process helpers.

``lazy_getattr`` makes a package's re-exports load on first use. The others change
process-wide state, so only the shell (``mockdcp.server``, the commands) calls them and
passes what the pure layers need in: ``tune_process`` (glibc's allocator thresholds, numpy's
thread pool kept to one thread) once at start, ``load_numpy`` where the shell itself needs
numpy, ``collector_paused`` handed to the model for bulk loads.
"""

from __future__ import annotations

from mockdcp.util._errors import (
    MockDcpError as MockDcpError,
    ModelError as ModelError,
    ScenarioError as ScenarioError,
    ServerError as ServerError,
    raise_unwrapped as raise_unwrapped,
)
from mockdcp.util._gc import (
    collector_paused as collector_paused,
    release_freed_memory as release_freed_memory,
)
from mockdcp.util._lazy import lazy_getattr as lazy_getattr
from mockdcp.util._malloc import tune_allocator as tune_allocator
from mockdcp.util._numpy import load_numpy as load_numpy, tune_process as tune_process

__all__ = [
    "MockDcpError",
    "ModelError",
    "ScenarioError",
    "ServerError",
    "collector_paused",
    "lazy_getattr",
    "load_numpy",
    "raise_unwrapped",
    "tune_allocator",
    "tune_process",
]
