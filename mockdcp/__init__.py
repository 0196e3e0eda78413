"""mockdcp: a mock Couchbase DCP producer for testing DCP consumers.

The public API: ``serve`` (an async context manager, inside trio) and ``Server`` (the
same server in a background thread), the server handle ``MockDcpServer``, the error
hierarchy, and the step vocabulary in ``mockdcp.scenario``.
"""

from __future__ import annotations

from mockdcp.protocol import (
    LocalProtocolError as LocalProtocolError,
    ProtocolError as ProtocolError,
    RemoteProtocolError as RemoteProtocolError,
)
from mockdcp.server import MockDcpServer as MockDcpServer, Server as Server, serve as serve
from mockdcp.util import (
    MockDcpError as MockDcpError,
    ModelError as ModelError,
    ScenarioError as ScenarioError,
    ServerError as ServerError,
)

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
