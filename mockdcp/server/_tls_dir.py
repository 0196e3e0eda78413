"""Where the kept CA lives: known without loading the TLS machinery (``cryptography``),
so a server can name its CA file before it has made or read it."""

from __future__ import annotations

import os
from pathlib import Path

#: the CA certificate's file in the TLS directory
CA_FILE = "ca.pem"


def default_tls_dir() -> Path:
    """``$XDG_DATA_HOME/mockdcp``, else ``~/.local/share/mockdcp`` (XDG Base Directory
    Specification); ``MOCKDCP_TLS_DIR`` overrides both."""
    if os.environ.get("MOCKDCP_TLS_DIR"):
        return Path(os.environ["MOCKDCP_TLS_DIR"])
    data = os.environ.get("XDG_DATA_HOME") or os.path.join(
        os.path.expanduser("~"), ".local", "share"
    )
    return Path(data) / "mockdcp"
