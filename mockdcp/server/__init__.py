"""The trio shell: KV and HTTP listeners around the pure layers. The only I/O.

The certificate and TLS names load on first use (``cryptography`` is not imported until a
TLS option or ``mockdcp ca`` needs it).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from mockdcp.server._network import (
    EXTERNAL_KEYWORDS as EXTERNAL_KEYWORDS,
    TLS_KEYWORDS as TLS_KEYWORDS,
)
from mockdcp.server._serve import (
    DEFAULT_USERS as DEFAULT_USERS,
    MockDcpServer as MockDcpServer,
    serve as serve,
)
from mockdcp.server._thread import Server as Server
from mockdcp.util import lazy_getattr

if TYPE_CHECKING:
    from mockdcp.server._certs import (
        Identity as Identity,
        default_tls_dir as default_tls_dir,
        issue_certificate as issue_certificate,
        load_or_create_ca as load_or_create_ca,
    )
    from mockdcp.server._tls import client_context as client_context
    from mockdcp.server._tls_stream import TlsStream as TlsStream
else:
    _LAZY = {
        "Identity": "_certs",
        "default_tls_dir": "_certs",
        "issue_certificate": "_certs",
        "load_or_create_ca": "_certs",
        "client_context": "_tls",
        "TlsStream": "_tls_stream",
    }
    __getattr__ = lazy_getattr(__name__, _LAZY, globals())

#: the documented API; the other names are for mockdcp's own packages (the CLI, the plugin)
__all__ = ["DEFAULT_USERS", "MockDcpServer", "Server", "serve"]
