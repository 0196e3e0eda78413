"""mockdcp: a mock Couchbase DCP producer for testing DCP consumers."""

from __future__ import annotations

from mockdcp._errors import (
    LocalProtocolError as LocalProtocolError,
    MockDcpError as MockDcpError,
    ModelError as ModelError,
    ProtocolError as ProtocolError,
    RemoteProtocolError as RemoteProtocolError,
    ScenarioError as ScenarioError,
    ServerError as ServerError,
)

__version__ = "0.1.0"
