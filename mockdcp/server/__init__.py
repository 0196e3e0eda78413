"""The trio shell: KV and HTTP listeners around the pure layers. The only I/O."""

from __future__ import annotations

from mockdcp.server._serve import DEFAULT_USERS as DEFAULT_USERS
from mockdcp.server._serve import MockDcpServer as MockDcpServer
from mockdcp.server._serve import serve as serve
