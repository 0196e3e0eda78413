"""The trio shell: KV and HTTP listeners around the pure layers. The only I/O."""

from __future__ import annotations

from mockdcp.server._serve import (
    DEFAULT_USERS as DEFAULT_USERS,
    MockDcpServer as MockDcpServer,
    serve as serve,
)
from mockdcp.server._thread import Server as Server

__all__ = ["DEFAULT_USERS", "MockDcpServer", "Server", "serve"]
