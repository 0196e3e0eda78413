"""mockdcp: a mock Couchbase DCP producer for testing DCP consumers.

The public API: ``serve`` (an async context manager, inside trio) and ``Server`` (the
same server in a background thread), the server handle ``MockDcpServer``, the error
hierarchy, and the step vocabulary in ``mockdcp.scenario``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from mockdcp.protocol import (
    LocalProtocolError as LocalProtocolError,
    ProtocolError as ProtocolError,
    RemoteProtocolError as RemoteProtocolError,
)
from mockdcp.util import (
    MockDcpError as MockDcpError,
    ModelError as ModelError,
    ScenarioError as ScenarioError,
    ServerError as ServerError,
    lazy_getattr,
)

if TYPE_CHECKING:
    from mockdcp.server import (
        MockDcpServer as MockDcpServer,
        Server as Server,
        serve as serve,
    )
else:
    # the server (trio, the model, the producer: most of mockdcp's import time) loads on
    # first use: ``import mockdcp`` is what pytest does at every start, for the plugin
    # (the ``pytest11`` entry point), in a session that may never start a server
    _LAZY = {"MockDcpServer": "server", "Server": "server", "serve": "server"}
    __getattr__ = lazy_getattr(__name__, _LAZY, globals())

__version__ = "0.5.0"

__all__ = [
    "LocalProtocolError",
    "MockDcpError",
    "MockDcpServer",
    "ModelError",
    "ProtocolError",
    "RemoteProtocolError",
    "ScenarioError",
    "Server",
    "ServerError",
    "__version__",
    "serve",
]
