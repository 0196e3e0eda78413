"""Where mockdcp keeps what it makes once and reads back later (an on-disk corpus's
per-vbucket files, Faker's pools of the seeded documents, the bench's installs)."""

from __future__ import annotations

import os
from pathlib import Path


def cache_root() -> Path:
    """``$MOCKDCP_CACHE``, else ``~/.cache/mockdcp``."""
    env = os.environ.get("MOCKDCP_CACHE")
    return Path(env) if env else Path.home() / ".cache" / "mockdcp"
